"""One archive's directory: its segments (archives/segment.py) in order, the newest one active, with retention of
their own and reads by event time.

    DATA_DIR/eventbridge/archives/<archive name>/<base, 20 digits>.seg

- Rolling: the active segment is sealed and a new one started (its first COMMIT repeats the positions) when the
  next batch would take it past SEGMENT_MAX_BYTES, or when the batch's first event reached the bus on another UTC
  day than the segment's first event: retention deletes whole segments, so a segment spanning a day at most
  keeps an event at most a day past its retention.
- Retention: a segment is deleted once its newest event reached the bus more than `retention_days` ago (0 keeps
  everything). Ages count from the store time, not the event's `time`, which its sender sets: an event sent with
  last year's time is kept as long as one sent now. The active segment, when it has expired, is rolled first, so
  the archive always has a segment holding where reading the bus goes on.
- Recovery: every segment but the newest is sealed; the newest is opened by reading it and cutting what follows
  its last COMMIT (archives/segment.py). If the newest was sealed (a crash between sealing it and creating the next),
  its successor is created from its last COMMIT. Leftover temporary files of unfinished creations are deleted.

Methods that touch files block; the archive's filler (archives/filler.py) calls them from a worker thread, one at a
time. `read` is async and may run alongside them: it takes the segments and their committed lengths when it starts
and reads each in a worker thread, a chunk at a time.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eventbridge.archives.record import (
    HEADER_SIZE,
    SEAL_RECORD_SIZE,
    ArchivedEvent,
    ArchiveFormatError,
    commit_record_size,
    event_record_size,
)
from eventbridge.archives.segment import SEGMENT_SUFFIX, ArchiveSegment, fsync_directory, segment_base

log = logging.getLogger(__name__)

# Kafka's log.segment.bytes is 1 GiB; an archive is read whole by a replay of a wide range and deleted a segment at
# a time, so smaller segments waste less reading and keep less past retention. 64 MiB is some 60,000 events of 1 KiB.
SEGMENT_MAX_BYTES = 64 * 1024 * 1024
DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class ArchiveStats:
    """What GET /archives shows of an archive's files."""

    events: int
    size_bytes: int
    segments: int
    oldest_event_ms: int | None  # by the events' `time`
    newest_event_ms: int | None


def _utc_day(timestamp_ms: int) -> datetime.date:
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC).date()


