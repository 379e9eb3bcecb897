"""Reading the commit log back when the store opens: the records the write ring holds past its committed position,
copied into the segments (`restore_from_ring`), and the scan of the segments that recovery checks record by record
(`scan`): corruption in the middle is skipped and reported, a torn tail cut off.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from core.store.errors import RecordFormatError
from core.store.log.mapped_file import MappedFile, MappedFileQueue
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
from core.store.log.write_ring import WriteRing
from core.store.message import StoredMessage

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ScanResult:
    end: int  # where the valid log ends
    records: int
    corrupt: list[tuple[str, int, int]]  # (file, file offset, bytes skipped)
    truncated: int  # bytes of torn tail cut off


def restore_from_ring(ring: WriteRing, files: MappedFileQueue, max_record_size: int, committed: int) -> tuple[int, int]:
    """Copy the ring's records from `committed` on into the segments, as long as each is whole (its checks
    pass) and says it is at the position it is read from: (where they end, how many)."""
    pos = committed
    count = 0
    while True:
        mapped = files.find(pos)
        if mapped is None:
            return pos, count
        local = pos - mapped.base
        if local + BLANK_MIN_SIZE > mapped.size:
            pos = mapped.end
            continue
        total, magic = SIZE_MAGIC.unpack(ring.read(pos, SIZE_MAGIC.size))
        if magic == BLANK_MAGIC and total == mapped.size - local:
            # A filler carries no position to check: it is the log's only if the log went on to a next segment
            # (a roll makes the segment before it writes anything there), not one left from the last lap.
            if files.find(mapped.end) is None:
                return pos, count
            ring.write_out(mapped.write_fd(), local, pos, BLANK_MIN_SIZE)
            pos = mapped.end
            continue
        if magic != RECORD_MAGIC or not HEADER_SIZE <= total <= min(max_record_size, mapped.size - local):
            return pos, count
        data = ring.read(pos, total)
        try:
            check_record(memoryview(data), 0, total)
        except RecordFormatError:
            return pos, count
        if INT64.unpack_from(data, PHYSICAL_OFFSET_POS)[0] != pos:
            return pos, count
        ring.write_out(mapped.write_fd(), local, pos, total)  # pwrite: a full disk is an error here, not SIGBUS
        pos += total
        count += 1


def scan(files_queue: MappedFileQueue, max_record_size: int, start: int, result: ScanResult) -> Iterator[StoredMessage]:
    """Yield every valid record from `start` (a record boundary) to the end of the log, checking each CRC.

    A record that fails its checks is either corruption in the middle of the log (a valid record follows
    within the largest record size: it is skipped and reported with file and offset) or the torn tail (no
    valid record follows: the log ends there). `result` is filled in as the scan goes.
    """
    files = files_queue.files
    pos = start
    index = (pos - files[0].base) // files_queue.file_size if files else 0
    while index < len(files):
        mapped = files[index]
        local = pos - mapped.base
        while True:
            if local + BLANK_MIN_SIZE > mapped.size:
                break
            total, magic = SIZE_MAGIC.unpack_from(mapped.mm, local)
            if magic == BLANK_MAGIC and total == mapped.size - local:
                break
            try:
                total = check_record(mapped.view, local, mapped.size)
                if INT64.unpack_from(mapped.mm, local + PHYSICAL_OFFSET_POS)[0] != mapped.base + local:
                    raise RecordFormatError("physical offset field does not match the position")
            except RecordFormatError as exc:
                resync = _resync(mapped, local, max_record_size)
                if resync is None:
                    result.end = mapped.base + local
                    result.truncated = _zero_tail(mapped, local, max_record_size)
                    if result.truncated:
                        log.warning(
                            "%s: torn tail at file offset %d (%s); %d bytes cut off",
                            mapped.path,
                            local,
                            exc,
                            result.truncated,
                        )
                    return
                result.corrupt.append((str(mapped.path), local, resync - local))
                log.error(
                    "%s: corrupt record at file offset %d (commit-log offset %d): %s; %d bytes skipped",
                    mapped.path,
                    local,
                    mapped.base + local,
                    exc,
                    resync - local,
                )
                local = resync
                continue
            yield decode_record(mapped.view, local, mapped.size)
            result.records += 1
            local += total
        index += 1
        if index < len(files):
            pos = files[index].base
        else:
            result.end = mapped.end
            return
    result.end = pos


def _resync(mapped: MappedFile, local: int, max_record_size: int) -> int | None:
    """The file offset of the next valid record after a bad one, searching one largest record ahead."""
    limit = min(mapped.size, local + max_record_size + HEADER_SIZE)
    magic = RECORD_MAGIC.to_bytes(4, "big")
    probe = local + 1
    while True:
        found = mapped.mm.find(magic, probe + 4, limit)
        if found < 0:
            return None
        candidate = found - 4
        try:
            check_record(mapped.view, candidate, mapped.size)
            if INT64.unpack_from(mapped.mm, candidate + PHYSICAL_OFFSET_POS)[0] == mapped.base + candidate:
                return candidate
        except RecordFormatError:
            pass
        probe = found - 3


def _zero_tail(mapped: MappedFile, local: int, max_record_size: int) -> int:
    """Zero the torn bytes after the end so that a later scan cannot mistake them for records."""
    limit = min(mapped.size, local + max_record_size + HEADER_SIZE)
    region = mapped.mm[local:limit]
    dirty = len(region.rstrip(b"\x00"))
    if dirty:
        mapped.mm[local : local + dirty] = bytes(dirty)
    return dirty
