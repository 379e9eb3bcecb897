"""Dead-letter topics: listing the events a target gave up on, and redriving them to that target once it is fixed.

A dead-lettered event is a message of a dead-letter topic (target_task.py): its body is the original event, its
EB_DLQ_* properties say where it was going (bus, rule, target) and why it failed (status, error, attempts).

Redrive appends each dead-lettered event again to its bus, as a copy restricted to its rule AND its target
(OnlyFor(rule, target)): the one target that failed gets it; the rule's other targets, which delivered it, and
other rules do not get it again. Events whose rule or target no longer exists, or whose rule is disabled, are
skipped and passed (nobody would deliver them: a target that starts later begins at the end of its bus), as are
messages of the topic that are not dead-letter records; the summary counts them. A redrive of one rule takes the
dead letters recorded as that rule's, unmatched: each was matched when it was routed, and matching it again against
a pattern edited since would drop an event acknowledged to its sender (a replay, by contrast, matches: replay.py).

How far a redrive went is kept as committed offsets of consumer groups on the dead-letter topic, so the next
redrive sends only what was dead-lettered since:

    eventbridge-redrive                      per queue: every event before this offset was redriven (the floor)
    eventbridge-redrive|eb|<bus>|<rule>|<t>  per queue: this target's events before this offset were redriven

A redrive of everything moves the floor; a redrive of one rule or target moves only its targets' offsets, so a
later redrive of everything still sends the other targets' events, and none twice. Offsets reach disk with the
broker's other offsets (every few seconds and at close): after a crash, the last redrive may be sent again,
which is at least once, as every delivery is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core import PullStatus, StoredMessage
from eventbridge.bus import DEFAULT_DEAD_LETTER_PREFIX, BusError, OnlyFor, decode_event
from eventbridge.errors import NotFoundError, ReprocessError
from eventbridge.rules.model import RuleKey
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.targets.target_task import (
    PROPERTY_DLQ_ATTEMPTS,
    PROPERTY_DLQ_BUS,
    PROPERTY_DLQ_ERROR,
    PROPERTY_DLQ_ORIGIN,
    PROPERTY_DLQ_RULE,
    PROPERTY_DLQ_STATUS,
    PROPERTY_DLQ_TARGET,
)

log = logging.getLogger(__name__)

REDRIVE_GROUP = "eventbridge-redrive"
# A listing's page: enough for a screen or a script's loop; the cap keeps one answer a few MiB at most (an error
# is up to 2000 characters).
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 1000
# Dead letters read (and appended) at a time: the target runner's batch.
REDRIVE_BATCH = 256
# What pull returns at most per call, by count (core's DEFAULT_PULL_BATCH would make many small reads).
LIST_PULL_BATCH = 256


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One message of a dead-letter topic; bus, rule and target are None for a message that is no dead letter."""

    queue_id: int
    offset: int
    store_timestamp_ms: int
    id: str | None
    type: str | None
    bus: str | None
    rule: str | None
    target: str | None
    status: int | None
    error: str
    attempts: int | None
    origin: str | None

    @property
    def key(self) -> TargetKey | None:
        if self.bus is None or self.rule is None or self.target is None:
            return None
        return TargetKey(self.bus, self.rule, self.target)


def dead_letter_of(message: StoredMessage) -> DeadLetter:
    """Read a dead-letter record; pure, never raises (a body that is no event leaves id and type None)."""
    return read_dead_letter(message)[0]


def read_dead_letter(message: StoredMessage) -> tuple[DeadLetter, dict[str, Any] | None]:
    """The record and its event, decoded once (None for a body that is no event); pure, never raises."""
    properties = message.properties
    try:
        event: dict[str, Any] | None = decode_event(message.body)
    except BusError:
        event = None
    found = event if event is not None else {}
    kind = found.get("type")
    letter = DeadLetter(
        queue_id=message.queue_id,
        offset=message.queue_offset,
        store_timestamp_ms=message.store_timestamp,
        id=found.get("id"),
        type=kind if isinstance(kind, str) else None,
        bus=properties.get(PROPERTY_DLQ_BUS),
        rule=properties.get(PROPERTY_DLQ_RULE),
        target=properties.get(PROPERTY_DLQ_TARGET),
        status=_int_or_none(properties.get(PROPERTY_DLQ_STATUS)),
        error=properties.get(PROPERTY_DLQ_ERROR, ""),
        attempts=_int_or_none(properties.get(PROPERTY_DLQ_ATTEMPTS)),
        origin=properties.get(PROPERTY_DLQ_ORIGIN),
    )
    return letter, event


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


@dataclass(frozen=True, slots=True)
class RedriveFilter:
    """Which dead letters a redrive takes: all, those of one rule (`bus/rule`), or those of one target of it."""

    rule: RuleKey | None = None
    target: str | None = None

    def __post_init__(self) -> None:
        if self.target is not None and self.rule is None:
            raise ReprocessError("a redrive of one target needs its rule too (target ids are per rule)")

    def admits(self, key: TargetKey) -> bool:
        if self.rule is not None and (key.bus, key.rule) != (self.rule.bus, self.rule.name):
            return False
        return self.target is None or key.target == self.target

    @property
    def everything(self) -> bool:
        return self.rule is None


