"""One index file: a hash table on disk from message keys to commit-log offsets (RocketMQ's IndexFile).

Every integer is big-endian. The file is a 40-byte header, `slot_count` hash slots, then fixed-size entries:

    header (40 bytes)
    offset  size  field
    0       8     begin_timestamp    store time (ms) of the first entry
    8       8     end_timestamp      latest store time (ms) of any entry
    16      8     begin_phy_offset   commit-log offset of the first indexed message
    24      8     end_phy_offset     commit-log offset of the last indexed message
    32      4     slot_count         number of hash slots: the file describes itself
    36      4     index_count        entries used + 1; entry numbers start at 1 so that 0 can mean "none"

    slots (4 bytes each, at 40 + 4 * slot)
    0       4     number of the newest entry whose key hashes to this slot, 0 = empty

    entries (20 bytes each; entry n, n >= 1, at 40 + 4 * slot_count + 20 * (n - 1))
    0       4     key_hash           zlib.crc32 of the UTF-8 key (unsigned)
    4       8     phy_offset         commit-log offset of the message
    12      4     time_diff          whole seconds from begin_timestamp to the message's store time (>= 0)
    16      4     prev_index         the previous entry of the same slot's chain, 0 = end of the chain

A file holds (size - 40 - 4 * slot_count) // 20 entries; the slot count is read from the header and the entry
capacity from the file size, so files made with other settings still open.

Unlike RocketMQ, entry 0 takes no room (entry n sits at position n - 1) and the header counts all slots rather
than the used ones. The key hash is crc32, not Java's String.hashCode; Python's hash() changes per process.

Crash safety: the entries and slots of a message are written before the header that counts them, and all keys
of one message go in with one header write, so the header never claims a message it does not fully hold. After
a process crash, entries past index_count may be written and slots may point at them: `open` undoes those
slot updates, newest first, using the entries' prev_index (the slot's value before the write).
"""

from __future__ import annotations

import errno
import logging
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from core.store.errors import StoreError
from core.store.log.checksum import crc32
from core.store.log.mapped_file import MappedFile

log = logging.getLogger(__name__)

_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">Iqii")
HEADER_SIZE: Final = _HEADER.size
SLOT_SIZE: Final = _SLOT.size
ENTRY_SIZE: Final = _ENTRY.size
# The methods `put_all` calls for every key, bound once: Final, the compiled module holds each in a C static and calls
# it directly, where `_SLOT.unpack_from(...)` is a lookup of the name and then of the method, every time.
_read_slot: Final = _SLOT.unpack_from
_write_slot: Final = _SLOT.pack_into
_write_entry: Final = _ENTRY.pack_into
_write_header: Final = _HEADER.pack_into
# A new (sparse) index file is created only if this much is free besides it.
FREE_MARGIN = 64 * 1024
assert (HEADER_SIZE, SLOT_SIZE, ENTRY_SIZE) == (40, 4, 20)
_INT32_MAX: Final = 2**31 - 1
_EMPTY_ENTRY = bytes(ENTRY_SIZE)


