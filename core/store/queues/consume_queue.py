"""A consume queue: the logical queue of one (topic, queue id), as fixed 20-byte entries pointing into the log.

Entry layout (big-endian), RocketMQ's:

    offset  size  field
    0       8     commit_log_offset   where the record starts in the commit log
    8       4     size                the record's total size (never 0: an all-zero entry is an unused slot)
    12      8     tags_code           core.store.message.entry_code: the tag hash, for filtering without reading
                                      the log; or, for a parked message, the due time the broker wrote in its
                                      __TAG_CODE property (as RocketMQ's SCHEDULE_TOPIC entries hold deliver times)

Entry n of the queue lives at byte n * 20 of the queue's byte space, which is cut into files of
`entries_per_file` entries named by the byte offset of their first entry, in `consumequeue/<topic>/<queue id>/`.
Reading the entry at a queue offset is arithmetic. Writes are positional, so dispatching the same record twice
(recovery replays from a checkpoint) writes the same bytes to the same place.

The dispatcher is the only writer; readers on other threads see an entry once `max_offset` has moved past it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Final

from core.store.log.mapped_file import MappedFile, MappedFileQueue

ENTRY: Final = struct.Struct(">qiq")
ENTRY_SIZE: Final = 20
assert ENTRY.size == ENTRY_SIZE
_SIZE_FIELD: Final = struct.Struct(">i")
# Bound once: Final, the compiled module calls these directly, where `ENTRY.pack_into(...)` looks the method up on
# every call (the dispatcher writes an entry for every record, and readers read one per message).
_write_entry: Final = ENTRY.pack_into
_read_entry: Final = ENTRY.unpack_from


class ConsumeQueue:
    def __init__(self, root: Path, topic: str, queue_id: int, entries_per_file: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(root / topic / str(queue_id), entries_per_file * ENTRY_SIZE)
        # Offsets are queue offsets (entry numbers). Entries in [min_offset, max_offset) are readable.
        self.min_offset = 0
        self.max_offset = 0
        self.flushed_offset = 0
        # Commit-log offset just past the last entry's record: where the queue stands in the log.
        self.max_physical_end = 0
        self._last: MappedFile | None = None  # the file the dispatcher wrote last (nearly always the next)

    # --- writing (dispatcher thread) ---

    def put(self, queue_offset: int, commit_log_offset: int, size: int, tags_code: int) -> None:
        pos = queue_offset * ENTRY_SIZE
        mapped = self._last
        if mapped is None or not mapped.base <= pos < mapped.end or mapped.closed:
            mapped = self.files.find(pos) or self._file_for(pos)
            self._last = mapped
        _write_entry(mapped.mm, pos - mapped.base, commit_log_offset, size, tags_code)
        if queue_offset >= self.max_offset:
            self.max_physical_end = commit_log_offset + size
            self.max_offset = queue_offset + 1

    def _file_for(self, pos: int) -> MappedFile:
        size = self.files.file_size
        if not self.files.files:
            self.min_offset = self.max_offset = self.flushed_offset = pos // ENTRY_SIZE
            return self.files.create(pos - pos % size)
        if pos < self.files.first_base:
            raise ValueError(f"consume queue {self.topic}/{self.queue_id}: offset {pos // ENTRY_SIZE} was deleted")
        while self.files.files[-1].end <= pos:
            self.files.create(self.files.files[-1].end)
        return self.files.files[-1]

    def flush(self, least_bytes: int = 0) -> int:
        """fdatasync the files written since the last flush, unless that is fewer than `least_bytes`; return the
        queue offset now on disk."""
        target = self.max_offset
        if (target - self.flushed_offset) * ENTRY_SIZE >= max(least_bytes, 1):
            start = self.flushed_offset * ENTRY_SIZE
            for mapped in list(self.files.files):
                if mapped.end > start and mapped.base < target * ENTRY_SIZE and not mapped.closed:
                    mapped.flush()
            self.flushed_offset = target
        return target

    # --- reading (any thread) ---

    def get(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(commit_log_offset, size, tags_code) of the entry at `queue_offset`, or None outside the queue."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        pos = queue_offset * ENTRY_SIZE
        mapped = self.files.find(pos)
        if mapped is None:
            return None
        try:
            return _read_entry(mapped.mm, pos - mapped.base)
        except ValueError:  # the file was deleted by retention under us
            return None

    def entries(self, queue_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """Up to `max_count` entries from `queue_offset`, within one file (callers loop for more)."""
        end = min(self.max_offset, queue_offset + max_count)
        if queue_offset < self.min_offset or queue_offset >= end:
            return []
        pos = queue_offset * ENTRY_SIZE
        mapped = self.files.find(pos)
        if mapped is None:
            return []
        start = pos - mapped.base
        stop = min(mapped.size, start + (end - queue_offset) * ENTRY_SIZE)
        try:
            return list(ENTRY.iter_unpack(mapped.mm[start:stop]))
        except ValueError:
            return []

    def offset_by_time(self, timestamp_ms: int, store_timestamp_at: Callable[[int], int | None]) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms` (binary search).

        `store_timestamp_at(commit_log_offset)` reads a record's store time from the log (None if gone).
        Returns max_offset if every message is older.
        """
        low, high = self.min_offset, self.max_offset
        while low < high:
            mid = (low + high) // 2
            entry = self.get(mid)
            stamp = store_timestamp_at(entry[0]) if entry else None
            if stamp is None or stamp < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return low

    # --- recovery and retention ---

    def load(self) -> None:
        """Map the existing files and find the end of the entries (binary search in the last file)."""
        self.files.load()
        if not self.files.files:
            return
        last = self.files.files[-1]
        count = last.size // ENTRY_SIZE
        low, high = 0, count
        while low < high:  # first unused slot: entries are contiguous from the start of the file
            mid = (low + high) // 2
            if _SIZE_FIELD.unpack_from(last.mm, mid * ENTRY_SIZE + 8)[0] != 0:
                low = mid + 1
            else:
                high = mid
        self.max_offset = self.flushed_offset = (last.base + low * ENTRY_SIZE) // ENTRY_SIZE
        self.min_offset = self.files.first_base // ENTRY_SIZE
        if self.max_offset > self.min_offset:
            entry = self.get(self.max_offset - 1)
            assert entry is not None
            self.max_physical_end = entry[0] + entry[1]

    def truncate_from_physical(self, commit_log_end: int) -> int:
        """Remove entries whose record ends past `commit_log_end` (the log lost its tail). Return how many."""
        removed = 0
        zero = bytes(ENTRY_SIZE)
        while self.max_offset > self.min_offset:
            offset = self.max_offset - 1
            entry = self.get(offset)
            if entry is None or entry[0] + entry[1] <= commit_log_end:
                break
            pos = offset * ENTRY_SIZE
            mapped = self.files.find(pos)
            assert mapped is not None
            mapped.mm[pos - mapped.base : pos - mapped.base + ENTRY_SIZE] = zero
            self.max_offset = offset
            removed += 1
        if removed:
            # Files past the new end would make load() find the end in the wrong file.
            self.files.drop_from(self.max_offset * ENTRY_SIZE + 1)
        self.flushed_offset = min(self.flushed_offset, self.max_offset)
        last = self.get(self.max_offset - 1) if self.max_offset > self.min_offset else None
        self.max_physical_end = last[0] + last[1] if last else 0
        return removed

    def delete_below_physical(self, commit_log_min: int) -> int:
        """Drop files whose every entry points below `commit_log_min` (never the last file) and move min_offset
        to the first entry still in the log. Return the number of files deleted."""
        deleted = 0
        files = self.files
        while len(files.files) > 1:
            first = files.files[0]
            last_entry_pos = first.size - ENTRY_SIZE
            commit_log_offset, size, _ = ENTRY.unpack_from(first.mm, last_entry_pos)
            if size == 0 or commit_log_offset >= commit_log_min:
                break
            files.drop_first()
            deleted += 1
        # Within the first file, skip entries whose records are gone.
        low, high = max(self.min_offset, files.first_base // ENTRY_SIZE), self.max_offset
        while low < high:
            mid = (low + high) // 2
            entry = self._raw(mid)
            if entry[0] < commit_log_min:
                low = mid + 1
            else:
                high = mid
        self.min_offset = low
        return deleted

    def _raw(self, queue_offset: int) -> tuple[int, int, int]:
        pos = queue_offset * ENTRY_SIZE
        mapped = self.files.find(pos)
        assert mapped is not None
        return _read_entry(mapped.mm, pos - mapped.base)

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        self.files.destroy()
