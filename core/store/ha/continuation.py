"""The slave's check of what the master sends, free of I/O: the bytes must continue this log, and they go into the
log only as whole records that pass their checks (RocketMQ's slave appends raw bytes; here the log never holds a
torn record, so what a reader sees below its end is always whole).

The master cuts its log anywhere (at most ha_transfer_batch_size a frame, never across a segment). Bytes are kept
here until their record is whole; then the records come out in `Piece`s, one run of whole records in one segment
at a time, or the filler that closes a segment (the master's segments must be as large as this log's: a filler
says where its segment ends). Refused (ReplicationRefused), and nothing of it kept:

- data at another offset than where the bytes received so far end (the master is not sending this log's
  continuation: another master, or a master whose log is shorter than this one);
- bytes that are not a record where a record must start, or a record that fails its checks (size, magic, CRCs,
  lengths) or says it is at another offset than where it lies.

- bytes that differ from this log's own last bytes (`overlap`): a slave that holds a log reports its end less
  OVERLAP_BYTES, so that the master's first bytes are its copy of this log's tail; unless they are the same bytes,
  this log is not a copy of the master's (another broker's log, or a master that lost what this one holds).

A slave with an empty log takes the master's data from wherever it starts, if that is the start of a segment (the
master sends a new slave its last segment, as RocketMQ does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.store.errors import RecordFormatError, ReplicationRefused
from core.store.log.record_codec import (
    BLANK_MAGIC,
    BLANK_MIN_SIZE,
    HEADER_SIZE,
    INT64,
    PHYSICAL_OFFSET_POS,
    RECORD_MAGIC,
    SIZE_MAGIC,
    check_record,
    decode_record,
)
from core.store.stored_message import StoredMessage

# How much of its log's tail a slave asks its master again, to compare (4 KiB: records carry their offsets, store
# times and CRCs, so two logs that differ differ there).
OVERLAP_BYTES = 4096


@dataclass(slots=True)
class Piece:
    """Whole records of one segment, from commit-log offset `pos`, decoded in `messages`; or (filler) the filler
    record's first bytes at `pos`, after which the log goes on at the next segment."""

    pos: int
    data: bytes
    messages: list[StoredMessage] = field(default_factory=list)
    filler: bool = False

    @property
    def end(self) -> int:
        return self.pos + len(self.data)


class LogContinuation:
    """`end`: where this log ends; `empty`: whether it holds nothing yet (it may then start where the master
    starts, at a segment's start)."""

    __slots__ = ("_buffer", "_empty", "_overlap", "max_record_size", "parsed", "received", "segment_size")

    def __init__(self, end: int, empty: bool, segment_size: int, max_record_size: int, overlap: bytes = b"") -> None:
        """`overlap`: this log's last bytes, up to `end`; the master is asked for them again first (`start`)."""
        self.segment_size = segment_size
        self.max_record_size = max_record_size
        self.received = end - len(overlap)  # every byte the master sent below this has arrived
        self.parsed = end  # every byte below this is in whole records given out (or in a filler's segment)
        self._empty = empty
        self._overlap = overlap  # what the master must send first: this log's tail, not yet compared
        self._buffer = bytearray()  # the bytes from `parsed` to `received`

    @property
    def start(self) -> int:
        """Where the master is asked to start: this log's end, less the overlap compared."""
        return self.received

    def accept(self, offset: int, data: bytes) -> list[Piece]:
        """The pieces that `data`, sent for commit-log offset `offset`, completes. Raises ReplicationRefused."""
        if self._overlap and offset == self.received:
            data = self._compare(offset, data)
            if not data:
                return []
            offset = self.received
        if offset != self.received:
            if not (self._empty and offset % self.segment_size == 0):
                raise ReplicationRefused(
                    f"the master sent data for commit-log offset {offset}, but this log ends at {self.received}: "
                    "it does not continue this log (is the master another broker group's, or did its log lose "
                    "what this one holds?)"
                )
            self.received = self.parsed = offset
            self._buffer.clear()
        self._empty = False
        if self.parsed > self.received:  # inside a filler's segment: the master sends its zeros
            skip = min(len(data), self.parsed - self.received)
            self.received += skip
            data = data[skip:]
        self.received += len(data)
        self._buffer += data
        return self._pieces()

    def _compare(self, offset: int, data: bytes) -> bytes:
        """Check the master's copy of this log's tail; what follows it."""
        overlap = self._overlap
        length = min(len(overlap), len(data))
        if data[:length] != overlap[:length]:
            at = offset + next(i for i in range(length) if data[i] != overlap[i])
            raise ReplicationRefused(
                f"the master's log differs from this one at commit-log offset {at}: this log is not a copy of the"
                " master's, and does not continue this log (is the master another broker group's, or did it lose"
                " what this one holds?)"
            )
        self._overlap = overlap[length:]
        self.received += length
        return data[length:]

    def _pieces(self) -> list[Piece]:
        pieces: list[Piece] = []
        buffer = self._buffer
        at = 0  # in `buffer`, whose first byte is at `parsed`
        run_start = 0
        messages: list[StoredMessage] = []
        segment_size = self.segment_size
        while True:
            pos = self.parsed + at
            left = segment_size - pos % segment_size
            if len(buffer) - at < SIZE_MAGIC.size:
                break
            total, magic = SIZE_MAGIC.unpack_from(buffer, at)
            if magic == BLANK_MAGIC:
                if total != left:
                    raise ReplicationRefused(
                        f"the filler at commit-log offset {pos} ends its segment at {pos + total}, but this log's "
                        f"segments end at {pos + left}: give this broker the master's segment_size"
                    )
                if at > run_start:
                    pieces.append(Piece(self.parsed + run_start, bytes(buffer[run_start:at]), messages))
                    messages = []
                pieces.append(Piece(pos, bytes(buffer[at : at + BLANK_MIN_SIZE]), filler=True))
                segment_end = pos + left
                del buffer[: min(len(buffer), at + left)]
                self.parsed = segment_end
                at = run_start = 0
                continue
            if magic != RECORD_MAGIC or not HEADER_SIZE <= total <= min(self.max_record_size, left - BLANK_MIN_SIZE):
                raise ReplicationRefused(
                    f"the master's data at commit-log offset {pos} is not a record of this log (size {total}, "
                    f"magic 0x{magic & 0xFFFFFFFF:08x}): it does not continue this log"
                )
            if len(buffer) - at < total:
                break
            try:
                check_record(buffer, at, at + total)
            except RecordFormatError as exc:
                raise ReplicationRefused(f"the master's record at commit-log offset {pos} is damaged: {exc}") from None
            said = INT64.unpack_from(buffer, at + PHYSICAL_OFFSET_POS)[0]
            if said != pos:
                raise ReplicationRefused(
                    f"the master's record at commit-log offset {pos} says it is at {said}: it does not continue "
                    "this log"
                )
            messages.append(decode_record(buffer, at, at + total, False))
            at += total
        if at > run_start:
            pieces.append(Piece(self.parsed + run_start, bytes(buffer[run_start:at]), messages))
            del buffer[:at]
            self.parsed += at
        return pieces
