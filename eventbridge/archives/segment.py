"""One segment file of an archive: a header, then records (archives/record.py holds the byte layout), appended in
batches that each end with a COMMIT and are then fsync'ed; a segment that is full ends with a SEAL.

A segment is named by the archive-wide number of its first event, 20 digits and `.seg` (Kafka names its segments
by their base offset), so that the names sort in the order the segments were written.

Recovery, when a segment without a SEAL is opened: its records are read forward from the header. The first record
that is torn (fewer bytes than its length), fails its CRC or has an impossible length ends what can be read; then
everything after the last whole COMMIT is cut (the file is truncated and fsync'ed): it is what a batch whose write
or fsync did not finish left behind, and the events it held are read from the bus again from that COMMIT's
positions. A segment with no whole COMMIT at all cannot be recovered (`create` rules that out short of damage).

Creating a segment writes its header and first COMMIT under a hidden temporary name, fsyncs them, renames the file
and fsyncs the directory: a segment exists whole or not at all, and a new archive's starting positions are on disk
before its first event is appended.

Every method that touches the file blocks: ArchiveLog calls them from a worker thread, one writer at a time.
`read_events` may run in another thread alongside an append: it opens the file itself and reads only up to
`committed`, which moves once the bytes before it are written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from eventbridge.archives.record import (
    HEADER_SIZE,
    SEAL_RECORD_SIZE,
    ArchivedEvent,
    ArchiveFormatError,
    Commit,
    Record,
    SegmentSummary,
    decode_header,
    decode_record,
    encode_commit,
    encode_event,
    encode_header,
    encode_seal,
    record_length,
)

log = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".seg"
_NAME_DIGITS = 20
# Bytes read from a segment at a time when scanning or replaying: a thousand events of a kilobyte, and a bound on
# what a replay holds in memory besides its batch (a record larger than this is read whole, on its own).
READ_CHUNK_BYTES = 1024 * 1024
# fdatasync where there is one (Linux): the data and the file's length, without its times.
_sync = getattr(os, "fdatasync", os.fsync)


def segment_name(base: int) -> str:
    return f"{base:0{_NAME_DIGITS}d}{SEGMENT_SUFFIX}"


def segment_base(path: Path) -> int | None:
    """The base number a segment file's name gives, or None for a file that is not a segment."""
    stem = path.name.removesuffix(SEGMENT_SUFFIX)
    if path.suffix != SEGMENT_SUFFIX or len(stem) != _NAME_DIGITS or not stem.isdigit():
        return None
    return int(stem)


