"""The byte layout of an archive segment (archives/segment.py): its header and its records, with their encoders and
their decoder. Pure code: no files, no I/O.

Every integer is big-endian. A segment starts with a header of HEADER_SIZE (80) bytes:

    offset  size  field
    0       8     magic         SEGMENT_MAGIC, b"MQGARCH1"
    8       1     bus_length
    9       64    bus           the archived bus (ASCII, zero-padded): an archive holds one bus's events, and a
                                definition naming another bus is refused instead of mixing two buses in one archive
    73      3     zero
    76      4     header_crc    CRC32 of bytes [0, 76)

then records, one after another, each framed so that reading forward finds where a torn or corrupt tail begins:

    offset  size  field
    0       4     length        bytes of kind and payload (at least 1, at most MAX_RECORD_LENGTH)
    4       4     crc           CRC32 of kind and payload
    8       1     kind
    9       n     payload

    kind        payload
    EVENT  1    queue_id u32, queue_offset u64, store_ms i64, event_ms i64, body: one event as the bus stored it
                (its structured CloudEvents JSON), where it was read from (queue id and offset in the bus topic),
                when the bus stored it (retention counts from there) and its `time` (replays select by it)
    COMMIT 2    count u16, then count x (queue_id u32, next_offset u64): where reading the bus goes on. A batch
                of events is written with a COMMIT after it, then fsync'ed: what follows the last COMMIT is a
                batch whose write did not finish, and recovery cuts it (archives/segment.py)
    SEAL   3    events u64, body_bytes u64, min_event_ms i64, max_event_ms i64, min_store_ms i64, max_store_ms i64:
                the last record of a segment that is full; it has a fixed size (SEAL_RECORD_SIZE), so a segment's
                summary is read from its last bytes without reading the segment. Times are 0 when events is 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from zlib import crc32

from eventbridge.errors import EventBridgeError

SEGMENT_MAGIC = b"MQGARCH1"
# A bus name is at most 64 characters of [A-Za-z0-9_-] (source_file.BUS_NAME).
MAX_BUS_BYTES = 64
_HEADER_BODY = struct.Struct(">8sB64s3x")
_U32 = struct.Struct(">I")
HEADER_SIZE = _HEADER_BODY.size + _U32.size
assert HEADER_SIZE == 80

FRAME = struct.Struct(">IIB")  # length, crc, kind
FRAME_SIZE = FRAME.size
# The store refuses messages over 4 MiB (its max_message_size default), so no event is larger; a length beyond this
# is a corrupt length field, refused before anything is allocated for it.
MAX_RECORD_LENGTH = 16 * 1024 * 1024

KIND_EVENT = 1
KIND_COMMIT = 2
KIND_SEAL = 3

_EVENT_HEAD = struct.Struct(">IQqq")  # queue_id, queue_offset, store_ms, event_ms
_COMMIT_COUNT = struct.Struct(">H")
_COMMIT_ENTRY = struct.Struct(">IQ")  # queue_id, next_offset
_SEAL = struct.Struct(">QQqqqq")
SEAL_RECORD_SIZE = FRAME_SIZE + _SEAL.size
# A bus has 4 queues (bus.BUS_QUEUES); a commit names each once.
MAX_COMMIT_QUEUES = 0xFFFF


class ArchiveFormatError(EventBridgeError, ValueError):
    """The bytes at a position are not a whole, valid header or record."""


@dataclass(frozen=True, slots=True)
class ArchivedEvent:
    """One archived event: the event as the bus stored it, and where and when the bus stored it."""

    queue_id: int
    queue_offset: int
    store_ms: int
    event_ms: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Commit:
    """Where reading each queue of the bus goes on after the events written before this record."""

    positions: dict[int, int]


@dataclass(slots=True)
class SegmentSummary:
    """How many events a segment holds, their bytes, and the span of their event and store times."""

    events: int = 0
    body_bytes: int = 0
    min_event_ms: int = 0
    max_event_ms: int = 0
    min_store_ms: int = 0
    max_store_ms: int = 0

    def add(self, event: ArchivedEvent) -> None:
        if self.events == 0:
            self.min_event_ms = self.max_event_ms = event.event_ms
            self.min_store_ms = self.max_store_ms = event.store_ms
        else:
            self.min_event_ms = min(self.min_event_ms, event.event_ms)
            self.max_event_ms = max(self.max_event_ms, event.event_ms)
            self.min_store_ms = min(self.min_store_ms, event.store_ms)
            self.max_store_ms = max(self.max_store_ms, event.store_ms)
        self.events += 1
        self.body_bytes += len(event.body)

    def copy(self) -> SegmentSummary:
        return SegmentSummary(self.events, self.body_bytes, self.min_event_ms, self.max_event_ms,
                              self.min_store_ms, self.max_store_ms)  # fmt: skip


Record = ArchivedEvent | Commit | SegmentSummary


def encode_header(bus: str) -> bytes:
    name = bus.encode("ascii")
    if not 0 < len(name) <= MAX_BUS_BYTES:
        raise ValueError(f"bus {bus!r}: 1 to {MAX_BUS_BYTES} ASCII characters")
    body = _HEADER_BODY.pack(SEGMENT_MAGIC, len(name), name)
    return body + _U32.pack(crc32(body))


def decode_header(data: bytes) -> str:
    """The bus a segment's header names."""
    if len(data) < HEADER_SIZE:
        raise ArchiveFormatError(f"header: {len(data)} bytes, expected {HEADER_SIZE}")
    magic, length, name = _HEADER_BODY.unpack_from(data)
    (stored_crc,) = _U32.unpack_from(data, _HEADER_BODY.size)
    if magic != SEGMENT_MAGIC:
        raise ArchiveFormatError(f"header: magic {magic!r}, expected {SEGMENT_MAGIC!r}: not an archive segment")
    if stored_crc != crc32(data[: _HEADER_BODY.size]) or not 0 < length <= MAX_BUS_BYTES:
        raise ArchiveFormatError("header: CRC mismatch")
    bus: str = name[:length].decode("ascii")
    return bus


