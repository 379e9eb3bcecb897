"""Replay (AWS EventBridge archive and replay): the events a bus stored in a time range, or those an archive holds,
appended to the bus again.

Without an archive, a bus keeps its events in its core topic for the store's retention, so the bus is its own archive,
and the range is of store times. A replay reads each queue of `%EVENTBUS%<bus>` from the first message stored at or
after `from` (the broker's search_offset) up to the first one stored after `to`, and appends every event it finds again,
as a copy that carries the CloudEvents extension `replayname` (AWS's `replay-name`, spelt as CloudEvents extension names
must be). The rules' targets deliver the copies as they deliver any event: the receiver sees `replayname` among the
attributes.

A replay that names a rule (AWS's FilterArns) appends only the events that rule's pattern matches, each restricted
with OnlyFor to that rule: the router sends a restricted copy to its rule without matching it again (a redrive's or
a schedule's copy must reach its rule whatever the pattern says now), so the replay matches before it appends. The
pattern is the one in force when the replay starts. A rule with only a schedule has no pattern: no event of the bus
is its, and a replay to it is refused.

Not replayed (counted as skipped):
- copies that already carry `replayname`: AWS does not archive replayed events, so a replay never repeats one;
- copies restricted to one rule (EB_ONLY_RULE, a replay's or a redrive's): the event they copy is on the bus
  itself, and is replayed as that;
- messages of the bus topic that are not events (a body sent to the topic by hand).
Events the named rule does not match are counted apart, as unmatched.

From an archive (archives/log.py, filled by archives/filler.py), which keeps events for a retention of its own: the
range is of the events' `time`, as AWS replays by event time, and the archive is read in the order it was filled,
up to what it held when the replay started (an event put just before may not be archived yet). The destination
is the archive's bus, as AWS requires. Copies carry `replayname`, and are matched and restricted to a rule just the
same.

Memory is bounded by REPLAY_BATCH: each batch read is appended before the next is read. The end of each queue is
taken before the first copy is appended, so the copies (which go to the same queues) are never read by the replay
that made them. Order is kept within a queue, as delivery keeps it; across queues it is not, as on delivery.
"""

from __future__ import annotations

import datetime
import logging
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import PullStatus
from eventbridge.archives.filler import ArchiveState
from eventbridge.bus import (
    PROPERTY_ONLY_RULE,
    REPLAY_NAME_EXTENSION,
    BusError,
    OnlyFor,
    StoredEvent,
    bus_topic,
    decode_event,
)
from eventbridge.errors import NotFoundError, ReprocessError
from eventbridge.patterns.matcher import Matcher
from eventbridge.rules.model import Rule, RuleKey
from eventbridge.runtime import EventBridgeRuntime
from eventbridge.time_range import TimeRange

log = logging.getLogger(__name__)

# AWS's ReplayName: 1 to 64 of [.-_A-Za-z0-9].
REPLAY_NAME = re.compile(r"[.\-_A-Za-z0-9]{1,64}")
# Events read (and then appended) at a time: the target runner's batch, so a replay holds as much as a target does.
REPLAY_BATCH = 256
# The consumer group the replay reads as; it commits nothing, the name only shows who read in the broker's logs.
REPLAY_GROUP = "eventbridge-replay"

# Does the rule a replay is restricted to match this event?
EventFilter = Callable[[Mapping[str, Any]], bool]


def new_replay_name(now_s: float, rng: random.Random) -> str:
    """`replay-<yyyymmddHHMMSS>-<4 hex>` in UTC: sorts by start time; the hex tells apart replays of one second."""
    stamp = datetime.datetime.fromtimestamp(now_s, datetime.UTC).strftime("%Y%m%d%H%M%S")
    return f"replay-{stamp}-{rng.getrandbits(16):04x}"


def check_replay_name(name: str) -> str:
    if REPLAY_NAME.fullmatch(name) is None:
        raise ReprocessError(f"replay name {name!r}: give 1 to 64 letters, digits, '.', '-' or '_'")
    return name


def is_replayable(event: Mapping[str, Any], properties: Mapping[str, str]) -> bool:
    """False for a replayed copy and for any copy meant for one rule (see the module docstring)."""
    return REPLAY_NAME_EXTENSION not in event and PROPERTY_ONLY_RULE not in properties


