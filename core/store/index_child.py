"""The index process's own side (`python -m core.store.index_child`, started by core.store.index_process, whose
docstring tells the protocol): it reads the records below the store's dispatched position from the commit log and
indexes them with core.store.index_service, and answers the store's requests."""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from core.store.errors import StoreError
from core.store.index_process import CHUNK_RECORDS, IDLE_POLL_S, LOG_FORMAT, TARGET
from core.store.index_service import IndexService
from core.store.mapped_file import file_name
from core.store.message import PROPERTY_KEYS, PROPERTY_UNIQ_KEY
from core.store.record_codec import BLANK_MAGIC, MIN_RECORD_SIZE, SIZE_MAGIC, RecordFormatError, decode_keyed_fields

log = logging.getLogger(__name__)

# Added to the process's nice value (a lower scheduling priority than the store's process).
NICENESS = 5


class _LogReader:
    """The commit log's segments mapped read-only, for reading records forward from a position."""

    def __init__(self, directory: Path, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self._base = -1
        self._mm: mmap.mmap | None = None

    def segment(self, position: int) -> tuple[int, mmap.mmap] | None:
        """(base, mapping) of the segment holding `position`, or None if it is gone (retention) or not there."""
        base = position - position % self.segment_size
        if base != self._base:
            self.close()
            try:
                fd = os.open(self.directory / file_name(base), os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                self._mm = mmap.mmap(fd, self.segment_size, mmap.MAP_SHARED, mmap.PROT_READ)
            finally:
                os.close(fd)
            self._base = base
        assert self._mm is not None
        return self._base, self._mm

    def first_base(self) -> int | None:
        names = [p.name for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == len(file_name(0))]
        return int(min(names)) if names else None

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
            self._base = -1


class _Builder:
    """The child's state: the index files, the log, and `position`: every record below it is indexed."""

    def __init__(
        self, index_dir: str, slots: int, max_entries: int, commit_log_dir: str, segment_size: int, floor: int
    ) -> None:
        self.index = IndexService(Path(index_dir), slots, max_entries)
        # Every record below `floor` is indexed: the store process flushed what it indexed before the hand-over, and
        # a child started again after one died finds what that one wrote in the page cache (the files are trusted:
        # load's clean case). Reading resumes at the floor; build skips what a dead predecessor indexed past it.
        self.index.load(True, floor)
        self.log = _LogReader(Path(commit_log_dir), segment_size)
        self.segment_size = segment_size
        self.position = floor
        self.failures = 0

    def index_until(self, limit: int, max_records: int | None = None) -> None:
        done = 0
        while self.position < limit and (max_records is None or done < max_records):
            found = self.log.segment(self.position)
            if found is None:
                first = self.log.first_base()
                # A segment deleted by retention: go on from the oldest left; none past us means nothing to read.
                self.position = first if first is not None and first > self.position else limit
                continue
            base, mm = found
            local = self.position - base
            if local + SIZE_MAGIC.size > self.segment_size:
                self.position = base + self.segment_size
                continue
            total, magic = SIZE_MAGIC.unpack_from(mm, local)
            if magic == BLANK_MAGIC:
                self.position = base + self.segment_size  # the filler that closes a segment
                continue
            try:
                size, store_timestamp, topic, properties = decode_keyed_fields(mm, local, self.segment_size)
            except RecordFormatError as exc:
                # Recovery left it in place (corrupt in the middle of the log, skipped by its readers too).
                skip = total if MIN_RECORD_SIZE <= total <= self.segment_size - local else self.segment_size - local
                log.error("commit-log offset %d: not indexed: %s; %d bytes skipped", self.position, exc, skip)
                self.position += skip
                continue
            keys = properties.get(PROPERTY_KEYS)
            unique_id = properties.get(PROPERTY_UNIQ_KEY)
            if keys or unique_id:
                try:
                    self.index.build(topic, keys, unique_id, self.position, store_timestamp)
                except (OSError, StoreError) as exc:
                    # As the dispatcher does: the index only serves queries; a full disk must not stop it for good.
                    self.failures += 1
                    if self.failures == 1 or self.failures % 10_000 == 0:
                        log.error("index entry for commit-log offset %d not written (%d so far): %s",
                                  self.position, self.failures, exc)  # fmt: skip
            self.position += size
            done += 1

    def answer(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        kind = request[0]
        if kind == "flush":
            self.index_until(request[1])
            self.index.flush()
            return ("flushed", min(self.position, request[1]))
        if kind == "query":
            _, topic, key, max_num, begin_ms, end_ms, upto = request
            self.index_until(upto)
            return ("found", self.index.query(topic, key, max_num, begin_ms, end_ms))
        if kind == "delete_below":
            return ("deleted", self.index.delete_below(request[1]))
        raise ValueError(f"unknown request {kind!r}")

    def stop(self, upto: int) -> int:
        self.index_until(upto)
        self.index.flush()
        self.index.close()
        self.log.close()
        return min(self.position, upto)


def serve_index(
    index_dir: str,
    slots: int,
    max_entries: int,
    commit_log_dir: str,
    segment_size: int,
    floor: int,
    conn: Connection,
    target: mmap.mmap,
    log_level: int,
) -> None:
    """The child's main loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The index only serves queries, which wait for it: when both cores are busy, the process that takes and hands
    # out messages goes first.
    os.nice(NICENESS)
    logging.basicConfig(level=log_level, stream=sys.stderr, format=LOG_FORMAT)
    try:
        builder = _Builder(index_dir, slots, max_entries, commit_log_dir, segment_size, floor)
    except Exception as exc:
        log.exception("index process for %s failed to start", index_dir)
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", builder.position))
    while True:
        limit = TARGET.unpack_from(target, 0)[0]
        busy = builder.position < limit
        if busy:
            builder.index_until(limit, CHUNK_RECORDS)
        try:
            if not conn.poll(0 if busy else IDLE_POLL_S):
                continue
            request = conn.recv()
        except (EOFError, OSError):
            log.info("index process: the store's process is gone; exiting")
            builder.index.close()
            return
        number, request = request[0], request[1:]  # the number goes back with the answer
        if request[0] == "stop":
            conn.send((number, "stopped", builder.stop(request[1])))
            return
        try:
            reply = builder.answer(request)
        except Exception as exc:
            log.exception("index process: %r failed", request[0])
            reply = ("error", f"{type(exc).__name__}: {exc}")
        conn.send((number, *reply))


def main() -> None:
    (
        index_dir,
        slots,
        max_entries,
        commit_log_dir,
        segment_size,
        floor,
        conn_fd,
        target_fd,
        lock_fd,
        log_level,
    ) = json.loads(sys.argv[1])
    # The index directory's lock, taken by the store's process before it started this one and inherited: held until
    # this process ends (core.store.index_process.wait_for_orphan). Taking it again on the same open file changes
    # nothing; it fails only if the descriptor is not the lock.
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    target = mmap.mmap(target_fd, TARGET.size)
    serve_index(
        index_dir, slots, max_entries, commit_log_dir, segment_size, floor, Connection(conn_fd), target, log_level
    )


if __name__ == "__main__":
    main()
