"""The index directory (`store_dir/index`): index files in creation order, built from the dispatched log.

Files are named by their creation time, `yyyyMMddHHmmssSSS` in local time as in RocketMQ; a name is bumped by
1 ms until it sorts after the last file, so name order is creation order even if the clock steps back. Only
the last file is written; a message whose keys do not all fit in it goes, whole, into a new file.

What is indexed: "topic#key" for each space-separated key of a message and "topic#unique_id". The
commit-log offsets of indexed messages grow from file to file, which gives the two rules recovery needs:
a message at or below the last file's end_phy_offset is already indexed (so re-dispatch is harmless), and
after a crash every file that reaches past the checkpointed offset is dropped and rebuilt from the log.

Threads: `build` runs on the dispatcher thread, `flush` on the checkpoint thread, `delete_below` on the
retention thread and `query` on the event loop. The file list is an immutable tuple replaced under a lock, so
a query works on a snapshot; a file deleted under it is skipped.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from pathlib import Path

from core.store.index.file import IndexFile, IndexFileClosedError, IndexFileCorruptError
from core.store.log.mapped_file import remove_temporary_files

log = logging.getLogger(__name__)

_NAME_FORMAT = "%Y%m%d%H%M%S%f"  # %f takes the 3 digits of milliseconds as a fraction
_NAME_LENGTH = 17
_KEY_SEPARATOR = " "  # RocketMQ's MessageConst.KEY_SEPARATOR


def _time_name(moment: datetime) -> str:
    return moment.strftime("%Y%m%d%H%M%S") + f"{moment.microsecond // 1000:03d}"


def _name_after(name: str) -> str:
    try:
        return _time_name(datetime.strptime(name, _NAME_FORMAT) + timedelta(milliseconds=1))
    except ValueError:  # not a valid date (a file named by hand): any larger name keeps the order
        return str(int(name) + 1)


def _never_initialised(path: Path) -> bool:
    """A crash between creating a file and writing its header leaves zeros where the header goes."""
    with path.open("rb") as file:
        head = file.read(40)
    return head.count(0) == len(head)


class IndexService:
    """The index files of a store. Offsets returned by `query` may belong to other keys with the same hash."""

    def __init__(self, directory: Path, slots: int, max_entries: int) -> None:
        if slots < 1 or max_entries < 1:
            raise ValueError(f"index {directory}: slots and max_entries must be positive")
        self.directory = Path(directory)
        self.slots = slots
        self.max_entries = max_entries
        self._files: tuple[IndexFile, ...] = ()
        self._lock = threading.Lock()
        # Commit-log offset of the last indexed message, -1 when none; build's idempotence test.
        self._indexed_offset = -1

    @property
    def files(self) -> tuple[IndexFile, ...]:
        return self._files

    @property
    def indexed_offset(self) -> int:
        """end_phy_offset of the last non-empty file: every message at or below it is indexed. -1 if none."""
        return self._indexed_offset

    def load(self, clean_shutdown: bool, checkpoint_offset: int) -> int:
        """Map the files already there; return the commit-log offset from which to re-dispatch the log.

        `checkpoint_offset` is a commit-log offset below which every record's index entries were on disk at
        the last checkpoint. After a crash, files reaching past it may have lost pages and are deleted, as
        RocketMQ does with its index timestamp; the index is then rebuilt from the end of the last file kept.
        If none had to go, the index is whole up to the checkpoint and re-dispatch starts there.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_temporary_files(self.directory)
        paths = sorted(
            path
            for path in self.directory.iterdir()
            if len(path.name) == _NAME_LENGTH and path.name.isdigit() and path.is_file()
        )
        files: list[IndexFile] = []
        dropped = False
        try:
            for path in paths:
                if _never_initialised(path):
                    log.warning("index file %s has no header (crash while it was created); deleting it", path)
                    path.unlink()
                    continue
                if dropped and not clean_shutdown:
                    log.warning("index file %s follows a dropped one; deleting it, the index is rebuilt", path)
                    path.unlink()
                    continue
                try:
                    index_file = IndexFile.open(path)
                except IndexFileCorruptError as exc:
                    if clean_shutdown:
                        raise
                    # After a crash the index is rebuilt from the log past the last file kept, so a file with a
                    # header that cannot be read goes with those after it, as the files past the checkpoint do.
                    # (A CI run of bench/crash.py once left the newest file with 0 slots in its header.)
                    log.warning("%s; after a crash: deleting it and the index files after it", exc)
                    path.unlink()
                    dropped = True
                    continue
                if not clean_shutdown and index_file.end_phy_offset > checkpoint_offset:
                    log.warning(
                        "index file %s reaches commit-log offset %d, past the checkpoint %d; deleting it, the"
                        " index is rebuilt from the log",
                        path,
                        index_file.end_phy_offset,
                        checkpoint_offset,
                    )
                    index_file.destroy()
                    dropped = True
                    continue
                files.append(index_file)
        except BaseException:
            for index_file in files:
                index_file.close()
            raise
        with self._lock:
            self._files = tuple(files)
        self._indexed_offset = self._last_end(self._files)
        log.info(
            "index %s: %d files, indexed up to commit-log offset %d",
            self.directory,
            len(files),
            self._indexed_offset,
        )
        if not clean_shutdown and not dropped:
            return max(checkpoint_offset, self._indexed_offset, 0)
        return max(self._indexed_offset, 0)

    @staticmethod
    def _last_end(files: tuple[IndexFile, ...]) -> int:
        for index_file in reversed(files):
            if not index_file.is_empty:
                return index_file.end_phy_offset
        return -1

    def build(
        self,
        topic: str,
        keys: str | None,
        unique_id: str | None,
        commit_log_offset: int,
        store_timestamp: int,
    ) -> None:
        """Index one dispatched message. A message already indexed (re-dispatch after recovery) is skipped."""
        if commit_log_offset <= self._indexed_offset:
            return
        prefix = topic + "#"
        if keys:
            index_keys = [prefix + key for key in keys.split(_KEY_SEPARATOR) if key]
            if unique_id:
                index_keys.append(prefix + unique_id)
            if len(index_keys) > 1:
                index_keys = list(dict.fromkeys(index_keys))  # one entry per distinct key is enough
            elif not index_keys:
                return
        elif unique_id:
            index_keys = [prefix + unique_id]
        else:
            return
        files = self._files
        if not files or not files[-1].put_all(index_keys, commit_log_offset, store_timestamp):
            # A message with more keys than a file holds gets a file made to measure: the file size tells.
            index_file = self._roll(max(self.max_entries, len(index_keys)))
            if not index_file.put_all(index_keys, commit_log_offset, store_timestamp):
                raise AssertionError(f"{len(index_keys)} keys do not fit in new index file {index_file.path}")
        self._indexed_offset = commit_log_offset

    def _roll(self, max_entries: int) -> IndexFile:
        with self._lock:
            name = _time_name(datetime.now())
            if self._files and name <= self._files[-1].path.name:
                name = _name_after(self._files[-1].path.name)
            while (self.directory / name).exists():
                name = _name_after(name)
            index_file = IndexFile.create(self.directory / name, self.slots, max_entries)
            self._files = (*self._files, index_file)
        log.info("index %s: new file %s", self.directory, name)
        return index_file

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Commit-log offsets of messages indexed under "topic#key" and stored in [begin_ms, end_ms], newest
        first, without duplicates, at most `max_num`.

        The index holds key hashes, not keys: an offset may belong to another key with the same crc32, and
        times match at one-second granularity. The caller reads each message and checks its topic, keys and
        store time.
        """
        if max_num <= 0 or end_ms < begin_ms:
            return []
        index_key = topic + "#" + key
        found: dict[int, None] = {}
        for index_file in reversed(self._files):
            if index_file.is_empty:
                continue
            if index_file.begin_timestamp > end_ms or index_file.end_timestamp < begin_ms:
                continue
            try:
                offsets = index_file.lookup(index_key, max_num - len(found), begin_ms, end_ms)
            except IndexFileClosedError:
                log.debug("index file %s closed during a query; skipped", index_file.path)
                continue
            found.update(dict.fromkeys(offsets))
            if len(found) >= max_num:
                break
        return list(found)[:max_num]

    def flush(self) -> int:
        """fdatasync the files written since the last flush; return the commit-log offset of the last message
        whose index entries are now on disk (-1 if none), for the checkpoint."""
        durable = -1
        # Under the lock so that retention cannot close a file between reading its descriptor and syncing it.
        with self._lock:
            for index_file in self._files:
                # Read before syncing: whatever was written before this read is covered by the fdatasync.
                end = -1 if index_file.is_empty else index_file.end_phy_offset
                index_file.flush()
                durable = max(durable, end)
        return durable

    def drop_from(self, offset: int) -> int:
        """The log was cut at `offset` (automatic failover): delete the first file holding an entry at or past it
        and every file after it; return the commit-log offset from which the records below `offset` that those
        files also held are to be indexed again (`offset` when no file went)."""
        with self._lock:
            files = self._files
            first = next((n for n, f in enumerate(files) if not f.is_empty and f.end_phy_offset >= offset), len(files))
            doomed = files[first:]
            self._files = files[:first]
            rebuild_from = min((f.begin_phy_offset for f in doomed if not f.is_empty), default=offset)
            for index_file in doomed:
                index_file.destroy()
            self._indexed_offset = self._last_end(self._files)
        if doomed:
            log.info("index %s: %d files deleted (entries past commit-log offset %d); indexing again from %d",
                     self.directory, len(doomed), offset, rebuild_from)  # fmt: skip
        return min(rebuild_from, offset)

    def delete_below(self, min_commit_log_offset: int) -> int:
        """Delete the files whose messages all lie below `min_commit_log_offset`, never the last file."""
        with self._lock:
            files = self._files
            doomed = [f for f in files[:-1] if f.end_phy_offset < min_commit_log_offset]
            if not doomed:
                return 0
            self._files = tuple(f for f in files if f not in doomed)
            for index_file in doomed:
                index_file.destroy()
                log.info(
                    "index %s: deleted %s (all entries below commit-log offset %d)",
                    self.directory,
                    index_file.path.name,
                    min_commit_log_offset,
                )
        return len(doomed)

    def close(self) -> None:
        with self._lock:
            files, self._files = self._files, ()
            for index_file in files:
                index_file.close()
