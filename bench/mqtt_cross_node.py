"""One QoS 1 stream, publisher and subscriber each in its own process, over raw MQTT 3.1.1 sockets
(bench/mqtt_load.py's encoding): the publisher keeps WINDOW PUBLISHes unacknowledged (or sends at a fixed rate),
each carrying its send time (CLOCK_MONOTONIC, the same for every process of the machine); the subscriber PUBACKs
every delivery and keeps its latency. bench/cluster.py runs it with both clients on one node of a cluster, then
with the publisher on the other node.

`measure(publish_port, subscribe_port, count)` returns (messages per second, latencies in ms): the rate from the
first send to the last delivery, every message delivered once (else SystemExit)."""

from __future__ import annotations

import multiprocessing
import socket
import struct
import time
from typing import Any

from bench.mqtt_load import (
    MAX_PACKET_ID,
    count_pubacks,
    frame_bounds,
    open_session,
    publish_frame,
    subscribe,
)

WINDOW = 64
PAYLOAD_BYTES = 64
IDLE_TIMEOUT_S = 30.0
_STAMP = struct.Struct(">Q")
_U16 = struct.Struct(">H")


def _publisher(port: int, topic: str, count: int, rate: float, start: Any, results: Any) -> None:
    sock, pending = open_session("127.0.0.1", port, f"xn-pub-{port}", 10)
    frame, layout = publish_frame(topic, b"\x00" * PAYLOAD_BYTES, 1)
    stamp_at = len(frame) - PAYLOAD_BYTES
    buffer = bytearray(frame)
    start.wait()
    acked = sent = 0
    tail = bytes(pending)
    sock.settimeout(IDLE_TIMEOUT_S)
    began = time.monotonic()
    while acked < count:
        if rate:  # paced: the next send waits for its time
            due = began + sent / rate
            if sent < count and time.monotonic() < due:
                sock.settimeout(max(due - time.monotonic(), 0.0001))
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    data = b""
                sock.settimeout(IDLE_TIMEOUT_S)
                if data:
                    got, tail = count_pubacks(tail + data)
                    acked += got
                continue
        while sent < count and sent - acked < WINDOW and (not rate or time.monotonic() >= began + sent / rate):
            _U16.pack_into(buffer, layout.packet_id_offset, sent % MAX_PACKET_ID + 1)
            _STAMP.pack_into(buffer, stamp_at, time.monotonic_ns())
            sock.sendall(buffer)
            sent += 1
        data = sock.recv(65536)
        if not data:
            break
        got, tail = count_pubacks(tail + data)
        acked += got
    results.put(("acked", acked))
    sock.close()


def _subscriber(port: int, topic_filter: str, count: int, subscribed: Any, results: Any) -> None:
    sock, pending = open_session("127.0.0.1", port, f"xn-sub-{port}", 10)
    subscribe(sock, pending, topic_filter, 1)
    subscribed.set()
    sock.settimeout(IDLE_TIMEOUT_S)
    latencies: list[float] = []
    buffer = bytearray(pending)
    try:
        while len(latencies) < count:
            position, acks = 0, bytearray()
            while (bounds := frame_bounds(buffer, position)) is not None:
                header, length = bounds
                if buffer[position] & 0xF0 == 0x30:
                    now = time.monotonic_ns()
                    topic_length = _U16.unpack_from(buffer, position + header)[0]
                    pid_at = position + header + 2 + topic_length
                    sent_ns = _STAMP.unpack_from(buffer, pid_at + 2)[0]
                    latencies.append((now - sent_ns) / 1e6)
                    acks += b"\x40\x02" + bytes(buffer[pid_at : pid_at + 2])
                position += length
            del buffer[:position]
            if acks:
                sock.sendall(acks)
            if len(latencies) >= count:
                break
            data = sock.recv(65536)
            if not data:
                break
            buffer += data
    except TimeoutError:
        pass
    results.put(("latencies", latencies, time.monotonic_ns()))
    sock.close()


def measure(
    publish_port: int, subscribe_port: int, count: int, run: str, rate: float = 0.0
) -> tuple[float, list[float]]:
    """`rate`: messages per second the publisher keeps to (0: as fast as its window allows)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    subscribed, start = context.Event(), context.Event()
    topic = f"xn/{run}/data"
    subscriber = context.Process(target=_subscriber, args=(subscribe_port, f"xn/{run}/+", count, subscribed, results))
    subscriber.start()
    if not subscribed.wait(30):
        raise SystemExit("the subscriber did not subscribe within 30 s")
    publisher = context.Process(target=_publisher, args=(publish_port, topic, count, rate, start, results))
    publisher.start()
    time.sleep(1.0)  # the publisher connected
    began = time.monotonic_ns()
    start.set()
    answers = [results.get(timeout=600) for _ in range(2)]
    publisher.join()
    subscriber.join()
    acked = next(answer[1] for answer in answers if answer[0] == "acked")
    latencies, ended = next((answer[1], answer[2]) for answer in answers if answer[0] == "latencies")
    if acked != count or len(latencies) != count:
        raise SystemExit(f"{run}: {acked} of {count} acknowledged, {len(latencies)} delivered")
    return count / ((ended - began) / 1e9), latencies


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
