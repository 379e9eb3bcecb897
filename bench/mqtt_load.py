"""MQTT 3.1.1 load generator for bench/mqtt.py: pre-encoded packets over raw sockets, one process per role.

The protocol part is pure and needs no socket: `connect_packet`, `subscribe_packet`, `publish_stream` build
bytes, and `PublishCounter.feed(bytes)` counts the PUBLISH packets a subscriber receives and returns the PUBACKs
it owes. The process bodies (`run_publisher`, `run_subscribers`) are thin loops around them.

Why it is cheap enough not to be the bottleneck (bench/mqtt.py prints its CPU next to the broker's):
  * a publisher builds its whole stream of PUBLISH packets before the clock starts (one frame repeated, each
    packet id patched with `struct.pack_into`); sending is then `send` of a slice of it: under QoS 0 one system
    call per socket buffer's worth, under QoS 1 one per refill;
  * a QoS 1 publisher refills its window a quarter at a time, and sets SO_RCVLOWAT so that the kernel wakes it
    when that many PUBACKs are in rather than once per PUBACK;
  * a QoS 0 subscriber sets SO_RCVLOWAT too (32 KiB, or what it still expects), so it reads hundreds of
    PUBLISHes per call; a QoS 1 subscriber, whose deliveries wait for its PUBACKs, naps briefly after a small
    read and stops napping when that does not let a batch build up (see ACK_NAP);
  * every PUBLISH of a run has the same size (topics of equal length, one payload), so a subscriber checks the
    first two bytes of every frame in a received chunk with one extended slice each (C speed) instead of
    walking it in Python; anything else (a DUP redelivery, a PINGRESP) falls back to a frame-by-frame walk;
  * the PUBACKs for a whole chunk are built by slice assignment into a 4-byte-per-ack template and sent in one
    `sendall`; the PUBACKs a publisher receives are counted the same way.

Frames (MQTT 3.1.1, section 2.2): byte 0 is the packet type in the high nibble and flags in the low nibble
(PUBLISH: DUP 0x08, QoS 0x06, RETAIN 0x01); then the remaining length as a base-128 varint of 1 to 4 bytes.
A PUBLISH carries a 2-byte topic length, the topic, a 2-byte packet id when QoS > 0, and the payload.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from threading import BrokenBarrierError
from typing import Any

PUBLISH = 0x30
PUBACK = 0x40
CONNACK = 0x20
SUBACK = 0x90
DUP_FLAG = 0x08
PUBACK_LENGTH = 4
# Packet ids are 1..65535 (0 is not allowed); a publisher cycles through them.
MAX_PACKET_ID = 65535
# No PINGREQ is ever sent, so keep-alive is off (MQTT 3.1.1, 3.1.2.10: 0 turns the mechanism off).
KEEP_ALIVE = 0
# recv size: large enough that one call takes whatever a broker wrote since the last one.
RECV_SIZE = 1 << 18
# A publisher stays connected until every subscriber is done (bench/mqtt.py says so), at most this long.
HOLD_LIMIT = 3600.0
# A QoS 1 publisher refills its window when a 1/REFILL_FRACTION of it has been acknowledged.
REFILL_FRACTION = 4
# A QoS 0 subscriber connection is woken when this many bytes are waiting (SO_RCVLOWAT), or all it still expects,
# so it reads hundreds of PUBLISHes per system call rather than one (brokers write each packet on its own).
# Not under QoS 1: deliveries wait for our PUBACKs within the broker's in-flight window, whose size we do not know.
SUBSCRIBER_LOWAT = 32 * 1024
# A QoS 1 subscriber that got fewer than ACK_NAP_BELOW PUBLISHes in one pass acks them, then naps ACK_NAP seconds
# before reading again, so that a broker with a deep in-flight window (Mosquitto here: --window) sends it dozens
# per read. If the pass after a nap brings fewer than ACK_NAP_BELOW again, the broker is waiting for our PUBACKs
# (a small window) or is slow: napping would only cap it, so after ACK_NAP_GIVE_UP such naps in a row the
# subscriber stops napping for the run.
ACK_NAP_BELOW = 8
ACK_NAP = 0.0003
ACK_NAP_GIVE_UP = 4
# With SO_RCVLOWAT set, bytes below it are only read by a sweep after this long without a wake-up; it matters only
# when a broker drops QoS 0 messages (the rest never reaches the mark).
SWEEP_AFTER = 0.05
# Upper bound of PUBACKs built per chunk: RECV_SIZE / smallest QoS 1 PUBLISH (2 + 2 + 1 + 2 bytes).
_ACK_TEMPLATE = b"\x40\x02\x00\x00" * (RECV_SIZE // 7 + 1)

_U16 = struct.Struct(">H")


class ProtocolError(Exception):
    """The broker sent something the generator did not expect (a refused CONNECT or SUBSCRIBE, a bad frame)."""


# --- encoding ------------------------------------------------------------------------------------------------


def remaining_length(value: int) -> bytes:
    """The base-128 varint of the remaining length (1 to 4 bytes, at most 268,435,455)."""
    if not 0 <= value <= 268_435_455:
        raise ValueError(f"remaining length {value} is outside 0..268435455")
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return _U16.pack(len(raw)) + raw


def connect_packet(client_id: str) -> bytes:
    """CONNECT, protocol level 4 (3.1.1), clean session, no keep-alive, no will, no credentials."""
    body = _string("MQTT") + bytes([4, 0x02]) + _U16.pack(KEEP_ALIVE) + _string(client_id)
    return bytes([0x10]) + remaining_length(len(body)) + body


def subscribe_packet(packet_id: int, topic_filter: str, qos: int) -> bytes:
    body = _U16.pack(packet_id) + _string(topic_filter) + bytes([qos])
    return bytes([0x82]) + remaining_length(len(body)) + body


DISCONNECT_PACKET = b"\xe0\x00"


@dataclass(slots=True, frozen=True)
class PublishLayout:
    """Where things are in one PUBLISH frame of a run: every frame of the run has this layout."""

    size: int
    head: bytes  # byte 0 and the first byte of the remaining length: checked on every frame
    packet_id_offset: int  # -1 under QoS 0


def publish_frame(topic: str, payload: bytes, qos: int) -> tuple[bytes, PublishLayout]:
    """One PUBLISH (packet id 0 under QoS 1, to be patched) and its layout."""
    variable = _string(topic) + (b"\x00\x00" if qos else b"")
    body = variable + payload
    header = bytes([PUBLISH | (qos << 1)]) + remaining_length(len(body))
    frame = header + body
    pid_offset = len(header) + len(variable) - 2 if qos else -1
    return frame, PublishLayout(len(frame), frame[:2], pid_offset)


def publish_stream(topic: str, payload: bytes, qos: int, count: int, first_packet_id: int = 1) -> bytearray:
    """`count` PUBLISH frames back to back; under QoS 1 packet ids run from `first_packet_id`, wrapping."""
    frame, layout = publish_frame(topic, payload, qos)
    stream = bytearray(frame * count)
    if qos:
        offset, pack_into = layout.packet_id_offset, _U16.pack_into
        packet_id = first_packet_id - 1
        for n in range(count):
            pack_into(stream, n * layout.size + offset, packet_id % MAX_PACKET_ID + 1)
            packet_id += 1
    return stream


# --- decoding ------------------------------------------------------------------------------------------------


def frame_bounds(buffer: bytes | bytearray | memoryview, position: int) -> tuple[int, int] | None:
    """(header length, frame length) of the frame starting at `position`, or None if it is not all there."""
    multiplier, length, index = 1, 0, position + 1
    while True:
        if index >= len(buffer):
            return None
        byte = buffer[index]
        length += (byte & 0x7F) * multiplier
        index += 1
        if not byte & 0x80:
            break
        multiplier <<= 7
        if multiplier > 128**3:
            raise ProtocolError(f"remaining length longer than 4 bytes at offset {position}")
    header = index - position
    if position + header + length > len(buffer):
        return None
    return header, header + length


class PublishCounter:
    """Counts the PUBLISH packets of a subscriber's byte stream and returns the PUBACKs owed for QoS 1 ones."""

    __slots__ = ("_check", "_layout", "_pending", "count", "duplicates", "others")

    def __init__(self, layout: PublishLayout, max_batch: int = RECV_SIZE) -> None:
        self._layout = layout
        self._pending = b""
        # First byte and remaining-length byte of as many frames as one chunk can hold.
        frames = max_batch // layout.size + 2
        self._check = (layout.head[:1] * frames, layout.head[1:2] * frames)
        self.count = 0
        self.duplicates = 0
        self.others = 0  # frames that were not PUBLISH (e.g. PINGRESP): ignored

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete frame held for the next `feed`."""
        return len(self._pending)

    def feed(self, data: bytes) -> bytes:
        """Take received bytes; return the PUBACK bytes to send (empty when none are owed)."""
        buffer = self._pending + data if self._pending else data
        size = self._layout.size
        whole = len(buffer) // size
        end = whole * size
        if whole and buffer[0:end:size] == self._check[0][:whole] and buffer[1:end:size] == self._check[1][:whole]:
            self.count += whole
            self._pending = buffer[end:]
            if self._layout.packet_id_offset < 0:
                return b""
            offset = self._layout.packet_id_offset
            acks = bytearray(_ACK_TEMPLATE[: whole * PUBACK_LENGTH])
            acks[2::4] = buffer[offset:end:size]
            acks[3::4] = buffer[offset + 1 : end : size]
            return bytes(acks)
        return self._walk(buffer)

    def _walk(self, buffer: bytes) -> bytes:
        acks = bytearray()
        position = 0
        while True:
            bounds = frame_bounds(buffer, position)
            if bounds is None:
                break
            header, length = bounds
            kind = buffer[position]
            if kind & 0xF0 == PUBLISH:
                self.count += 1
                if kind & DUP_FLAG:
                    self.duplicates += 1
                qos = (kind >> 1) & 0x03
                if qos == 1:
                    topic_length = _U16.unpack_from(buffer, position + header)[0]
                    at = position + header + 2 + topic_length
                    acks += b"\x40\x02" + buffer[at : at + 2]
                elif qos:
                    raise ProtocolError(f"QoS {qos} PUBLISH received; the generator speaks QoS 0 and 1 only")
            else:
                self.others += 1
            position += length
        self._pending = buffer[position:]
        return bytes(acks)


def count_pubacks(buffer: bytes) -> tuple[int, bytes]:
    """(PUBACKs in `buffer`, unconsumed tail); other packets are skipped."""
    whole = len(buffer) // PUBACK_LENGTH
    end = whole * PUBACK_LENGTH
    if whole and buffer[0:end:4] == b"\x40" * whole and buffer[1:end:4] == b"\x02" * whole:
        return whole, buffer[end:]
    acked, position = 0, 0
    while (bounds := frame_bounds(buffer, position)) is not None:
        if buffer[position] & 0xF0 == PUBACK:
            acked += 1
        position += bounds[1]
    return acked, buffer[position:]


# --- sockets -------------------------------------------------------------------------------------------------


def _read_frame(sock: socket.socket, pending: bytearray) -> bytes:
    """Block until one whole frame is in `pending` (filling it from `sock`), remove and return it."""
    while (bounds := frame_bounds(pending, 0)) is None:
        data = sock.recv(RECV_SIZE)
        if not data:
            raise ProtocolError("broker closed the connection during the handshake")
        pending += data
    frame = bytes(pending[: bounds[1]])
    del pending[: bounds[1]]
    return frame


def open_session(host: str, port: int, client_id: str, timeout: float) -> tuple[socket.socket, bytearray]:
    """Connect and complete CONNECT/CONNACK; returns the socket and any bytes read past the CONNACK."""
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(connect_packet(client_id))
    pending = bytearray()
    connack = _read_frame(sock, pending)
    if connack[0] != CONNACK or len(connack) != 4 or connack[3] != 0:
        raise ProtocolError(f"{client_id}: CONNECT refused or bad CONNACK {connack.hex()}")
    return sock, pending


def subscribe(sock: socket.socket, pending: bytearray, topic_filter: str, qos: int) -> None:
    sock.sendall(subscribe_packet(1, topic_filter, qos))
    suback = _read_frame(sock, pending)
    if suback[0] != SUBACK or suback[-1] not in (0, 1, 2):
        raise ProtocolError(f"SUBSCRIBE {topic_filter!r} QoS {qos} refused: SUBACK {suback.hex()}")
    if suback[-1] != qos:
        raise ProtocolError(f"SUBSCRIBE {topic_filter!r}: asked for QoS {qos}, granted {suback[-1]}")


# --- process bodies ------------------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class PublisherJob:
    host: str
    port: int
    client_id: str
    topic: str
    payload: bytes
    qos: int
    count: int
    window: int  # QoS 1: PUBLISHes in flight; QoS 0: ignored (the stream is written as fast as TCP takes it)
    connect_timeout: float
    idle_timeout: float  # give up when the socket takes nothing (QoS 0) or no PUBACK comes (QoS 1) for this long


@dataclass(slots=True, frozen=True)
class SubscriberJob:
    host: str
    port: int
    client_ids: Sequence[str]
    topic_filter: str
    qos: int
    layout: PublishLayout
    expected: int  # PUBLISHes expected on each connection
    connect_timeout: float
    first_timeout: float  # give up when the first PUBLISH takes longer than this after the start
    idle_timeout: float  # then give up when nothing arrives for this long


def _cpu() -> float:
    return time.process_time()


def run_publisher(job: PublisherJob, barrier: Any, done: Any, results: Any) -> None:
    """Connect, wait at the barrier, publish `job.count` messages, report, wait for `done`, disconnect."""
    report: dict[str, Any] = {"role": "publisher", "client_id": job.client_id}
    sock = None
    try:
        sock, _ = open_session(job.host, job.port, job.client_id, job.connect_timeout)
        stream = publish_stream(job.topic, job.payload, job.qos, job.count)
        view = memoryview(stream)
        size = len(stream) // job.count
        barrier.wait()
        cpu = _cpu()
        report["first_send_ns"] = time.perf_counter_ns()
        if job.qos == 0:
            # send, not sendall: each call takes what fits in the socket buffer, and its timeout then means "no
            # progress for idle_timeout" (a sendall's timeout bounds the whole call, however slow but steady).
            sock.settimeout(job.idle_timeout)
            sent_bytes = 0
            try:
                while sent_bytes < len(stream):
                    sent_bytes += sock.send(view[sent_bytes:])
            except TimeoutError:
                report["stalled"] = True
            report.update(sent=sent_bytes // size, acked=0, last_ack_ns=0)
        else:
            sent = min(job.window, job.count)
            sock.sendall(view[: sent * size])
            acked, tail, last_ack, lowat = 0, b"", 0, 0
            refill = max(1, job.window // REFILL_FRACTION)
            sock.settimeout(job.idle_timeout)
            try:
                while acked < job.count:
                    # Wake up once `refill` PUBACKs are in, not once per PUBACK (the kernel holds the reader
                    # until SO_RCVLOWAT bytes are there): a quarter of a window is refilled in one write.
                    want = max(1, min(refill, sent - acked) * PUBACK_LENGTH - len(tail))
                    if want != lowat:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
                        lowat = want
                    data = sock.recv(RECV_SIZE)
                    if not data:
                        raise ProtocolError("broker closed the connection")
                    last_ack = time.perf_counter_ns()
                    new, tail = count_pubacks(tail + data if tail else data)
                    acked += new
                    more = min(new, job.count - sent)
                    if more > 0:
                        sock.sendall(view[sent * size : (sent + more) * size])
                        sent += more
            except TimeoutError:
                report["stalled"] = True
            report.update(sent=sent, acked=acked, last_ack_ns=last_ack)
        report["cpu_s"] = _cpu() - cpu
    except BrokenBarrierError:
        report["error"] = "start barrier broken (another worker failed)"
    except Exception as exc:
        barrier.abort()
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
    results.put(report)
    # Stay connected until the subscribers are done, so no broker sees a disconnect mid-measurement.
    done.wait(HOLD_LIMIT)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.sendall(DISCONNECT_PACKET)
        sock.close()


class _Connection:
    """One subscriber connection during the timed part: its socket, counter and wake-up mark."""

    __slots__ = ("counter", "expected", "lowat", "sock")

    def __init__(self, sock: socket.socket, counter: PublishCounter, expected: int) -> None:
        self.sock, self.counter, self.expected, self.lowat = sock, counter, expected, 1

    def take(self, data: bytes) -> int:
        """Count `data`, send the PUBACKs it asks for; the number of PUBLISHes in it."""
        before = self.counter.count
        acks = self.counter.feed(data)
        if acks:
            self.sock.sendall(acks)
        return self.counter.count - before

    def set_lowat(self, qos: int, frame_size: int) -> None:
        if qos:
            return
        missing = (self.expected - self.counter.count) * frame_size - self.counter.pending_bytes
        want = max(1, min(SUBSCRIBER_LOWAT, missing))
        if want != self.lowat:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            self.lowat = want

    @property
    def complete(self) -> bool:
        return self.counter.count >= self.expected


def run_subscribers(job: SubscriberJob, barrier: Any, results: Any) -> None:
    """Open and subscribe every connection of `job`, wait at the barrier, count PUBLISHes (acking QoS 1 ones)
    until each connection has `job.expected` or the broker goes quiet, report."""
    report: dict[str, Any] = {"role": "subscriber", "connections": len(job.client_ids)}
    connections: list[_Connection] = []
    try:
        early: list[bytes] = []
        selector = selectors.DefaultSelector()
        for client_id in job.client_ids:
            sock, pending = open_session(job.host, job.port, client_id, job.connect_timeout)
            connections.append(_Connection(sock, PublishCounter(job.layout), job.expected))
            subscribe(sock, pending, job.topic_filter, job.qos)
            # Blocking, so that sendall of acks may wait; reads use MSG_DONTWAIT.
            sock.settimeout(None)
            early.append(bytes(pending))
        barrier.wait()
        cpu = _cpu()
        started = time.perf_counter_ns()
        received, last = 0, 0
        for connection, data in zip(connections, early, strict=True):
            if data:
                received += connection.take(data)
            if not connection.complete:
                connection.set_lowat(job.qos, job.layout.size)
                selector.register(connection.sock, selectors.EVENT_READ, connection)
        deadline = time.monotonic() + job.first_timeout
        # QoS 0 needs no nap (SO_RCVLOWAT batches it); under QoS 1 count consecutive naps that did not help.
        futile = 0 if job.qos == 1 else ACK_NAP_GIVE_UP
        napped, naps_helped = False, 0
        while selector.get_map():
            wait = deadline - time.monotonic()
            if wait <= 0:
                report["stalled"] = True
                break
            events = selector.select(min(wait, SWEEP_AFTER) if job.qos == 0 else wait)
            if not events and job.qos == 0:
                # Nothing reached its mark for a while: take what is below it (only after a broker dropped some).
                events = [(key, 0) for key in selector.get_map().values()]
            got, pass_frames = False, 0
            for key, _ in events:
                connection = key.data
                try:
                    # Never a blocking read: epoll also reports a socket readable below SO_RCVLOWAT when its
                    # receive buffer is under memory pressure (many small segments), and a blocking recv would
                    # then wait for the mark while the broker waits for window.
                    data = connection.sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                if not data:
                    raise ProtocolError("broker closed a subscriber connection")
                got = True
                frames = connection.take(data)
                received += frames
                pass_frames += frames
                if connection.complete:
                    selector.unregister(connection.sock)
                else:
                    connection.set_lowat(job.qos, job.layout.size)
            if got:
                last = time.perf_counter_ns()
                deadline = time.monotonic() + job.idle_timeout
                small = pass_frames < ACK_NAP_BELOW
                if napped:
                    futile = futile + 1 if small else 0
                    naps_helped += not small
                napped = small and futile < ACK_NAP_GIVE_UP
                if napped:
                    time.sleep(ACK_NAP)
        report.update(
            received=received,
            duplicates=sum(c.counter.duplicates for c in connections),
            started_ns=started,
            last_receive_ns=last,
            cpu_s=_cpu() - cpu,
            naps_helped=naps_helped,
            napping=futile < ACK_NAP_GIVE_UP,
        )
    except BrokenBarrierError:
        report["error"] = "start barrier broken (another worker failed)"
    except Exception as exc:
        barrier.abort()
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = traceback.format_exc()
    results.put(report)
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.sock.sendall(DISCONNECT_PACKET)
        connection.sock.close()