class IndexFileCorruptError(StoreError):
    """An index file whose header does not fit its size. Names the file and what to do about it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"index file {path}: {reason}; delete it and the index files named after it,"
            " the store rebuilds them from the commit log at the next start"
        )
        self.path = path
        self.reason = reason


class IndexFileClosedError(StoreError):
    """The file was closed (deleted by retention, or the store shut down) while it was being read."""


def key_hash(key: str) -> int:
    return crc32(key.encode())


def file_size(slot_count: int, max_entries: int) -> int:
    return HEADER_SIZE + SLOT_SIZE * slot_count + ENTRY_SIZE * max_entries


class IndexFile:
    """One index file, mapped. Single writer (`put`, `put_all`); `lookup` may run on other threads."""

    __slots__ = (
        "_begin_phy_offset",
        "_begin_timestamp",
        "_closed",
        "_end_phy_offset",
        "_end_timestamp",
        "_entries_pos",
        "_file",
        "_flushed_count",
        "_index_count",
        "_max_entries",
        "_mm",
        "_slot_count",
    )

    def __init__(self, mapped: MappedFile, header: tuple[int, int, int, int, int, int]) -> None:
        """Use `create` or `open`."""
        self._file = mapped
        self._mm = mapped.mm
        (
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._slot_count,
            self._index_count,
        ) = header
        self._entries_pos = HEADER_SIZE + SLOT_SIZE * self._slot_count
        self._max_entries = (mapped.size - self._entries_pos) // ENTRY_SIZE
        self._flushed_count = self._index_count
        self._closed = False

    @classmethod
    def create(cls, path: Path, slot_count: int, max_entries: int) -> IndexFile:
        if slot_count < 1 or max_entries < 1:
            raise ValueError(f"index file {path}: slot_count and max_entries must be positive")
        if path.exists():
            raise FileExistsError(f"index file {path} already exists")
        size = file_size(slot_count, max_entries)
        # Sparse, as RocketMQ's (a 420 MB file of the default size is mostly zeros until it fills), but only when the
        # whole of it fits: a write to an unbacked page of a full file system would raise SIGBUS.
        free = shutil.disk_usage(path.parent).free
        if free < size + FREE_MARGIN:
            raise OSError(
                errno.ENOSPC,
                f"index file {path} needs {size + FREE_MARGIN} bytes free and the file system has {free}",
            )
        mapped = MappedFile(path, 0, size, sparse=True)
        header = (0, 0, 0, 0, slot_count, 1)
        _HEADER.pack_into(mapped.mm, 0, *header)
        index_file = cls(mapped, header)
        index_file._flushed_count = 0  # the header is not on disk yet
        return index_file

    @classmethod
    def open(cls, path: Path) -> IndexFile:
        """Map an existing file, check its header and undo slot updates of entries it does not count."""
        size = path.stat().st_size
        if size < HEADER_SIZE + SLOT_SIZE + ENTRY_SIZE:
            raise IndexFileCorruptError(path, f"{size} bytes, too small for a header, a slot and an entry")
        mapped = MappedFile(path, 0, size)
        try:
            header = _HEADER.unpack_from(mapped.mm, 0)
            _check_header(path, size, header)
            index_file = cls(mapped, header)
        except BaseException:
            mapped.close()
            raise
        index_file._undo_uncounted_entries()
        return index_file

    # --- header ---

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def begin_timestamp(self) -> int:
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy_offset

    @property
    def slot_count(self) -> int:
        return self._slot_count

    @property
    def index_count(self) -> int:
        return self._index_count

    @property
    def entry_count(self) -> int:
        return self._index_count - 1

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_empty(self) -> bool:
        return self._index_count <= 1

    @property
    def is_full(self) -> bool:
        return self._index_count > self._max_entries

    @property
    def closed(self) -> bool:
        return self._closed

    # --- writing (one thread) ---

    def put(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Index one key; False when the file is full."""
        return self.put_all((key,), phy_offset, store_timestamp)

    def put_all(self, keys: Sequence[str], phy_offset: int, store_timestamp: int) -> bool:
        """Index all keys of one message with a single header update; False (nothing written) if they do not
        all fit."""
        count = self._index_count
        if count + len(keys) > self._max_entries + 1:
            return False
        mm = self._mm
        if count == 1:
            self._begin_timestamp = store_timestamp
            self._begin_phy_offset = phy_offset
        time_diff = (store_timestamp - self._begin_timestamp) // 1000
        if time_diff < 0:  # the clock stepped back: the entry gets the file's first second
            time_diff = 0
        elif time_diff > _INT32_MAX:
            time_diff = _INT32_MAX
        slot_count = self._slot_count
        entry_pos = self._entries_pos + (count - 1) * ENTRY_SIZE
        number = count
        for key in keys:
            hashed = crc32(key.encode())
            slot_pos = HEADER_SIZE + (hashed % slot_count) * SLOT_SIZE
            prev = _read_slot(mm, slot_pos)[0]
            if prev >= number or prev < 0:
                # Cannot happen after `open` repaired the file; never link to an entry not written yet.
                prev = 0
            _write_entry(mm, entry_pos, hashed, phy_offset, time_diff, prev)
            _write_slot(mm, slot_pos, number)
            entry_pos += ENTRY_SIZE
            number += 1
        if store_timestamp > self._end_timestamp:
            self._end_timestamp = store_timestamp
        _write_header(
            mm,
            0,
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            phy_offset,
            slot_count,
            number,
        )
        # The end offset before the count: a reader that sees the new count also sees the new end.
        self._end_phy_offset = phy_offset
        self._index_count = number
        return True

    # --- reading (any thread) ---

    def lookup(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Commit-log offsets of entries with the key's hash stored within [begin_ms, end_ms], newest first.

        Times are compared at the file's one-second granularity, inclusively: an entry matches when its
        second overlaps the range, so messages stored up to 999 ms outside it can be returned too. Different
        keys with the same crc32 share entries: the caller checks the message's keys.
        Raises IndexFileClosedError if the file is closed meanwhile.
        """
        if max_num <= 0:
            return []
        if self._closed:
            raise IndexFileClosedError(f"index file {self.path} is closed")
        try:
            return self._lookup(key, max_num, begin_ms, end_ms)
        except ValueError:
            # `close` sets the flag before unmapping, so an unmapped read always finds it set.
            if self._closed:
                raise IndexFileClosedError(f"index file {self.path} was closed during a lookup") from None
            raise

    def _lookup(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        count = self._index_count
        if count <= 1:
            return []
        begin = self._begin_timestamp
        # time_diff is floor((stored - begin) / 1000), so this is exactly "stored in [begin_ms, end_ms]"
        # rounded out to whole seconds.
        low = (begin_ms - begin) // 1000
        high = (end_ms - begin) // 1000
        if high < 0 or high < low:
            return []
        hashed = crc32(key.encode())
        mm = self._mm
        base = self._entries_pos - ENTRY_SIZE  # entry n is at base + n * ENTRY_SIZE
        unpack_entry = _ENTRY.unpack_from
        number = _SLOT.unpack_from(mm, HEADER_SIZE + (hashed % self._slot_count) * SLOT_SIZE)[0]
        # A concurrent put may have linked entries past the count read above: they are fully written, step
        # back through them to the counted part of the chain.
        while number >= count:
            prev = unpack_entry(mm, base + number * ENTRY_SIZE)[3] if number <= self._max_entries else 0
            number = prev if prev < number else 0
        found: list[int] = []
        while number > 0:
            entry_hash, phy_offset, time_diff, prev = unpack_entry(mm, base + number * ENTRY_SIZE)
            # No early stop on an older time as RocketMQ does: after a clock step back, older entries can
            # carry later times.
            if entry_hash == hashed and low <= time_diff <= high:
                found.append(phy_offset)
                if len(found) >= max_num:
                    break
            if prev >= number:  # links always point back; anything else is damage, do not loop
                log.warning("index file %s: entry %d links forward to %d; chain cut", self.path, number, prev)
                break
            number = prev
        return found

    # --- life cycle ---

    def flush(self) -> None:
        """fdatasync if anything was written since the last flush."""
        count = self._index_count
        if count == self._flushed_count:
            return
        self._file.flush()
        self._flushed_count = count

    def close(self) -> None:
        self._closed = True
        self._file.close()

    def destroy(self) -> None:
        self._closed = True
        self._file.destroy()

    def _undo_uncounted_entries(self) -> None:
        """Restore the slots that point at entries written by a put the header does not count."""
        mm = self._mm
        base = self._entries_pos - ENTRY_SIZE
        last = self._index_count
        # A put writes its entries in order; past the written ones the file is still zero-filled.
        while last <= self._max_entries:
            position = base + last * ENTRY_SIZE
            if mm[position : position + ENTRY_SIZE] == _EMPTY_ENTRY:
                break
            last += 1
        if last == self._index_count:
            return
        for number in range(last - 1, self._index_count - 1, -1):
            position = base + number * ENTRY_SIZE
            hashed, _, _, prev = _ENTRY.unpack_from(mm, position)
            slot_pos = HEADER_SIZE + (hashed % self._slot_count) * SLOT_SIZE
            if _SLOT.unpack_from(mm, slot_pos)[0] == number:
                _SLOT.pack_into(mm, slot_pos, prev if 0 <= prev < number else 0)
            mm[position : position + ENTRY_SIZE] = _EMPTY_ENTRY
        self._flushed_count = -1  # the repair must reach the disk at the next flush
        log.warning(
            "index file %s: undid %d entries not counted in its header (crash during a put)",
            self.path,
            last - self._index_count,
        )


def _check_header(path: Path, size: int, header: tuple[int, ...]) -> None:
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = header
    if slot_count < 1 or HEADER_SIZE + SLOT_SIZE * slot_count + ENTRY_SIZE > size:
        raise IndexFileCorruptError(path, f"header says {slot_count} slots, which does not fit {size} bytes")
    max_entries = (size - HEADER_SIZE - SLOT_SIZE * slot_count) // ENTRY_SIZE
    if not 1 <= index_count <= max_entries + 1:
        raise IndexFileCorruptError(
            path, f"header says index_count {index_count}, but the file holds 1 to {max_entries + 1}"
        )
    if index_count > 1 and not (0 <= begin_phy <= end_phy and begin_ts <= end_ts):
        raise IndexFileCorruptError(
            path,
            f"header ranges are inverted (offsets {begin_phy}..{end_phy}, timestamps {begin_ts}..{end_ts})",
        )
