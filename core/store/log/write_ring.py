"""The write ring: where appended records land before the commit log's segment files (RocketMQ's transient store
pool, kept in a file so that it survives the process).

Why: the first write to each page of a new (sparse) segment through its mapping is a page fault in which the
kernel finds, zeroes and maps a page, on the appending thread and under the GIL. On this VM 4 KiB records stored
that way ran at 440-510 MB/s on memory the host had taken back, against 4,000-4,500 MB/s for the same bytes copied
into a ring whose pages stay mapped and handed to the segment with `pwrite` of up to a mebibyte, which releases
the GIL: the kernel's page allocation and copy then run on another core (bench/HISTORY.md, eighth step).

So `CommitLog.append` copies a record into this ring, and `CommitLog.commit` (the dispatcher each round, the
flush, or an append that finds the ring full) writes what lies between the committed position and the write
position into the segments. Durability does not change: the ring is a shared mapping of a file, so an appended
record is in the page cache when the append returns and survives the process being killed; opening the store
restores the records the ring holds past its committed position into the segments before recovery reads them.

Layout: a header page (magic, version, data size, committed position), then `size` bytes of data. The byte at
commit-log position p lives at data offset p % size; a record may wrap around the end.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
from pathlib import Path

from core.store.log.mapped_file import create_full_size

# In the store directory, beside commitlog/.
WRITE_RING_FILE = "commitlog.ring"
HEADER_PAGE = 4096
MAGIC = 0x4D515752  # "MQWR"
VERSION = 1
_HEADER = struct.Struct(">IIqq")  # magic, version, data size, committed position
_COMMITTED = struct.Struct(">q")
_COMMITTED_POS = 16
# Data written per pwrite call: large enough for the kernel to allocate pages in batches, small enough that the
# ring's pages and the segment's stay in cache.
WRITE_CHUNK = 1024 * 1024
_ZEROS = bytes(WRITE_CHUNK)


class WriteRing:
    """One ring file, mapped read-write. `size` is the data size; positions are commit-log offsets."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.configured_size = size
        self.size = size  # of the ring mapped: the last run's may differ until `prepare`
        self._fd = -1
        self.mm: mmap.mmap | None = None
        self.view: memoryview | None = None

    # --- opening ---------------------------------------------------------------------------------------

    def open_existing(self) -> int | None:
        """Map the ring left by the last run, if any, at the size it was written with; return its committed
        position (None if there is no ring file). Raises OSError (EINVAL) if the file is not a ring."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None
        try:
            length = os.fstat(fd).st_size
            if length < HEADER_PAGE:
                raise OSError(errno.EINVAL, f"{self.path}: {length} bytes, shorter than a ring's header")
            header = os.pread(fd, _HEADER.size, 0)
            magic, version, size, committed = _HEADER.unpack(header)
            if magic != MAGIC or version != VERSION or size != length - HEADER_PAGE or size <= 0:
                raise OSError(errno.EINVAL, f"{self.path}: not a write ring of version {VERSION}")
        except BaseException:
            os.close(fd)
            raise
        self._map(fd, size)
        return int(committed)

    def prepare(self, committed: int) -> None:
        """Make the ring ready for appends: its data zeroed and its pages in memory, committed at `committed`, at
        the configured size (the file is made again if the last run's had another). Called once the last run's
        records are restored: what the ring held is in the log by then."""
        if self.mm is not None and self.size == self.configured_size:
            self.set_committed(committed)
            self._touch()
            return
        self._create(committed)

    def _create(self, committed: int) -> None:
        self.close()
        self.size = self.configured_size
        try:
            # Preallocated, blocks reserved: a write to the mapping can never find the disk full (SIGBUS).
            create_full_size(
                self.path, HEADER_PAGE + self.size, False, _HEADER.pack(MAGIC, VERSION, self.size, committed)
            )
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cannot create the write ring {self.path} ({HEADER_PAGE + self.size} bytes): {exc.strerror};"
                " free disk space or lower write_ring_size",
            ) from None
        self._map(os.open(self.path, os.O_RDWR), self.size)
        self._touch()

    def _map(self, fd: int, size: int) -> None:
        self.size = size
        self._fd = fd
        self.mm = mmap.mmap(fd, HEADER_PAGE + size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.mm)

    def _touch(self) -> None:
        """Write every data page once, so that appends find them mapped (no page fault on the appending thread)."""
        mm = self.mm
        assert mm is not None
        position = HEADER_PAGE
        end = HEADER_PAGE + self.size
        while position < end:
            step = min(WRITE_CHUNK, end - position)
            mm[position : position + step] = _ZEROS[:step]
            position += step

    # --- writing (under the commit log's lock) ---------------------------------------------------------

    def put(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Copy `data` to commit-log position `position`, wrapping past the ring's end."""
        mm = self.mm
        assert mm is not None
        start = position % self.size
        first = self.size - start
        if first >= len(data):
            mm[HEADER_PAGE + start : HEADER_PAGE + start + len(data)] = data
            return
        mm[HEADER_PAGE + start : HEADER_PAGE + self.size] = data[:first]
        mm[HEADER_PAGE : HEADER_PAGE + len(data) - first] = data[first:]

    # --- committing (under the commit log's commit lock) -----------------------------------------------

    def write_out(self, fd: int, file_offset: int, position: int, length: int) -> None:
        """pwrite `length` bytes from commit-log position `position` to `file_offset` of `fd`."""
        view = self.view
        assert view is not None
        size = self.size
        while length > 0:
            start = position % size
            step = min(length, size - start, WRITE_CHUNK)
            written = os.pwrite(fd, view[HEADER_PAGE + start : HEADER_PAGE + start + step], file_offset)
            if written <= 0:
                raise OSError(errno.EIO, f"{self.path}: pwrite wrote nothing")
            position += written
            file_offset += written
            length -= written

    def set_committed(self, committed: int) -> None:
        mm = self.mm
        assert mm is not None
        _COMMITTED.pack_into(mm, _COMMITTED_POS, committed)

    # --- reading (restore at open) ---------------------------------------------------------------------

    def read(self, position: int, length: int) -> bytes:
        """`length` bytes from commit-log position `position` (wrapping); at most the ring's size."""
        mm = self.mm
        assert mm is not None
        start = position % self.size
        first = self.size - start
        if first >= length:
            return mm[HEADER_PAGE + start : HEADER_PAGE + start + length]
        return mm[HEADER_PAGE + start : HEADER_PAGE + self.size] + mm[HEADER_PAGE : HEADER_PAGE + length - first]

    def close(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self.mm is not None:
            self.mm.close()
            self.mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
