"""What the index process (core.store.index.child) does with its time: read the records below the store's dispatched
position from the commit log's segments and index their keys (core.store.index.service), and answer the store's
requests. Every record the store appends passes through `IndexBuilder.index_until` once, so this module is compiled
(pyproject.toml [tool.mqgate] compiled); child.py, which `python -m` runs, keeps the process's main loop."""

from __future__ import annotations

import logging
import mmap
import os
from pathlib import Path
from typing import Any

from core.store.errors import RecordFormatError, StoreError
from core.store.index.service import IndexService
from core.store.log.mapped_file import file_name
from core.store.log.record_codec import BLANK_MAGIC, MIN_RECORD_SIZE, SIZE_MAGIC, decode_keyed_fields

log = logging.getLogger(__name__)


class LogReader:
    """The commit log's segments mapped read-only, one at a time, for reading records forward from a position."""

    def __init__(self, directory: Path, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.base = -1
        self._mm: mmap.mmap | None = None
        # A view of the mapping, kept: the decoder takes a view, and making one for each record cost a tenth of it.
        self.view: memoryview | None = None

    def segment(self, position: int) -> memoryview | None:
        """The view of the segment holding `position` (its base is then `self.base`), or None if it is gone
        (retention) or not there."""
        base = position - position % self.segment_size
        if base != self.base:
            self.close()
            try:
                fd = os.open(self.directory / file_name(base), os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                mapping = mmap.mmap(fd, self.segment_size, mmap.MAP_SHARED, mmap.PROT_READ)
            finally:
                os.close(fd)
            self._mm = mapping
            self.view = memoryview(mapping)
            self.base = base
        return self.view

    def first_base(self) -> int | None:
        names = [p.name for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == len(file_name(0))]
        return int(min(names)) if names else None

    def close(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                # A slice of the view is still referenced somewhere; the mapping goes with the last reference.
                log.debug("%s: segment mapping still referenced at close", self.directory)
            self._mm = None
        self.base = -1


class IndexBuilder:
    """The index process's state: the index files, the log, and `position`: every record below it is indexed."""

    def __init__(
        self, index_dir: str, slots: int, max_entries: int, commit_log_dir: str, segment_size: int, floor: int
    ) -> None:
        self.index = IndexService(Path(index_dir), slots, max_entries)
        # Every record below `floor` is indexed: the store process flushed what it indexed before the hand-over, and
        # a child started again after one died finds what that one wrote in the page cache (the files are trusted:
        # load's clean case). Reading resumes at the floor; build skips what a dead predecessor indexed past it.
        self.index.load(True, floor)
        self.log = LogReader(Path(commit_log_dir), segment_size)
        self.segment_size = segment_size
        self.position = floor
        self.failures = 0

    def index_until(self, limit: int, max_records: int = -1) -> None:
        """Index the records from `position` up to `limit`, at most `max_records` of them (-1: no limit)."""
        done = 0
        segment_size = self.segment_size
        reader = self.log
        index = self.index
        while self.position < limit and done != max_records:
            position = self.position
            view = reader.segment(position)
            if view is None:
                first = reader.first_base()
                # A segment deleted by retention: go on from the oldest left; none past us means nothing to read.
                self.position = first if first is not None and first > position else limit
                continue
            base = reader.base
            local = position - base
            try:
                size, store_timestamp, topic, keys, unique_id = decode_keyed_fields(view, local, segment_size)
            except RecordFormatError as exc:
                self.position = self._past_unreadable(view, base, local, exc)
                continue
            if keys or unique_id:
                try:
                    index.build(topic, keys, unique_id, position, store_timestamp)
                except (OSError, StoreError) as exc:
                    # As the dispatcher does: the index only serves queries; a full disk must not stop it for good.
                    self.failures += 1
                    if self.failures == 1 or self.failures % 10_000 == 0:
                        log.error("index entry for commit-log offset %d not written (%d so far): %s",
                                  position, self.failures, exc)  # fmt: skip
            self.position = position + size
            done += 1

    def _past_unreadable(self, view: memoryview, base: int, local: int, exc: RecordFormatError) -> int:
        """Where reading goes on after a position that holds no record: the next segment after the filler that
        closes one (or the few bytes too short for a record at its end), else past a corrupt record that recovery
        left in place in the middle of the log (its readers skip it too)."""
        segment_size = self.segment_size
        if local + SIZE_MAGIC.size > segment_size:
            return base + segment_size
        total, magic = SIZE_MAGIC.unpack_from(view, local)
        if magic == BLANK_MAGIC:
            return base + segment_size
        skip = total if MIN_RECORD_SIZE <= total <= segment_size - local else segment_size - local
        log.error("commit-log offset %d: not indexed: %s; %d bytes skipped", base + local, exc, skip)
        return base + local + skip

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
