"""TargetTask.put on its own: a scripted deliverer instead of HTTP, a manual clock, a real broker for dead letters.

What the runner relies on: `put` returns only when every matched event of the batch is delivered or dead-lettered,
never more than `concurrency` attempts run at once, and an event waiting for its next attempt holds no slot.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping
from typing import Any

import pytest

from connectors.api import SinkRecord
from core import Broker
from eventbridge.bus import encode_event
from eventbridge.rules.model import HttpTarget, Rule
from eventbridge.rules.rule_file import parse_rule_file
from eventbridge.targets.clock import ManualClock
from eventbridge.targets.delivery_outcome import DeliveryOutcome
from eventbridge.targets.target_task import PROPERTY_DLQ_ATTEMPTS, TargetTask

OK = DeliveryOutcome(ok=True, status=204, error="", retryable=False)
UNAVAILABLE = DeliveryOutcome(ok=False, status=503, error="HTTP 503: busy", retryable=True)
REFUSED = DeliveryOutcome(ok=False, status=400, error="HTTP 400: no", retryable=False)


def rule_with(settings: str) -> Rule:
    target = "      - id: t\n        type: http\n        url: http://x/\n"
    text = "rules:\n  - name: r\n    pattern: {type: [a]}\n    targets:\n" + target + textwrap.indent(settings, " " * 8)
    (rule,) = parse_rule_file("t.yaml", text)
    return rule


def records(count: int, event_type: str = "a") -> list[SinkRecord]:
    events = ({"specversion": "1.0", "id": f"e{n}", "source": "s", "type": event_type} for n in range(count))
    bodies = [encode_event(event) for event in events]
    return [SinkRecord("%EVENTBUS%default", 0, n, body, [], None, {}, 0, 0, "") for n, body in enumerate(bodies)]


class ScriptedDeliverer:
    """Answers each event's attempts from its script (the last answer repeats), each after `gate` opens; records
    the attempts and the most attempts in flight at once."""

    def __init__(self, scripts: Mapping[str, list[DeliveryOutcome]] | None = None) -> None:
        self.scripts = scripts or {}
        self.attempts: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def deliver(self, target: HttpTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        event_id = event["id"]
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
            await self.gate.wait()
            script = self.scripts.get(event_id, [OK])
            answer = script[min(self.attempts.count(event_id), len(script) - 1)]
            self.attempts.append(event_id)
            return answer
        finally:
            self.in_flight -= 1


def task_for(broker: Broker, rule: Rule, deliverer: ScriptedDeliverer, clock: ManualClock | None = None) -> TargetTask:
    broker.create_topic("dead", 1)
    return TargetTask(broker, rule, rule.targets[0], deliverer, "dead", clock or ManualClock())


@pytest.mark.parametrize(("concurrency", "count"), [(1, 5), (3, 50), (8, 256), (8, 3)])
async def test_every_event_once_and_never_more_than_concurrency_at_once(
    broker: Broker, concurrency: int, count: int
) -> None:
    deliverer = ScriptedDeliverer()
    task = task_for(broker, rule_with(f"concurrency: {concurrency}\n"), deliverer)
    await task.put(records(count))
    assert sorted(deliverer.attempts) == sorted(f"e{n}" for n in range(count))
    assert deliverer.most_in_flight == min(concurrency, count)
    assert (task.stats.matched, task.stats.delivered) == (count, count)


async def test_copies_meant_for_another_rule_or_target_are_not_delivered(broker: Broker) -> None:
    deliverer = ScriptedDeliverer()
    task = task_for(broker, rule_with(""), deliverer)
    other_rule, other_target, mine = records(3)
    other_rule.properties["EB_ONLY_RULE"] = "default/other"
    other_target.properties.update({"EB_ONLY_RULE": "default/r", "EB_ONLY_TARGET": "u"})
    mine.properties.update({"EB_ONLY_RULE": "default/r", "EB_ONLY_TARGET": "t"})
    await task.put([other_rule, other_target, mine])
    await task.put([])
    assert deliverer.attempts == ["e2"]
    assert task.stats.matched == 1


async def test_an_event_waiting_to_retry_holds_no_slot(broker: Broker) -> None:
    clock = ManualClock()
    deliverer = ScriptedDeliverer({"e0": [UNAVAILABLE, OK]})
    policy = "concurrency: 1\nretry_policy: {strategy: BACKOFF_RETRY, retries: 3, min_delay_s: 60, max_delay_s: 60}\n"
    task = task_for(broker, rule_with(policy), deliverer, clock)
    put = asyncio.create_task(task.put(records(4)))
    async with asyncio.timeout(10):
        while deliverer.attempts != ["e0", "e1", "e2", "e3"]:  # e0 sleeps; the one slot serves the others
            await asyncio.sleep(0.001)
        assert not put.done()
        assert clock.sleepers == 1
        clock.advance(60)
        await put
    assert deliverer.attempts == ["e0", "e1", "e2", "e3", "e0"]
    assert (task.stats.delivered, task.stats.retries, task.stats.dead_lettered) == (4, 1, 0)


async def test_put_returns_only_after_dead_lettering(broker: Broker) -> None:
    clock = ManualClock()
    deliverer = ScriptedDeliverer({"e1": [UNAVAILABLE], "e2": [REFUSED]})
    policy = "retry_policy: {strategy: BACKOFF_RETRY, retries: 2, min_delay_s: 1, max_delay_s: 1}\n"
    task = task_for(broker, rule_with(policy), deliverer, clock)
    put = asyncio.create_task(task.put(records(3)))
    async with asyncio.timeout(10):
        while not put.done():
            await asyncio.sleep(0.001)
            if clock.sleepers:
                clock.advance(1)
        await put
    assert deliverer.attempts.count("e1") == 3 and deliverer.attempts.count("e2") == 1
    assert (task.stats.delivered, task.stats.retries, task.stats.dead_lettered) == (1, 2, 2)
    await broker.wait_visible()
    dead = broker.store.get_messages("dead", 0, 0, 10, None, None).messages
    assert sorted(m.properties[PROPERTY_DLQ_ATTEMPTS] for m in dead) == ["1", "3"]


async def test_a_failing_dead_letter_raises_its_error_and_stops_the_batch(broker: Broker) -> None:
    deliverer = ScriptedDeliverer({"e0": [REFUSED]})
    task = task_for(broker, rule_with("concurrency: 2\n"), deliverer)

    class FullDisk:
        """The dead-letter producer on a full disk. A stand-in rather than a patched method: the compiled
        Producer's methods cannot be replaced on an instance."""

        async def send(self, *args: Any, **kwargs: Any) -> None:
            raise OSError(28, "No space left on device")

    task.producer = FullDisk()  # type: ignore[assignment]
    deliverer.gate.clear()
    put = asyncio.create_task(task.put(records(3)))
    await asyncio.sleep(0.01)
    deliverer.gate.set()
    with pytest.raises(OSError, match="No space left"):
        await put
    await asyncio.sleep(0.01)
    assert deliverer.in_flight == 0  # no attempt of the batch goes on behind the runner's back
