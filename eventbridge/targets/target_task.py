"""One rule target as a sink task of the connector runtime: the events routed to the target (router.py: matched
once, when they were put on the bus), delivered under its retry policy, and dead-lettered when the policy gives up.

Each (rule, target) pair runs as its own SinkRunner, reading its own delivery queue as its own consumer group, so
a slow or dead target holds up nobody else. `put` returns once every matched event of the batch is delivered or
dead-lettered; the runner then commits the batch's offsets. A crash before that delivers the batch again: at
least once, never lost.

Inside a batch, events are delivered concurrently, at most `target.concurrency` requests at a time: that many
workers take the batch's events in order, one attempt at a time. Each event keeps its own attempt count and
schedule; a failed event waits for its next attempt in a task of its own, not in a worker (it does not hold the
slot while it waits), and goes back to the workers' queue when its time comes. Only failures cost a task; the
events of a healthy target cost none. The age that
EXPONENTIAL_DECAY_RETRY's max_age_s bounds counts from the event's arrival on the bus, as AWS's 24 hours do: an
event that waited in a backlog behind a dead target does not get another full day.

A dead-lettered event keeps its body (the original event); properties say why:

    EB_DLQ_BUS, EB_DLQ_RULE, EB_DLQ_TARGET   where it was going
    EB_DLQ_STATUS                            the last HTTP status ("" when there was no answer)
    EB_DLQ_ERROR                             the last error, one line
    EB_DLQ_ATTEMPTS                          delivery attempts made
    EB_DLQ_ORIGIN                            "<bus topic>/<queue id>/<queue offset>" of the event
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from connectors.api import SinkRecord, SinkTask
from core import Broker, Producer
from eventbridge.bus import BusError, OnlyFor, decode_event
from eventbridge.rules.model import Rule, Target
from eventbridge.targets.clock import Clock, SystemClock
from eventbridge.targets.delivery_outcome import DeliveryOutcome

log = logging.getLogger(__name__)

PROPERTY_DLQ_BUS = "EB_DLQ_BUS"
PROPERTY_DLQ_RULE = "EB_DLQ_RULE"
PROPERTY_DLQ_TARGET = "EB_DLQ_TARGET"
PROPERTY_DLQ_STATUS = "EB_DLQ_STATUS"
PROPERTY_DLQ_ERROR = "EB_DLQ_ERROR"
PROPERTY_DLQ_ATTEMPTS = "EB_DLQ_ATTEMPTS"
PROPERTY_DLQ_ORIGIN = "EB_DLQ_ORIGIN"
PROPERTY_DLQ_SOURCE = "EB_DLQ_SOURCE"  # an event source's refused event (source_task): the source's name
# An error text in a dead-letter record is cut to this (the record's properties hold 64 KiB in all).
MAX_ERROR_CHARS = 2000


class Deliverer(Protocol):
    """What delivers one event to one target (local_targets.Deliverers: HTTP, core topic, MQTT, bus)."""

    async def deliver(self, target: Target, event: Mapping[str, Any]) -> DeliveryOutcome: ...


@dataclass(slots=True)
class _Delivery:
    """One matched event of a batch on its way to the target."""

    record: SinkRecord
    event: dict[str, Any]
    attempts: int = 0


@dataclass(slots=True)
class _Batch:
    """The events of one `put` still to deliver or dead-letter: those ready for an attempt, in order, and a count
    of all not yet finished (ready, in an attempt, or waiting for their next one)."""

    ready: deque[_Delivery]
    unfinished: int
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # an event became ready, or the last finished


@dataclass(slots=True)
class TargetStats:
    matched: int = 0
    delivered: int = 0
    retries: int = 0
    dead_lettered: int = 0
    last_error: str = ""


class TargetTask(SinkTask):
    def __init__(
        self,
        broker: Broker,
        rule: Rule,
        target: Target,
        deliverer: Deliverer,
        dead_letter_topic: str,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.rule = rule
        self.target = target
        self.deliverer = deliverer
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.producer = Producer(broker, "eventbridge-dead-letters")
        self.stats = TargetStats()
        self._rule_key = str(rule.key)
        self._label = f"rule {rule.key} target {target.id!r}"

    async def put(self, records: list[SinkRecord]) -> None:
        matched: deque[_Delivery] = deque()
        for record in records:
            only = OnlyFor.of(record.properties)
            if only is not None and (
                only.rule != self._rule_key or (only.target is not None and only.target != self.target.id)
            ):
                continue
            try:
                event = decode_event(record.body)
            except BusError as exc:
                log.warning("%s: %s/%d/%d skipped: %s", self._label, record.topic, record.queue_id,
                            record.queue_offset, exc)  # fmt: skip
                continue
            self.stats.matched += 1
            matched.append(_Delivery(record, event))
        if matched:
            await self._deliver_all(_Batch(matched, len(matched)))

    async def _deliver_all(self, batch: _Batch) -> None:
        """Return once every event of the batch is delivered or dead-lettered. A failure to dead-letter stops the
        batch's other deliveries and is raised (the runner puts the batch again)."""
        workers = min(self.target.concurrency, batch.unfinished)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(workers - 1):
                    group.create_task(self._work(batch, group))
                await self._work(batch, group)
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None  # what one coroutine per event raised through gather

    async def _work(self, batch: _Batch, group: asyncio.TaskGroup) -> None:
        ready = batch.ready
        while True:
            if ready:
                delivery = ready.popleft()
            elif batch.unfinished:
                batch.changed.clear()
                await batch.changed.wait()  # for an event's next attempt, or the end of the batch
                continue
            else:
                return
            delay = await self._attempt(delivery)
            if delay is None:
                batch.unfinished -= 1
                if not batch.unfinished:
                    batch.changed.set()
            else:
                group.create_task(self._again_after(batch, delivery, delay))

    async def _attempt(self, delivery: _Delivery) -> float | None:
        """One delivery attempt; the delay before the next one, or None when the event is delivered or
        dead-lettered."""
        delivery.attempts += 1
        outcome = await self.deliverer.deliver(self.target, delivery.event)
        if outcome.ok:
            self.stats.delivered += 1
            return None
        self.stats.last_error = outcome.error
        delay = None
        if outcome.retryable:
            age = max(0.0, self.clock.time() - delivery.record.store_timestamp_ms / 1000)
            delay = self.target.retry_policy.next_delay(delivery.attempts, self.rng, age)
        if delay is None:
            await self._dead_letter(delivery.record, delivery.event, outcome, delivery.attempts)
            return None
        self.stats.retries += 1
        log.info("%s: event %s attempt %d failed (%s); again in %.1f s", self._label, delivery.event.get("id"),
                 delivery.attempts, outcome.error, delay)  # fmt: skip
        return delay

    async def _again_after(self, batch: _Batch, delivery: _Delivery, delay: float) -> None:
        await self.clock.sleep(delay)
        batch.ready.append(delivery)
        batch.changed.set()

    async def _dead_letter(
        self, record: SinkRecord, event: Mapping[str, Any], outcome: DeliveryOutcome, attempts: int
    ) -> None:
        properties = {
            PROPERTY_DLQ_BUS: self.rule.bus,
            PROPERTY_DLQ_RULE: self.rule.name,
            PROPERTY_DLQ_TARGET: self.target.id,
            PROPERTY_DLQ_STATUS: "" if outcome.status is None else str(outcome.status),
            PROPERTY_DLQ_ERROR: _one_line(outcome.error)[:MAX_ERROR_CHARS],
            PROPERTY_DLQ_ATTEMPTS: str(attempts),
            PROPERTY_DLQ_ORIGIN: f"{record.topic}/{record.queue_id}/{record.queue_offset}",
        }
        await self.producer.send(
            self.dead_letter_topic,
            record.body,
            keys=[str(event.get("id"))],
            tags=str(event.get("type") or "") or None,
            properties=properties,
        )
        self.stats.dead_lettered += 1
        log.warning("%s: event %s sent to dead-letter topic %r after %d attempt(s): %s", self._label,
                    event.get("id"), self.dead_letter_topic, attempts, outcome.error)  # fmt: skip


def _one_line(text: str) -> str:
    # The store's property separators and line breaks would corrupt or confuse a property value.
    return " ".join(text.replace("\x01", " ").replace("\x02", " ").split())