def fsync_directory(directory: Path) -> None:
    """Make a rename or an unlink in `directory` durable: a file's own fsync does not cover its directory entry."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(slots=True)
class ScanResult:
    """What reading a segment forward found: its events up to the last COMMIT, where that COMMIT ends, its
    positions, and how many bytes follow it (a torn or unfinished batch, or a SEAL)."""

    summary: SegmentSummary
    committed: int
    positions: dict[int, int] | None
    trailing_bytes: int


class ArchiveSegment:
    def __init__(
        self,
        path: Path,
        base: int,
        bus: str,
        summary: SegmentSummary,
        committed: int,
        positions: dict[int, int] | None,
        sealed: bool,
    ) -> None:
        self.path = path
        self.base = base
        self.bus = bus
        self.summary = summary
        # Bytes of the file up to the end of its last COMMIT: everything a reader may read.
        self.committed = committed
        # Where reading the bus goes on after this segment's events; None for a sealed segment opened by its SEAL
        # (`last_positions` scans for them).
        self.positions = positions
        self.sealed = sealed
        self._fd: int | None = None

    @property
    def size(self) -> int:
        return self.committed + (SEAL_RECORD_SIZE if self.sealed else 0)

    @property
    def next_base(self) -> int:
        """The base of the segment that follows this one."""
        return self.base + self.summary.events

    def __repr__(self) -> str:
        return f"ArchiveSegment({self.path.name}, events={self.summary.events}, sealed={self.sealed})"

    # --- creating and opening ------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base: int, bus: str, positions: dict[int, int]) -> ArchiveSegment:
        """A new segment holding its header and a COMMIT of `positions`, durable (the directory entry too)."""
        path = directory / segment_name(base)
        temporary = directory / f".{path.name}.tmp"
        data = encode_header(bus) + encode_commit(positions)
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temporary.rename(path)
        fsync_directory(directory)
        return cls(path, base, bus, SegmentSummary(), len(data), dict(positions), sealed=False)

    @classmethod
    def open(cls, path: Path) -> ArchiveSegment:
        """Open a segment: a sealed one by its SEAL, any other by reading it and cutting what follows its last
        COMMIT. Raises ArchiveFormatError for a file whose header is damaged or that holds no whole COMMIT."""
        base = segment_base(path)
        if base is None:
            raise ArchiveFormatError(f"{path.name}: not a segment name")
        with open(path, "rb") as file:
            bus = decode_header(file.read(HEADER_SIZE))
            file_size = os.fstat(file.fileno()).st_size
            seal = _seal_at_end(file, file_size)
            if seal is not None:
                return cls(path, base, bus, seal, file_size - SEAL_RECORD_SIZE, None, sealed=True)
            scan = _scan(file, file_size)
        if scan.positions is None:
            raise ArchiveFormatError(f"{path}: no whole COMMIT record; the segment is damaged")
        if scan.trailing_bytes:
            log.warning("archive segment %s: %d bytes after the last commit cut (a batch whose write did not finish)",
                        path, scan.trailing_bytes)  # fmt: skip
            with open(path, "r+b") as file:
                file.truncate(scan.committed)
                os.fsync(file.fileno())
        return cls(path, base, bus, scan.summary, scan.committed, scan.positions, sealed=False)

    def last_positions(self) -> dict[int, int]:
        """The positions of the segment's last COMMIT (read from the file for a segment opened by its SEAL)."""
        if self.positions is None:
            with open(self.path, "rb") as file:
                self.positions = _scan(file, self.committed).positions
            if self.positions is None:
                raise ArchiveFormatError(f"{self.path}: no whole COMMIT record; the segment is damaged")
        return dict(self.positions)

    # --- writing -------------------------------------------------------------------------------------------

    def append(self, events: Sequence[ArchivedEvent], positions: dict[int, int]) -> None:
        """Append `events` and a COMMIT of `positions`, then fsync. On an error (a full disk) the file is cut back
        to where it was, so the next batch never follows half of this one."""
        if self.sealed:
            raise ValueError(f"{self.path}: sealed; appends go to a new segment")
        data = b"".join([*(encode_event(event) for event in events), encode_commit(positions)])
        fd = self._writer()
        try:
            _write_all(fd, data, self.committed)
            _sync(fd)
        except OSError:
            os.ftruncate(fd, self.committed)
            raise
        for event in events:
            self.summary.add(event)
        self.positions = dict(positions)
        self.committed += len(data)

    def seal(self) -> None:
        """End the segment with its SEAL (fsync'ed): nothing more is appended to it."""
        fd = self._writer()
        try:
            _write_all(fd, encode_seal(self.summary), self.committed)
            _sync(fd)
        except OSError:
            os.ftruncate(fd, self.committed)
            raise
        self.sealed = True
        self.close()

    def _writer(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    # --- reading -------------------------------------------------------------------------------------------

    def read_events(
        self, position: int, end: int, max_bytes: int = READ_CHUNK_BYTES
    ) -> tuple[list[ArchivedEvent], int]:
        """The events of the records from byte `position` (HEADER_SIZE for the first) up to `end` (at most
        `committed`), about `max_bytes` of them (at least one record), and the position after the last one read.
        Raises FileNotFoundError once the segment is deleted (retention, or the archive with it)."""
        events: list[ArchivedEvent] = []
        with open(self.path, "rb") as file:
            for record, _, after in _records(file, max(position, HEADER_SIZE), end, max_bytes):
                if isinstance(record, ArchivedEvent):
                    events.append(record)
                position = after
        return events, position


def _write_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        view = view[written:]
        at += written


def _seal_at_end(file: BinaryIO, file_size: int) -> SegmentSummary | None:
    if file_size < HEADER_SIZE + SEAL_RECORD_SIZE:
        return None
    file.seek(file_size - SEAL_RECORD_SIZE)
    try:
        record, _ = decode_record(file.read(SEAL_RECORD_SIZE))
    except ArchiveFormatError:
        return None
    return record if isinstance(record, SegmentSummary) else None


def _scan(file: BinaryIO, end: int) -> ScanResult:
    """Read every record from the header to `end` or to the first one that is not whole and valid."""
    running = SegmentSummary()
    result = ScanResult(SegmentSummary(), HEADER_SIZE, None, 0)
    position = HEADER_SIZE
    try:
        for record, _, after in _records(file, HEADER_SIZE, end, None):
            position = after
            if isinstance(record, ArchivedEvent):
                running.add(record)
            elif isinstance(record, Commit):
                result.summary, result.committed, result.positions = running.copy(), after, record.positions
            else:
                break  # a SEAL: nothing follows it
    except ArchiveFormatError as exc:
        log.debug("archive segment scan stops at %d: %s", position, exc)
    result.trailing_bytes = end - result.committed
    return result


def _records(file: BinaryIO, position: int, end: int, max_bytes: int | None) -> Iterator[tuple[Record, int, int]]:
    """(record, where it starts, where it ends) from `position` to `end`, reading READ_CHUNK_BYTES at a time; stops
    after about `max_bytes` when given. Raises ArchiveFormatError at a record that is not whole and valid."""
    start = position
    buffer = b""
    buffer_at = position
    while position < end:
        if max_bytes is not None and position - start >= max_bytes:
            return
        offset = position - buffer_at
        size = record_length(buffer, offset)
        if size is None or len(buffer) - offset < size:
            # Refill from `position`: a chunk, or the whole record when it is larger.
            wanted = min(max(READ_CHUNK_BYTES, size or 0), end - position)
            file.seek(position)
            buffer, buffer_at, offset = file.read(wanted), position, 0
            size = record_length(buffer, 0)
            if size is None or len(buffer) < size:
                raise ArchiveFormatError(f"record at {position}: torn ({len(buffer)} bytes before the end)")
        record, after = decode_record(buffer, offset)
        yield record, position, buffer_at + after
        position = buffer_at + after
