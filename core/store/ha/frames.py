"""The bytes of the HA link (RocketMQ's HAConnection and HAClient), free of I/O.

The slave writes reports: its commit log's max offset, 8 bytes big-endian, when it connects, after each append and
every `ha_send_heartbeat_interval`. The master writes frames: a 12-byte header (the commit-log offset of the data,
8 bytes, and its size, 4 bytes) followed by that many bytes of the log; a frame of size 0 is a heartbeat that says
where the master's next data will start. Readers here take the bytes as they arrive, in pieces of any size.

Under automatic failover (HAConfig.controlled) the slave first sends a hello of 16 bytes, HELLO_MAGIC then its
broker id (8 bytes big-endian), so that the master knows which member of the SyncStateSet each report comes from
(RocketMQ 5's AutoSwitchHAClient sends its broker id in a handshake of its own the same way).
"""

from __future__ import annotations

import struct
from typing import Final

from core.store.errors import HAProtocolError

REPORT: Final = struct.Struct(">q")
HEADER: Final = struct.Struct(">qi")
HELLO_MAGIC: Final = b"MQGATEHA"
HELLO: Final = struct.Struct(">8sq")
assert REPORT.size == 8 and HEADER.size == 12 and HELLO.size == 16


def encode_hello(broker_id: int) -> bytes:
    return HELLO.pack(HELLO_MAGIC, broker_id)


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_header(offset: int, size: int) -> bytes:
    return HEADER.pack(offset, size)


class ReportReader:
    """The master's side: the slave's reports. Only whole reports count, and only the last of those that arrived
    together matters (each says how far the slave's log reaches; they only grow). With `hello`, the first 16 bytes
    are the slave's hello, and `broker_id` its id once they have arrived."""

    __slots__ = ("_pending", "broker_id", "hello")

    def __init__(self, hello: bool = False) -> None:
        self._pending = b""
        self.hello = hello
        self.broker_id: int | None = None

    def feed(self, data: bytes) -> int | None:
        """The offset of the last whole report in what has arrived, or None if none is whole yet."""
        buffer = self._pending + data
        if self.hello and self.broker_id is None:
            if len(buffer) < HELLO.size:
                self._pending = buffer
                return None
            magic, broker_id = HELLO.unpack_from(buffer)
            if magic != HELLO_MAGIC or broker_id < 0:
                raise HAProtocolError(
                    f"expected a slave's hello ({HELLO_MAGIC!r} and its broker id), got {bytes(buffer[:16])!r}: is"
                    " the slave set up for automatic failover ([controller]) as this master is?"
                )
            self.broker_id = int(broker_id)
            buffer = buffer[HELLO.size :]
        whole = len(buffer) - len(buffer) % REPORT.size
        self._pending = buffer[whole:]
        if not whole:
            return None
        (offset,) = REPORT.unpack_from(buffer, whole - REPORT.size)
        if offset < 0:
            raise HAProtocolError(f"the slave reported a negative offset {offset}")
        return int(offset)


class FrameReader:
    """The slave's side: the master's frames, each (offset, data) once its data is whole. A frame larger than
    `max_size` is refused (HAProtocolError): the master sends at most ha_transfer_batch_size at a time."""

    __slots__ = ("_buffer", "max_size")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buffer = self._buffer
        buffer += data
        frames: list[tuple[int, bytes]] = []
        at = 0
        while len(buffer) - at >= HEADER.size:
            offset, size = HEADER.unpack_from(buffer, at)
            if offset < 0 or size < 0 or size > self.max_size:
                raise HAProtocolError(
                    f"a frame at offset {offset} of {size} bytes: offsets are 0 or more, sizes 0 to {self.max_size}"
                )
            end = at + HEADER.size + size
            if len(buffer) < end:
                break
            frames.append((int(offset), bytes(buffer[at + HEADER.size : end])))
            at = end
        if at:
            del buffer[:at]
        return frames