def _frame(kind: int, payload: bytes) -> bytes:
    kind_and_payload = bytes((kind,)) + payload
    return FRAME.pack(len(kind_and_payload), crc32(kind_and_payload), kind) + payload


def encode_event(event: ArchivedEvent) -> bytes:
    head = _EVENT_HEAD.pack(event.queue_id, event.queue_offset, event.store_ms, event.event_ms)
    return _frame(KIND_EVENT, head + event.body)


def encode_commit(positions: dict[int, int]) -> bytes:
    if len(positions) > MAX_COMMIT_QUEUES:
        raise ValueError(f"a commit names at most {MAX_COMMIT_QUEUES} queues")
    parts = [_COMMIT_COUNT.pack(len(positions))]
    parts += [_COMMIT_ENTRY.pack(queue_id, offset) for queue_id, offset in sorted(positions.items())]
    return _frame(KIND_COMMIT, b"".join(parts))


def encode_seal(summary: SegmentSummary) -> bytes:
    payload = _SEAL.pack(summary.events, summary.body_bytes, summary.min_event_ms, summary.max_event_ms,
                         summary.min_store_ms, summary.max_store_ms)  # fmt: skip
    return _frame(KIND_SEAL, payload)


def event_record_size(event: ArchivedEvent) -> int:
    return FRAME_SIZE + _EVENT_HEAD.size + len(event.body)


def commit_record_size(queues: int) -> int:
    return FRAME_SIZE + _COMMIT_COUNT.size + queues * _COMMIT_ENTRY.size


def record_length(data: bytes | memoryview, position: int) -> int | None:
    """The whole size of the record starting at `position` (frame included), or None when fewer than its frame's
    bytes are there. Raises ArchiveFormatError for a length out of range."""
    if len(data) - position < FRAME_SIZE:
        return None
    (length,) = _U32.unpack_from(data, position)
    if not 1 <= length <= MAX_RECORD_LENGTH:
        raise ArchiveFormatError(f"record length {length} out of range 1..{MAX_RECORD_LENGTH}")
    return FRAME_SIZE - 1 + length


def decode_record(data: bytes | memoryview, position: int = 0) -> tuple[Record, int]:
    """The record starting at `position` and the position after it. Raises ArchiveFormatError when the bytes there
    are not a whole valid record: too few of them (a torn write), a CRC mismatch, an unknown kind or a payload of
    the wrong size."""
    size = record_length(data, position)
    if size is None or len(data) - position < size:
        raise ArchiveFormatError(f"record at {position}: torn ({len(data) - position} bytes left)")
    _, stored_crc, kind = FRAME.unpack_from(data, position)
    start = position + FRAME_SIZE - 1  # kind, then payload
    end = position + size
    if crc32(data[start:end]) != stored_crc:
        raise ArchiveFormatError(f"record at {position}: CRC mismatch")
    payload = start + 1
    record: Record
    if kind == KIND_EVENT:
        if end - payload < _EVENT_HEAD.size:
            raise ArchiveFormatError(f"record at {position}: event shorter than its head")
        queue_id, queue_offset, store_ms, event_ms = _EVENT_HEAD.unpack_from(data, payload)
        record = ArchivedEvent(
            queue_id, queue_offset, store_ms, event_ms, bytes(data[payload + _EVENT_HEAD.size : end])
        )
    elif kind == KIND_COMMIT:
        if end - payload < _COMMIT_COUNT.size:
            raise ArchiveFormatError(f"record at {position}: commit without its count")
        (count,) = _COMMIT_COUNT.unpack_from(data, payload)
        if end - payload != _COMMIT_COUNT.size + count * _COMMIT_ENTRY.size:
            raise ArchiveFormatError(f"record at {position}: commit of {count} queues has the wrong size")
        entries = payload + _COMMIT_COUNT.size
        record = Commit(dict(_COMMIT_ENTRY.unpack_from(data, entries + n * _COMMIT_ENTRY.size) for n in range(count)))
    elif kind == KIND_SEAL:
        if end - payload != _SEAL.size:
            raise ArchiveFormatError(f"record at {position}: seal of the wrong size")
        record = SegmentSummary(*_SEAL.unpack_from(data, payload))
    else:
        raise ArchiveFormatError(f"record at {position}: unknown kind {kind}")
    return record, end