def redriven_before(floor: int, target_offset: int) -> int:
    """The offset below which a target's dead letters have been redriven, from the floor and its own offset (-1
    when it has none)."""
    return max(floor, target_offset)


def page_slices(ranges: Sequence[tuple[int, int, int]], offset: int, limit: int) -> list[tuple[int, int, int]]:
    """Where a page lies in the queues: `ranges` are (queue id, min offset, max offset) in listing order (queue by
    queue); the page skips `offset` messages and takes `limit`. Returns (queue id, first offset, count)."""
    slices = []
    for queue_id, low, high in ranges:
        if limit <= 0:
            break
        size = max(0, high - low)
        if offset >= size:
            offset -= size
            continue
        count = min(limit, size - offset)
        slices.append((queue_id, low + offset, count))
        limit -= count
        offset = 0
    return slices


@dataclass(frozen=True, slots=True)
class Listed:
    letter: DeadLetter
    redriven: bool


@dataclass(frozen=True, slots=True)
class DeadLetterPage:
    topic: str
    total: int
    offset: int
    limit: int
    entries: tuple[Listed, ...]


@dataclass(frozen=True, slots=True)
class QueueRedrive:
    queue_id: int
    from_offset: int
    to_offset: int


@dataclass(frozen=True, slots=True)
class RedriveSummary:
    topic: str
    filter: RedriveFilter
    redriven: Mapping[TargetKey, int]
    skipped_gone: int  # rule or target no longer exists, or the rule is disabled
    skipped_not_dead_letters: int
    queues: tuple[QueueRedrive, ...]

    @property
    def total(self) -> int:
        return sum(self.redriven.values())


@dataclass(slots=True)
class _Progress:
    redriven: dict[TargetKey, int] = field(default_factory=dict)
    gone: int = 0
    not_dead_letters: int = 0