class ArchiveLog:
    def __init__(self, directory: Path, bus: str, segments: list[ArchiveSegment]) -> None:
        self.directory = directory
        self.bus = bus
        # Oldest first; the last is the active segment. Replaced whole (never changed in place) by rolls and
        # retention, so a reader on the event loop that took the list sees a consistent one.
        self.segments = segments

    @property
    def active(self) -> ArchiveSegment:
        return self.segments[-1]

    @property
    def positions(self) -> dict[int, int]:
        """Where reading each queue of the bus goes on (queue id: next offset)."""
        return self.active.last_positions()

    # --- creating and opening ------------------------------------------------------------------------------

    @staticmethod
    def exists(directory: Path) -> bool:
        """Whether `directory` holds an archive (at least one segment)."""
        return directory.is_dir() and any(segment_base(path) is not None for path in directory.iterdir())

    @classmethod
    def create(cls, directory: Path, bus: str, positions: dict[int, int]) -> ArchiveLog:
        """A new archive of `bus` whose reading starts at `positions`, durable before this returns."""
        directory.mkdir(parents=True, exist_ok=True)
        fsync_directory(directory.parent)
        return cls(directory, bus, [ArchiveSegment.create(directory, 0, bus, positions)])

    @classmethod
    def open(cls, directory: Path) -> ArchiveLog:
        """Open an existing archive, recovering its newest segment. Raises ArchiveFormatError for damage that
        cannot be cut away (a header, or a segment without a whole COMMIT)."""
        for leftover in directory.glob(f".*{SEGMENT_SUFFIX}.tmp"):
            leftover.unlink()
        paths = sorted(path for path in directory.iterdir() if segment_base(path) is not None)
        segments = [ArchiveSegment.open(path) for path in paths]
        if not segments:
            raise FileNotFoundError(f"{directory}: no archive segments")
        for segment in segments[:-1]:
            if not segment.sealed:  # only a crash in the middle of a roll leaves one: seal it now
                segment.seal()
        for segment in segments:
            if segment.bus != segments[-1].bus:
                raise ArchiveFormatError(
                    f"{segment.path}: holds events of bus {segment.bus!r}, the newest segment {segments[-1].bus!r}"
                )
        archive = cls(directory, segments[-1].bus, segments)
        if archive.active.sealed:
            archive._roll()
        return archive

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        """Delete the archive's files, its directory with them."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- writing -------------------------------------------------------------------------------------------

    def append(self, events: Sequence[ArchivedEvent], positions: dict[int, int]) -> None:
        """Append `events` and then `positions` as one batch, durable when this returns (rolling first if due)."""
        active = self.active
        if events and active.summary.events:
            batch_bytes = sum(map(event_record_size, events)) + commit_record_size(len(positions))
            too_big = active.size + batch_bytes + SEAL_RECORD_SIZE > SEGMENT_MAX_BYTES
            if too_big or _utc_day(active.summary.min_store_ms) != _utc_day(events[0].store_ms):
                self._roll()
        self.active.append(events, positions)

    def _roll(self) -> None:
        """Seal the active segment (when not sealed yet) and start the next one at the same positions."""
        active = self.active
        positions = active.last_positions()
        if not active.sealed:
            active.seal()
        following = ArchiveSegment.create(self.directory, active.next_base, self.bus, positions)
        self.segments = [*self.segments, following]
        log.info("archive %s: segment %s sealed (%d events), %s started", self.directory.name, active.path.name,
                 active.summary.events, following.path.name)  # fmt: skip

    def enforce_retention(self, now_ms: int, retention_days: int) -> int:
        """Delete the segments whose newest event reached the bus more than `retention_days` before `now_ms`
        (none when it is 0); the number of events deleted."""
        if retention_days <= 0:
            return 0
        expire_before = now_ms - retention_days * DAY_MS
        if self.active.summary.events and self.active.summary.max_store_ms < expire_before:
            self._roll()
        doomed = [
            segment
            for segment in self.segments[:-1]
            if segment.summary.events == 0 or segment.summary.max_store_ms < expire_before
        ]
        if not doomed:
            return 0
        self.segments = [segment for segment in self.segments if segment not in doomed]
        for segment in doomed:
            segment.delete()
            log.info("archive %s: segment %s deleted (%d events, the newest stored %s, past %d days' retention)",
                     self.directory.name, segment.path.name, segment.summary.events,
                     _utc_day(segment.summary.max_store_ms), retention_days)  # fmt: skip
        fsync_directory(self.directory)
        return sum(segment.summary.events for segment in doomed)

    # --- reading -------------------------------------------------------------------------------------------

    def stats(self) -> ArchiveStats:
        segments = self.segments
        holding = [segment.summary for segment in segments if segment.summary.events]
        return ArchiveStats(
            events=sum(summary.events for summary in holding),
            size_bytes=sum(segment.size for segment in segments),
            segments=len(segments),
            oldest_event_ms=min((summary.min_event_ms for summary in holding), default=None),
            newest_event_ms=max((summary.max_event_ms for summary in holding), default=None),
        )

    async def read(self, from_ms: int, to_ms: int, batch: int) -> AsyncIterator[list[ArchivedEvent]]:
        """The events whose time is in [from_ms, to_ms], in the order they were archived, up to `batch` at a time.
        Reads what was committed when it started; segments deleted meanwhile (retention) are skipped."""
        taken = [
            (segment, segment.committed)
            for segment in self.segments
            if segment.summary.events
            and segment.summary.min_event_ms <= to_ms
            and segment.summary.max_event_ms >= from_ms
        ]
        selected: list[ArchivedEvent] = []
        for segment, end in taken:
            position = HEADER_SIZE
            while position < end:
                try:
                    events, position = await asyncio.to_thread(segment.read_events, position, end)
                except FileNotFoundError:
                    break
                selected += (event for event in events if from_ms <= event.event_ms <= to_ms)
                while len(selected) >= batch:
                    yield selected[:batch]
                    selected = selected[batch:]
        if selected:
            yield selected
