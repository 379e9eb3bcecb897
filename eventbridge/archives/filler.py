"""Filling one archive: its bus's core topic read, every queue, and the events its pattern matches (all of them
without a pattern) appended to its files (archives/log.py); retention enforced on the runtime's clock.

Exactly once into the archive, across a crash. Where reading each queue goes on is kept in the archive itself: each
batch of events is written with a COMMIT of the positions after them, in one write, then fsync'ed; on open, what
follows the last whole COMMIT is cut (archives/segment.py). So after a SIGKILL the archive holds exactly the
batches whose COMMIT reached the file, and reading goes on from the positions of the last one: what was archived
is not read again, and what was not is read again. Two other ways were turned down:
- a consumer group's committed offsets: they reach disk apart from the archive's data (every 5 s, or on
  persist_offsets), so a crash between the two writes repeats events (offsets behind the data) or skips them
  (offsets ahead of it), whichever is written first;
- positions recovered from the (queue id, queue offset) the tail events carry (they do carry them): an archive
  with a narrow pattern may have read a million events past its last match, all read again after a restart, and
  a new archive, which holds no event yet, would not know where it started.
Batches are fsync'ed as they come: a batch is whatever arrived while the previous fsync ran (group commit), at
most ROUND_BATCH events a queue and about ROUND_MAX_BYTES. Positions that moved only past events the archive does
not keep are written at most every POSITIONS_ONLY_INTERVAL_S: after a crash those events are read again and left
out again, so nothing is archived twice.

What is not archived, as AWS does not archive it: replayed copies (they carry `replayname`), and any copy restricted
to one rule or target (EB_ONLY_RULE: replays and redrives): the event it copies is archived as itself. Nor bodies of
the bus topic that are not events (a message sent to the topic by hand).

A new archive starts at the end of each queue of its bus (it archives the events put from its creation on, as
AWS), and that start is in its first segment, on disk, before anything is appended: forgotten in a crash, it would
start again at a later end and skip events acknowledged meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import shutil
import time
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from connectors.task_runner import Arrivals
from core import Broker, CoreError, PullStatus
from eventbridge.archives.log import ArchiveLog, ArchiveStats
from eventbridge.archives.record import ArchivedEvent
from eventbridge.bus import (
    PROPERTY_ONLY_RULE,
    REPLAY_NAME_EXTENSION,
    BusError,
    StoredEvent,
    bus_topic,
    decode_event,
)
from eventbridge.errors import ReprocessError
from eventbridge.patterns.matcher import Matcher
from eventbridge.rules.model import Archive
from eventbridge.targets.clock import Clock
from eventbridge.time_range import parse_time_ms

log = logging.getLogger(__name__)

# The consumer group archives read the bus as; it commits nothing (positions are in the archives), the name only
# shows who read in the broker's logs.
ARCHIVE_GROUP = "eventbridge-archive"
# Messages read from one queue per round: a target's batch (runtime.TARGET_BATCH_SIZE).
ROUND_BATCH = 256
# A round stops reading further queues once it holds this many bytes of events (the rest come next round): 256
# events of 256 KiB (the largest PutEvents entry) would otherwise be 64 MiB a queue.
ROUND_MAX_BYTES = 4 * 1024 * 1024
# How long an idle archive waits for an arrival before it looks again; also how late a retention check that fell
# due on the runtime's clock can be noticed.
IDLE_WAIT_S = 1.0
# Retention is checked this often (on the runtime's clock): segments span a day, so a minute is plenty.
RETENTION_CHECK_INTERVAL_S = 60.0
# A round that kept no event (none matched) still moves the positions; writing them alone costs an fsync, so they
# are written at most this often (an idle archive within IDLE_WAIT_S more). Read again after a crash, those events
# are left out again: only a pattern changed meanwhile could take one of them, and then once.
POSITIONS_ONLY_INTERVAL_S = 1.0
# After a failed round (a full disk), the next one waits this long.
ERROR_BACKOFF_S = 5.0
# How long creating an archive waits for appended events to become visible before it takes the ends of the bus.
VISIBLE_TIMEOUT_S = 10.0


class ArchiveState(enum.Enum):
    # Opening or creating its files (a new archive first waits for appended events to be visible, up to
    # VISIBLE_TIMEOUT_S): AWS's CREATING.
    CREATING = "CREATING"
    ENABLED = "ENABLED"
    # Not filling: its files cannot be opened, or they hold another bus than the definition names (AWS's
    # CREATE_FAILED / UPDATE_FAILED); `reason` says which.
    FAILED = "FAILED"


def event_time_ms(event: Mapping[str, Any], default: int) -> int:
    """The event's `time` in epoch milliseconds (what replays select by), or `default` (its store time) when it has
    none or an unreadable one."""
    value = event.get("time")
    if value is None:
        return default
    try:
        return parse_time_ms(value, "time")
    except ReprocessError:
        return default


class BusMessage(StoredEvent, Protocol):
    """What the selection needs of a message read from the bus, its queue offset too (core.StoredMessage has it)."""

    @property
    def queue_offset(self) -> int: ...


def select_for_archive(
    messages: Sequence[BusMessage], queue_id: int, matcher: Matcher[str] | None
) -> list[ArchivedEvent]:
    """The events of messages read from one queue of the bus that the archive keeps (see the module docstring)."""
    kept = []
    for message in messages:
        if PROPERTY_ONLY_RULE in message.properties:
            continue
        try:
            event = decode_event(message.body)
        except BusError:
            continue
        if REPLAY_NAME_EXTENSION in event or (matcher is not None and not matcher.matches(event)):
            continue
        stored = message.store_timestamp
        kept.append(ArchivedEvent(queue_id, message.queue_offset, stored, event_time_ms(event, stored), message.body))
    return kept


class ArchiveFiller:
    """Keeps one archive filled while it runs; `update` takes a changed pattern or retention at once."""

    def __init__(self, broker: Broker, archive: Archive, directory: Path, arrivals: Arrivals, clock: Clock) -> None:
        self.broker = broker
        self.directory = directory
        self.arrivals = arrivals
        self.clock = clock
        self.archive = archive
        self._matcher = _matcher_of(archive)
        self.log: ArchiveLog | None = None
        self.state = ArchiveState.CREATING
        self.reason: str | None = None
        self.last_error: str | None = None
        self._positions: dict[int, int] = {}
        self._written: dict[int, int] = {}  # the positions of the archive's last COMMIT on disk
        self._last_write = 0.0  # time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._idle = False
        self._next_retention_check = 0.0
        self._next_queue = 0

    def update(self, archive: Archive) -> None:
        """A changed description, pattern or retention (same name and bus): applies from the next round."""
        self.archive = archive
        self._matcher = _matcher_of(archive)
        self._next_retention_check = 0.0

    @property
    def positions(self) -> dict[int, int]:
        """Where reading each queue of the bus goes on, as on disk: every event before is archived (or is not
        the archive's)."""
        return dict(self._written)

    def stats(self) -> ArchiveStats | None:
        return self.log.stats() if self.log is not None else None

    # --- life cycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the archive's files, or create them starting at the end of the bus; then fill in the background.
        A failure leaves the archive FAILED with its reason, and nothing running."""
        archive = self.archive
        try:
            if await asyncio.to_thread(ArchiveLog.exists, self.directory):
                self.log = await asyncio.to_thread(ArchiveLog.open, self.directory)
            else:
                self.log = await asyncio.to_thread(ArchiveLog.create, self.directory, archive.bus, await self._ends())
                log.info("archive %r created on bus %r at %s", archive.name, archive.bus, self.directory)
            self._positions = self._written = self.log.positions
        except (OSError, ValueError, CoreError) as exc:
            self.state, self.reason = ArchiveState.FAILED, f"cannot open {self.directory}: {exc}"
            log.error("archive %r not started: %s", archive.name, self.reason)
            return
        if self.log.bus != archive.bus:
            self.state = ArchiveState.FAILED
            self.reason = (
                f"its files hold events of bus {self.log.bus!r}, the definition names {archive.bus!r}: an archive "
                f"keeps its bus; name {self.log.bus!r} again, or delete the archive (its events go with it) and "
                "create a new one"
            )
            log.error("archive %r not started: %s", archive.name, self.reason)
            return
        self.broker.create_groups([ARCHIVE_GROUP])  # ours, whatever auto_create_group says
        self.state, self.reason = ArchiveState.ENABLED, None
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"archive {archive.name}")

    async def _ends(self) -> dict[int, int]:
        """Where a new archive starts: the end of each queue of its bus, every event appended so far visible."""
        await self.broker.wait_visible(VISIBLE_TIMEOUT_S)
        topic = bus_topic(self.archive.bus)
        return {
            queue.queue_id: self.broker.max_offset(topic, queue.queue_id) for queue in self.broker.read_queues(topic)
        }

    async def stop(self) -> None:
        """Stop filling once the round in progress is written (a write is never abandoned halfway), and close."""
        self._stopping = True
        if self._task is not None:
            if self._idle:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.log is not None:
            with contextlib.suppress(OSError):
                await self._write_positions()
            await asyncio.to_thread(self.log.close)

    async def delete(self) -> None:
        """Stop, then delete the archive's files (AWS DeleteArchive)."""
        await self.stop()
        await asyncio.to_thread(shutil.rmtree, self.directory, True)
        self.log = None

    # --- filling -------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                moved = await self._round()
                if self.clock.time() >= self._next_retention_check:
                    await self._enforce_retention()
                self.last_error = None
            except (OSError, CoreError, ValueError) as exc:
                # The batch was cut back from the file (archive_segment.append): it is read again next round.
                self.last_error = str(exc)
                log.error("archive %r: %s; trying again in %.0f s", self.archive.name, exc, ERROR_BACKOFF_S)
                await self._idle_for(asyncio.sleep(ERROR_BACKOFF_S))
                continue
            if not moved and not self._stopping:
                if time.monotonic() - self._last_write >= POSITIONS_ONLY_INTERVAL_S:
                    await self._write_positions()
                topic = bus_topic(self.archive.bus)
                await self._idle_for(self.arrivals.wait([(topic, queue_id) for queue_id in self._positions],
                                                        IDLE_WAIT_S))  # fmt: skip

    async def _idle_for(self, waiting: Coroutine[Any, Any, None]) -> None:
        """Await `waiting` as the one place where `stop` may cancel the filler: no write is under way."""
        if self._stopping:  # stop() came during the round: it is waiting for this task to end
            waiting.close()
            return
        self._idle = True
        try:
            await waiting
        finally:
            self._idle = False

    async def _round(self) -> bool:
        """Read each queue once from its position, append what the archive keeps with the new positions; whether
        any position moved."""
        assert self.log is not None
        topic = bus_topic(self.archive.bus)
        queue_ids = sorted(queue.queue_id for queue in self.broker.read_queues(topic))
        if not queue_ids:
            return False
        # Start where the last round stopped short, so that a busy queue does not keep the others waiting.
        start = self._next_queue % len(queue_ids)
        order = queue_ids[start:] + queue_ids[:start]
        positions = dict(self._positions)
        kept: list[ArchivedEvent] = []
        kept_bytes = 0
        for index, queue_id in enumerate(order):
            if kept_bytes >= ROUND_MAX_BYTES:
                self._next_queue = start + index
                break
            offset = positions.get(queue_id, 0)  # a queue added since the archive began: from its start
            got = await self.broker.pull(ARCHIVE_GROUP, topic, queue_id, offset, ROUND_BATCH)
            if got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset != offset:
                log.warning("archive %r: queue %d of bus %r moved from offset %d to %d before it was archived "
                            "(the store's retention?)", self.archive.name, queue_id, self.archive.bus, offset,
                            got.next_begin_offset)  # fmt: skip
                positions[queue_id] = got.next_begin_offset
            elif got.status is PullStatus.FOUND:
                selected = select_for_archive(got.messages, queue_id, self._matcher)
                kept += selected
                kept_bytes += sum(len(event.body) for event in selected)
                positions[queue_id] = got.next_begin_offset
        else:
            self._next_queue = start + 1
        if positions == self._positions:
            return False
        if kept or time.monotonic() - self._last_write >= POSITIONS_ONLY_INTERVAL_S:
            await self._write(kept, positions)
        self._positions = positions
        return True

    async def _write(self, events: list[ArchivedEvent], positions: dict[int, int]) -> None:
        assert self.log is not None
        await asyncio.to_thread(self.log.append, events, positions)
        self._written, self._last_write = positions, time.monotonic()

    async def _write_positions(self) -> None:
        """Write positions that moved past events the archive did not keep, if they are not on disk yet."""
        if self.log is not None and self._positions != self._written and self.state is ArchiveState.ENABLED:
            await self._write([], self._positions)

    async def _enforce_retention(self) -> None:
        assert self.log is not None
        now = self.clock.time()
        self._next_retention_check = now + RETENTION_CHECK_INTERVAL_S
        if self.archive.retention_days:
            await asyncio.to_thread(self.log.enforce_retention, int(now * 1000), self.archive.retention_days)


def _matcher_of(archive: Archive) -> Matcher[str] | None:
    return Matcher([(archive.name, archive.pattern.value)]) if archive.pattern is not None else None
