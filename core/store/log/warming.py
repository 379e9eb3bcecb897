"""Zeros written ahead of the commit log under SYNC_FLUSH (core.store.log.flush_service's SegmentWarmer runs it), so
that the blocks a later flush writes records into are already allocated on disk: an fdatasync of a block that is
new to the file also commits the file system's journal, one of the allocated blocks does not.

The zeros go only past the committed position (below it the segment's bytes are records), WARM_PIECE at a time under
the log's commit lock, so no commit writes records meanwhile and a commit waits for one piece at most.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.store.log.commit_log import CommitLog

# What `warm` writes at a time: zeros, then an fdatasync of them. Larger steps mean fewer journal commits of its own
# beside the flushes' (4 KiB records under SYNC_FLUSH log about 300 MB/s).
WARM_CHUNK = 4 * 1024 * 1024
WARM_PIECE = 256 * 1024
_ZEROS = memoryview(bytes(WARM_PIECE))


class LogWarming:
    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
        # How far `warm` has written zeros (it never writes below the committed position).
        self.warmed_pos = 0

    def warm(self, ahead: int) -> bool:
        """Write zeros over the next WARM_CHUNK of the current segment past the committed position, then fdatasync
        them. True if it wrote (call again); False once `ahead` bytes past the write position are warm, or the
        segment that comes next is not made yet. Raises OSError (a full disk: the log is still written, only slower
        to flush)."""
        fd = -1
        for _ in range(WARM_CHUNK // WARM_PIECE):
            written = self._warm_piece(ahead, fd)
            if written < 0:
                break
            fd = written
        if fd < 0:
            return False
        os.fdatasync(fd)
        return True

    def _warm_piece(self, ahead: int, fd: int) -> int:
        """One WARM_PIECE of `warm`'s zeros; the descriptor written to, or -1 if there is nothing to warm or the next
        piece is in another segment than `fd`'s (synced first)."""
        commit_log = self.commit_log
        with commit_log.commit_lock:
            start = max(self.warmed_pos, commit_log.committed_pos)
            if start >= commit_log.write_pos + ahead:
                return -1
            mapped = commit_log.files.find(start)
            if mapped is None or mapped.closed:
                return -1
            target = mapped.write_fd()
            if fd >= 0 and target != fd:
                return -1
            stop = min(start + WARM_PIECE, mapped.end)
            os.pwrite(target, _ZEROS[: stop - start], start - mapped.base)
            self.warmed_pos = stop
            return target

    @property
    def ahead(self) -> int:
        """How many bytes past the write position `warm` has written (read without the lock: a hint)."""
        commit_log = self.commit_log
        return max(self.warmed_pos, commit_log.committed_pos) - commit_log.write_pos

    def warm_up(self, ahead: int) -> None:
        """`warm` `ahead` bytes now, making the segment at the write position first if there is none yet: at open,
        before any append, so that the first flushes find the log warm too."""
        self.commit_log.ensure_segment()
        while self.warm(ahead):
            pass
