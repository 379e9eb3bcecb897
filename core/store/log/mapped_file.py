"""Memory-mapped files of a fixed size named by the 20-digit offset of their first byte, and queues of them.

The commit log and every consume queue are a `MappedFileQueue`: files of one fixed size, back to back, so the file
holding an offset is found by arithmetic.

Files are created at their full size in one step (under a temporary name, then renamed). Consume-queue files are
preallocated with posix_fallocate: a full disk is an error when the file is created. Commit-log segments and index
files are sparse, as RocketMQ's: an index file of the default size is 420 MB, mostly zeros until it fills, and
the first write to a preallocated (unwritten) page costs the kernel about three times a sparse one, which halved
4 KiB append throughput here. The price: if the file system fills up
after an index file was created, a write to one of its pages raises SIGBUS (segments are written with pwrite,
which reports a full disk as an error). The commit log and the index therefore
create a file only when the whole of it fits in the free space, and the store refuses writes at disk_refuse_ratio.

Consume queues and index files are written through the mapping (no syscall); commit-log segments are written with
pwrite from the write ring (core.store.log.write_ring), on a descriptor `write_fd` keeps. `flush` is fdatasync on a
file descriptor, which releases the GIL (mmap.flush would hold it for the whole msync).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME_DIGITS = 20
TEMP_SUFFIX = ".tmp"


def file_name(offset: int) -> str:
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFile:
    """One file of `size` bytes mapped read-write; `base` is the queue offset of its first byte."""

    __slots__ = ("_closed", "_fd", "base", "end", "flushed", "mm", "path", "size", "view")

    def __init__(self, path: Path, base: int, size: int, sparse: bool = False) -> None:
        self.path = path
        self.base = base
        self.size = size
        self.end = base + size  # an attribute, not a property: the append path reads it for every record
        existed = path.exists()
        if not existed:
            create_full_size(path, size, sparse)
        fd = os.open(path, os.O_RDWR)
        try:
            current = os.fstat(fd).st_size
            if current != size:
                raise OSError(errno.EINVAL, f"{path}: {current} bytes, expected {size}")
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            # The mapping keeps the file open by itself: no descriptor per file, so thousands of light queues (one
            # per EventBridge target or MQTT subscription filter) do not run the process out of descriptors.
            os.close(fd)
        self._closed = False
        self._fd = -1  # opened by `write_fd` only (commit-log segments)
        self.view = memoryview(self.mm)
        # File-relative position up to which the file is known to be on disk.
        self.flushed = 0
        if not existed:
            fsync_dir(path.parent)

    def flush(self) -> None:
        # fdatasync on a descriptor opened for the purpose: the pages written through the mapping are the file's
        # page cache, so they reach the disk as msync(MS_SYNC) would send them. Not mmap.flush: CPython holds the
        # GIL through its msync, and a flush of the commit log or of thousands of consume queues then stopped every
        # other thread (the event loop serving clients among them) for the length of the disk write. os.open,
        # os.fdatasync and os.close release it. A commit-log segment keeps its descriptor open (`write_fd`): that
        # one serves, and a flush under SYNC_FLUSH takes one GIL hand-off instead of three.
        fd = self._fd
        if fd >= 0:
            try:
                os.fdatasync(fd)
            except OSError:
                if self._closed:
                    return  # closed by retention meanwhile: nothing left to flush
                raise
            return
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            if self._closed:
                return  # deleted by retention meanwhile: nothing left to flush
            raise
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def write_fd(self) -> int:
        """A descriptor of the file kept open for writing with pwrite (the commit log's segments, a few at a time);
        closed with the file."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR)
        return self._fd

    def close(self) -> None:
        if self._closed:
            return
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.view.release()
        try:
            self.mm.close()
        except BufferError:
            # A reader still holds a slice; the mapping goes away with the last reference.
            log.debug("%s: mapping still referenced at close", self.path)
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def create_full_size(path: Path, size: int, sparse: bool, head: bytes = b"") -> None:
    """Create `path` at its full size atomically, beginning with `head`: size it under a temporary name, then
    rename. A crash leaves at most a `.tmp` file (deleted by load), never a short file under the real name."""
    temporary = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if sparse:
            os.ftruncate(fd, size)
        else:
            _preallocate(fd, size)
        if head:
            os.pwrite(fd, head, 0)
    except BaseException:
        os.close(fd)
        temporary.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.rename(temporary, path)


def remove_temporary_files(directory: Path) -> None:
    for leftover in directory.glob("*" + TEMP_SUFFIX):
        log.warning("removing %s, left by a crash while the file was being created", leftover)
        leftover.unlink(missing_ok=True)


def _preallocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
            os.ftruncate(fd, size)  # the file system cannot reserve blocks; fall back to a sparse file
        else:
            raise


class MappedFileQueue:
    """The files of one log in a directory, contiguous: file k starts at first.base + k * file_size."""

    def __init__(self, directory: Path, file_size: int, sparse: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        self.sparse = sparse
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map the files already in the directory. A gap or a file of the wrong size is an error."""
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_temporary_files(self.directory)
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == FILE_NAME_DIGITS)
        expected = None
        for path in names:
            base = int(path.name)
            if path.stat().st_size != self.file_size:
                raise OSError(
                    errno.EINVAL,
                    f"{path}: {path.stat().st_size} bytes, but files of this log have {self.file_size};"
                    " was the configured file size changed?",
                )
            if expected is not None and base != expected:
                raise OSError(errno.EINVAL, f"{path}: expected the next file to start at {expected}")
            self.files.append(MappedFile(path, base, self.file_size, self.sparse))
            expected = base + self.file_size

    def create(self, base: int) -> MappedFile:
        if self.files and base != self.files[-1].end:
            raise ValueError(f"{self.directory}: new file at {base} would leave a gap after {self.files[-1].end}")
        self.directory.mkdir(parents=True, exist_ok=True)
        mapped = MappedFile(self.directory / file_name(base), base, self.file_size, self.sparse)
        self.files.append(mapped)
        return mapped

    def find(self, offset: int) -> MappedFile | None:
        files = self.files  # one snapshot: retention replaces the list, it never shifts it under a reader
        if not files:
            return None
        index = (offset - files[0].base) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    @property
    def first_base(self) -> int:
        return self.files[0].base if self.files else 0

    def drop_first(self) -> MappedFile:
        mapped = self.files[0]
        self.files = self.files[1:]
        mapped.destroy()
        return mapped

    def drop_from(self, offset: int) -> None:
        """Delete every file that starts at or after `offset`."""
        doomed = [mapped for mapped in self.files if mapped.base >= offset]
        self.files = [mapped for mapped in self.files if mapped.base < offset]
        for mapped in doomed:
            mapped.destroy()

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()

    def destroy(self) -> None:
        for mapped in self.files:
            mapped.destroy()
        self.files.clear()