class DeadLetterQueues:
    """Lists and redrives the dead-letter topics of a runtime's rules; one redrive runs at a time."""

    def __init__(self, runtime: EventBridgeRuntime, *, batch: int = REDRIVE_BATCH) -> None:
        self.runtime = runtime
        self.batch = batch
        self._lock = asyncio.Lock()

    def check_topic(self, topic: str) -> None:
        """Raise NotFoundError unless `topic` exists and is a dead-letter topic: a bus's default one, or one that
        a target of the rules in force names (any other topic is not ours to read or redrive)."""
        named = {target.dead_letter_topic for rule in self.runtime.rules for target in rule.targets}
        if not topic.startswith(DEFAULT_DEAD_LETTER_PREFIX) and topic not in named:
            raise NotFoundError(
                f"topic {topic!r} is not a dead-letter topic: neither {DEFAULT_DEAD_LETTER_PREFIX}<bus> nor the "
                "dead_letter_topic of a rule target (GET /rules shows each target's)"
            )
        if not self.runtime.broker.has_topic(topic):
            raise NotFoundError(f"dead-letter topic {topic!r} does not exist: nothing was dead-lettered there yet")

    async def listing(self, topic: str, limit: int = DEFAULT_LIST_LIMIT, offset: int = 0) -> DeadLetterPage:
        """A page of the topic's dead letters, oldest first, queue by queue."""
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise ReprocessError(f"limit {limit}: give 1 to {MAX_LIST_LIMIT}")
        if offset < 0:
            raise ReprocessError(f"offset {offset}: give 0 or more")
        self.check_topic(topic)
        broker = self.runtime.broker
        await broker.wait_visible()
        queues = sorted(queue.queue_id for queue in broker.read_queues(topic))
        ranges = [(q, broker.min_offset(topic, q), broker.max_offset(topic, q)) for q in queues]
        floors = {q: self._floor(topic, q) for q in queues}
        target_offsets: dict[tuple[TargetKey, int], int] = {}
        entries = []
        for queue_id, start, count in page_slices(ranges, offset, limit):
            for message in await self._read(topic, queue_id, start, start + count):
                letter = dead_letter_of(message)
                key = letter.key
                if key is None:
                    entries.append(Listed(letter, False))
                    continue
                if (key, queue_id) not in target_offsets:
                    target_offsets[key, queue_id] = self._target_offset(key, topic, queue_id)
                before = redriven_before(floors[queue_id], target_offsets[key, queue_id])
                entries.append(Listed(letter, letter.offset < before))
        total = sum(max(0, high - low) for _, low, high in ranges)
        return DeadLetterPage(topic, total, offset, limit, tuple(entries))

    async def _read(self, topic: str, queue_id: int, start: int, end: int) -> list[StoredMessage]:
        found: list[StoredMessage] = []
        offset = start
        self.runtime.broker.create_groups([REDRIVE_GROUP])  # ours, whatever auto_create_group says
        while offset < end:
            got = await self.runtime.broker.pull(
                REDRIVE_GROUP, topic, queue_id, offset, min(LIST_PULL_BATCH, end - offset)
            )
            if got.status is not PullStatus.FOUND:
                break
            found += got.messages
            offset = got.next_begin_offset
        return found

    async def redrive(self, topic: str, only: RedriveFilter | None = None) -> RedriveSummary:
        """Append the topic's dead letters not redriven yet (those `only` admits) to their buses, each restricted
        to its rule and target. Raises NotFoundError for an unknown topic or for a filter naming an unknown rule
        or target; BusError if copies cannot be stored (progress up to the last stored batch is kept)."""
        only = only or RedriveFilter()
        self.check_topic(topic)
        self._check_filter(only)
        async with self._lock:
            broker = self.runtime.broker
            await broker.wait_visible()
            progress = _Progress()
            queues = []
            for queue_id in sorted(queue.queue_id for queue in broker.read_queues(topic)):
                queues.append(await self._redrive_queue(topic, queue_id, only, progress))
        summary = RedriveSummary(topic, only, progress.redriven, progress.gone, progress.not_dead_letters,
                                 tuple(queues))  # fmt: skip
        log.info("redrive of %r: %d events sent again, %d skipped (rule or target gone)", topic, summary.total,
                 summary.skipped_gone)  # fmt: skip
        return summary

    def _check_filter(self, only: RedriveFilter) -> None:
        if only.rule is None:
            return
        rule = self.runtime.rules.get(only.rule)
        if rule is None:
            raise NotFoundError(f"no rule {only.rule.name!r} on bus {only.rule.bus!r} (GET /rules lists them)")
        if only.target is not None and all(target.id != only.target for target in rule.targets):
            ids = ", ".join(target.id for target in rule.targets)
            raise NotFoundError(f"rule {only.rule} has no target {only.target!r} (its targets: {ids})")
        if not rule.enabled:
            raise ReprocessError(f"rule {only.rule} is disabled; enable it, then redrive")

    async def _redrive_queue(self, topic: str, queue_id: int, only: RedriveFilter, progress: _Progress) -> QueueRedrive:
        broker = self.runtime.broker
        low = broker.min_offset(topic, queue_id)
        floor = max(self._floor(topic, queue_id), low)
        start = floor
        if only.rule is not None and only.target is not None:
            pair = TargetKey(only.rule.bus, only.rule.name, only.target)
            start = redriven_before(floor, self._target_offset(pair, topic, queue_id))
        end = broker.max_offset(topic, queue_id)
        target_offsets: dict[TargetKey, int] = {}
        offset = start
        broker.create_groups([REDRIVE_GROUP])  # ours, whatever auto_create_group says
        while offset < end:
            got = await broker.pull(REDRIVE_GROUP, topic, queue_id, offset, min(self.batch, end - offset))
            if got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset > offset:
                offset = got.next_begin_offset  # retention removed dead letters meanwhile
                continue
            if got.status is not PullStatus.FOUND:
                break
            copies: dict[TargetKey, list[dict[str, Any]]] = {}
            for message in got.messages:
                letter, event = read_dead_letter(message)
                key = letter.key
                if key is None:
                    progress.not_dead_letters += 1
                    continue
                if not only.admits(key):
                    continue
                if key not in target_offsets:
                    target_offsets[key] = self._target_offset(key, topic, queue_id)
                if letter.offset < redriven_before(floor, target_offsets[key]):
                    continue
                if not self._target_exists(key):
                    progress.gone += 1
                    continue
                if event is None:
                    progress.not_dead_letters += 1
                    continue
                copies.setdefault(key, []).append(event)
            for key, events in copies.items():
                await self.runtime.buses.put(key.bus, events, OnlyFor(f"{key.bus}/{key.rule}", key.target))
                progress.redriven[key] = progress.redriven.get(key, 0) + len(events)
            offset = got.next_begin_offset
            self._commit(topic, queue_id, offset, only, target_offsets)
        return QueueRedrive(queue_id, start, max(start, offset))

    def _commit(
        self, topic: str, queue_id: int, offset: int, only: RedriveFilter, target_offsets: dict[TargetKey, int]
    ) -> None:
        broker = self.runtime.broker
        if only.everything:
            broker.commit_offset(REDRIVE_GROUP, topic, queue_id, offset)
            return
        for key, before in target_offsets.items():
            if offset > before:  # never back: a filtered redrive may start below a target's own offset
                target_offsets[key] = offset
                broker.commit_offset(_target_group(key), topic, queue_id, offset)

    def _target_exists(self, key: TargetKey) -> bool:
        rule = self.runtime.rules.get(RuleKey(key.bus, key.rule))
        return rule is not None and rule.enabled and any(target.id == key.target for target in rule.targets)

    def _floor(self, topic: str, queue_id: int) -> int:
        return self.runtime.broker.query_offset(REDRIVE_GROUP, topic, queue_id)

    def _target_offset(self, key: TargetKey, topic: str, queue_id: int) -> int:
        return self.runtime.broker.query_offset(_target_group(key), topic, queue_id)


def _target_group(key: TargetKey) -> str:
    # TargetKey.connector escapes what group names cannot hold; the prefix keeps these apart from the targets' own
    # groups, which read the bus, not the dead-letter topic.
    return f"{REDRIVE_GROUP}|{key.connector}"
