"""SIGKILL of `mqgate serve` with publishes in flight: no acknowledged message is lost."""

from __future__ import annotations

import socket
import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from .conftest import Client


@pytest.mark.slow
@pytest.mark.parametrize("qos", [1, 2])
def test_sigkill_loses_no_acknowledged_publish(server_factory, qos):
    server = server_factory("--flush-mode", "SYNC_FLUSH")
    keeper = Client(server, "keeper", clean=False)
    keeper.subscribe("crash/#", qos)
    keeper.disconnect()

    # paho calls on_publish on its network thread while holding its own lock; never hold ours across publish().
    acked_mids: set[int] = set()
    by_mid: dict[int, bytes] = {}
    lock = threading.Lock()
    publisher = paho.Client(CallbackAPIVersion.VERSION2, client_id="publisher")
    publisher.max_inflight_messages_set(50)

    def on_publish(client, userdata, mid, reason, properties):
        with lock:
            acked_mids.add(mid)

    publisher.on_publish = on_publish
    publisher.connect(server.host, server.port)
    publisher.loop_start()
    n = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with lock:
            if len(acked_mids) >= 300:
                break
            outstanding = n - len(acked_mids)
        payload = b"m%d" % n
        info = publisher.publish(f"crash/{n % 4}", payload, qos=qos)
        by_mid[info.mid] = payload
        n += 1
        if outstanding > 200:
            time.sleep(0.002)
    server.kill()  # SIGKILL, with publishes still in flight
    publisher.loop_stop()
    with lock:
        acknowledged = {by_mid[mid] for mid in acked_mids}
    assert len(acknowledged) >= 300

    server = server_factory("--flush-mode", "SYNC_FLUSH", data_dir=server.data_dir)
    keeper = Client(server, "keeper", clean=False)
    assert keeper.flags.session_present is True
    received: set[bytes] = set()
    while not acknowledged <= received:
        received.update(m.payload for m in keeper.receive(1, timeout=15))
    keeper.disconnect()
    server.stop()


@pytest.mark.slow
def test_sigkill_with_qos2_in_flight_stores_each_publish_once(server_factory):
    """A QoS 2 publish stored and PUBREC'd (or stored, with the PUBREC lost in the kill) is resent by the client
    with DUP after the restart: it is recognised, not stored again. Every publish reaches the subscriber once."""
    server = server_factory("--flush-mode", "SYNC_FLUSH")
    keeper = Client(server, "keeper2", clean=False)
    keeper.subscribe("crash2/#", 2)
    keeper.disconnect()

    completed: set[int] = set()
    lock = threading.Lock()
    publisher = paho.Client(CallbackAPIVersion.VERSION2, client_id="publisher2", clean_session=False)
    publisher.max_inflight_messages_set(50)
    publisher.reconnect_delay_set(1, 1)

    def on_publish(client, userdata, mid, reason, properties):
        with lock:
            completed.add(mid)

    publisher.on_publish = on_publish
    publisher.connect(server.host, server.port)
    publisher.loop_start()
    sent: dict[int, bytes] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with lock:
            if len(completed) >= 300:
                break
            outstanding = len(sent) - len(completed)
        if outstanding > 100:
            time.sleep(0.002)
            continue
        payload = b"q%d" % len(sent)
        sent[publisher.publish(f"crash2/{len(sent) % 4}", payload, qos=2).mid] = payload
    server.kill()  # SIGKILL, with QoS 2 publishes at every step of their flow
    # paho's network thread stops within its reconnect delay, so that it reconnects once, to the restarted server:
    # each reconnect attempt resets its in-flight states, and a second reset turns "PUBREL to resend" into a
    # PUBLISH without DUP (a paho 2.2 bug; by MQTT 4.3.3 such a PUBLISH is a new message, stored again, as
    # Mosquitto would).
    publisher.loop_stop()
    with lock:
        assert len(sent) - len(completed) > 0, "nothing was in flight at the kill"

    # Same port, so that paho reconnects by itself and resends what it has in flight (DUP set).
    server = server_factory("--flush-mode", "SYNC_FLUSH", "--mqtt-port", str(server.port), data_dir=server.data_dir)
    publisher.loop_start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(completed) == len(sent):
                break
        time.sleep(0.05)
    publisher.loop_stop()
    with lock:
        assert len(completed) == len(sent), f"{len(sent) - len(completed)} publishes never completed"

    keeper = Client(server, "keeper2", clean=False)
    got: list[bytes] = []
    while len(got) < len(sent):
        got.extend(m.payload for m in keeper.receive(1, timeout=15))
    assert keeper.nothing_more(1.0)
    assert sorted(got) == sorted(sent.values())  # each once: none lost, none stored twice
    keeper.disconnect()
    server.stop()


def _connect_v311(client_id: bytes, clean: bool) -> bytes:
    body = b"\x00\x04MQTT\x04" + bytes([0x02 if clean else 0x00]) + b"\x00\x3c" + len(client_id).to_bytes(2, "big")
    body += client_id
    return bytes([0x10, len(body)]) + body


def _publish_qos2(topic: bytes, packet_id: int, payload: bytes, dup: bool) -> bytes:
    body = len(topic).to_bytes(2, "big") + topic + packet_id.to_bytes(2, "big") + payload
    return bytes([0x34 | (0x08 if dup else 0), len(body)]) + body


def _exchange(sock: socket.socket, data: bytes, expect: bytes) -> None:
    sock.sendall(data)
    got = b""
    while len(got) < len(expect):
        chunk = sock.recv(len(expect) - len(got))
        assert chunk, f"closed; got {got!r}, expected {expect!r}"
        got += chunk
    assert got == expect


def test_qos2_resend_after_restart_is_told_from_a_new_publish(server_factory):
    """After a restart, a PUBLISH with DUP and the id, topic and payload of one stored before is a resend (PUBREC,
    not stored); with DUP clear, or other content, it is a new message, stored (MQTT 4.3.3: an id is reusable once
    its flow completed, and we cannot know whether it did)."""
    server = server_factory()
    keeper = Client(server, "keeper3", clean=False)
    keeper.subscribe("dup/#", 2)
    keeper.disconnect()
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        _exchange(sock, _connect_v311(b"raw2", clean=False), b"\x20\x02\x00\x00")
        _exchange(sock, _publish_qos2(b"dup/x", 7, b"a", dup=False), b"\x50\x02\x00\x07")  # PUBREC, no PUBREL
        server.kill()
    server = server_factory(data_dir=server.data_dir)
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        _exchange(sock, _connect_v311(b"raw2", clean=False), b"\x20\x02\x01\x00")
        _exchange(sock, _publish_qos2(b"dup/x", 7, b"a", dup=True), b"\x50\x02\x00\x07")  # the resend
        _exchange(sock, b"\x62\x02\x00\x07", b"\x70\x02\x00\x07")  # PUBREL -> PUBCOMP
        _exchange(sock, _publish_qos2(b"dup/x", 7, b"a", dup=False), b"\x50\x02\x00\x07")  # new, same content
        _exchange(sock, b"\x62\x02\x00\x07", b"\x70\x02\x00\x07")
        _exchange(sock, _publish_qos2(b"dup/x", 8, b"b", dup=True), b"\x50\x02\x00\x08")  # DUP, never seen
        _exchange(sock, b"\x62\x02\x00\x08", b"\x70\x02\x00\x08")
    keeper = Client(server, "keeper3", clean=False)
    got = [m.payload for m in keeper.receive(3)]
    assert got == [b"a", b"a", b"b"]
    assert keeper.nothing_more()
    keeper.disconnect()