def replay_copy(event: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {**event, REPLAY_NAME_EXTENSION: name}


def rule_filter(rule: Rule) -> EventFilter:
    """The events a replay restricted to `rule` takes: those its pattern matches. ReprocessError for a rule with
    only a schedule (no event matches it)."""
    if rule.pattern is None:
        raise ReprocessError(
            f"rule {rule.key} has no event pattern (it runs on its schedule only), so no event of the bus is its to "
            "replay; replay to a rule with a pattern, or to the whole bus"
        )
    matcher: Matcher[str] = Matcher([(rule.name, rule.pattern.value)])
    return lambda event: bool(matcher.matches(event))


@dataclass(slots=True)
class Selection:
    """What one batch of a queue gives a replay."""

    copies: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    unmatched: int = 0  # events the rule the replay is restricted to does not match
    # Messages of the batch inside the range (the first message stored after `to`, and those behind it, are not).
    considered: int = 0
    past_end: bool = False  # a message stored after `to` was reached: the queue is done


def select_for_replay(
    messages: Sequence[StoredEvent], to_ms: int, name: str, matches: EventFilter | None = None
) -> Selection:
    """The copies to append for messages read in queue order from the first one stored at or after `from`; with
    `matches`, only of the events it takes (those of the rule the replay is restricted to)."""
    selection = Selection()
    for message in messages:
        if message.store_timestamp > to_ms:
            selection.past_end = True
            break
        selection.considered += 1
        try:
            event = decode_event(message.body)
        except BusError:
            selection.skipped += 1
            continue
        if not is_replayable(event, message.properties):
            selection.skipped += 1
            continue
        if matches is not None and not matches(event):
            selection.unmatched += 1
            continue
        selection.copies.append(replay_copy(event, name))
    return selection


@dataclass(frozen=True, slots=True)
class QueueReplay:
    """One queue of the bus: the offsets read, [from_offset, to_offset), and what became of them."""

    queue_id: int
    from_offset: int
    to_offset: int
    replayed: int
    skipped: int
    unmatched: int = 0


@dataclass(frozen=True, slots=True)
class ArchiveReplay:
    """What a replay from an archive read: the events it appended again, those it skipped (not events), and those
    the rule it is restricted to does not match."""

    archive: str
    replayed: int
    skipped: int
    unmatched: int = 0


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    name: str
    bus: str
    rule: str | None
    range: TimeRange
    queues: tuple[QueueReplay, ...]  # none for a replay from an archive
    archive: ArchiveReplay | None = None

    @property
    def replayed(self) -> int:
        return sum(queue.replayed for queue in self.queues) + (self.archive.replayed if self.archive else 0)

    @property
    def skipped(self) -> int:
        return sum(queue.skipped for queue in self.queues) + (self.archive.skipped if self.archive else 0)

    @property
    def unmatched(self) -> int:
        return sum(queue.unmatched for queue in self.queues) + (self.archive.unmatched if self.archive else 0)


class Replayer:
    """Runs replays on a runtime's buses; rules are looked up in the rules in force when the replay starts."""

    def __init__(
        self, runtime: EventBridgeRuntime, *, rng: random.Random | None = None, batch: int = REPLAY_BATCH
    ) -> None:
        self.runtime = runtime
        self.rng = rng or random.Random()
        self.batch = batch

    async def replay(
        self,
        bus: str,
        time_range: TimeRange,
        rule: str | None = None,
        name: str | None = None,
        archive: str | None = None,
    ) -> ReplaySummary:
        """Append again the events of `bus` stored in `time_range`, or with `archive` those of the archive whose
        time is in it (with `rule`, only those the rule matches, to that rule only). Raises NotFoundError for an
        unknown bus, rule or archive, ReprocessError for a bad name, a disabled rule or one without a pattern, or an
        archive of another bus or that is not ENABLED,
        BusError if the copies cannot be stored (those of earlier batches are then already appended)."""
        runtime = self.runtime
        if not runtime.buses.exists(bus):
            raise NotFoundError(f"bus {bus!r} does not exist (GET /buses lists them)")
        only_for = None
        matches = None
        if rule is not None:
            found = runtime.rules.get(RuleKey(bus, rule))
            if found is None:
                raise NotFoundError(f"no rule {rule!r} on bus {bus!r} (GET /rules lists them)")
            if not found.enabled:
                # Its targets do not run: the copies would be read by nobody, and a target started later
                # begins at the end of the bus, past them.
                raise ReprocessError(f"rule {bus}/{rule} is disabled; enable it, then replay")
            matches = rule_filter(found)
            only_for = OnlyFor(str(found.key))
        name = check_replay_name(name) if name is not None else new_replay_name(runtime.clock.time(), self.rng)
        restriction = _Restriction(only_for, matches)
        if archive is not None:
            return await self._replay_archive(archive, bus, time_range, rule, name, restriction)
        broker = runtime.broker
        topic = bus_topic(bus)
        # Every event appended so far must be in the consume queues before their ends are taken.
        await broker.wait_visible()
        queues = sorted(queue.queue_id for queue in broker.read_queues(topic))
        ends = {queue_id: broker.max_offset(topic, queue_id) for queue_id in queues}
        done = []
        for queue_id in queues:
            # Events appended after the ends were taken are past the replay, however the search lands.
            start = min(broker.search_offset(topic, queue_id, time_range.from_ms), ends[queue_id])
            done.append(await self._replay_queue(topic, bus, queue_id, start, ends[queue_id], time_range, name,
                                                 restriction))  # fmt: skip
        summary = ReplaySummary(name, bus, rule, time_range, tuple(done))
        log.info("replay %s of bus %r%s: %d events appended again, %d skipped, %d not matched", name, bus,
                 f" to rule {rule!r}" if rule else "", summary.replayed, summary.skipped,
                 summary.unmatched)  # fmt: skip
        return summary

    async def _replay_archive(
        self, archive: str, bus: str, time_range: TimeRange, rule: str | None, name: str, restriction: _Restriction
    ) -> ReplaySummary:
        filler = self.runtime.archives().get(archive)
        if filler is None:
            raise NotFoundError(f"no archive {archive!r} (GET /archives lists them)")
        if filler.archive.bus != bus:
            raise ReprocessError(
                f"archive {archive!r} holds events of bus {filler.archive.bus!r}; a replay from it goes to that bus "
                f"(POST /buses/{filler.archive.bus}/replays), as AWS replays to an archive's source bus"
            )
        if filler.log is None or filler.state is not ArchiveState.ENABLED:
            raise ReprocessError(f"archive {archive!r} is {filler.state.value}: {filler.reason}")
        replayed = skipped = unmatched = 0
        matches = restriction.matches
        async for events in filler.log.read(time_range.from_ms, time_range.to_ms, self.batch):
            copies = []
            for archived in events:
                try:
                    event = decode_event(archived.body)
                except BusError:
                    skipped += 1
                    continue
                if matches is not None and not matches(event):
                    unmatched += 1
                    continue
                copies.append(replay_copy(event, name))
            if copies:
                await self.runtime.buses.put(bus, copies, restriction.only_for)
            replayed += len(copies)
        log.info("replay %s of archive %r to bus %r%s: %d events appended again, %d not matched", name, archive, bus,
                 f" (rule {rule!r})" if rule else "", replayed, unmatched)  # fmt: skip
        return ReplaySummary(name, bus, rule, time_range, (), ArchiveReplay(archive, replayed, skipped, unmatched))

    async def _replay_queue(
        self,
        topic: str,
        bus: str,
        queue_id: int,
        start: int,
        end: int,
        time_range: TimeRange,
        name: str,
        restriction: _Restriction,
    ) -> QueueReplay:
        broker = self.runtime.broker
        offset, replayed, skipped, unmatched = start, 0, 0, 0
        broker.create_groups([REPLAY_GROUP])  # ours, whatever auto_create_group says
        while offset < end:
            got = await broker.pull(REPLAY_GROUP, topic, queue_id, offset, min(self.batch, end - offset))
            if got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset > offset:
                offset = got.next_begin_offset  # retention removed the start of the range meanwhile
                continue
            if got.status is not PullStatus.FOUND:
                break
            selection = select_for_replay(got.messages, time_range.to_ms, name, restriction.matches)
            if selection.copies:
                await self.runtime.buses.put(bus, selection.copies, restriction.only_for)
            replayed += len(selection.copies)
            skipped += selection.skipped
            unmatched += selection.unmatched
            if selection.past_end:
                offset = got.messages[selection.considered].queue_offset
                break
            offset = got.next_begin_offset
        return QueueReplay(queue_id, start, offset, replayed, skipped, unmatched)


@dataclass(frozen=True, slots=True)
class _Restriction:
    """A replay to one rule: its copies are restricted to the rule, and only the events it matches are copied."""

    only_for: OnlyFor | None = None
    matches: EventFilter | None = None
