"""Dead letters in process: a real broker, the runtime with a rule file, real aiohttp targets (one answering 400 until
it is fixed); listing, redriving to the failed target only, and redrive progress kept in the broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core import Broker
from eventbridge.bus import decode_event, default_dead_letter_topic
from eventbridge.errors import NotFoundError, ReprocessError
from eventbridge.rules.model import RuleKey
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.targets.dead_letters import DeadLetterQueues, RedriveFilter, page_slices
from eventbridge.targets.http_target import HttpTargetClient
from tests.eventbridge.observe import calls_of
from tests.eventbridge.target_server import TargetServer
from tests.eventbridge.test_runtime import event, write_rules

DLQ = default_dead_letter_topic("default")
QUIET_S = 0.3

RULES = """
rules:
  - name: fan
    pattern: {{type: [sensor.reading]}}
    targets:
      - id: ok
        type: http
        url: {ok}
      - id: broken
        type: http
        url: {broken}
  - name: other
    pattern: {{type: [sensor.reading]}}
    targets:
      - id: t
        type: http
        url: {other}
  - name: also-bad
    pattern: {{type: [sensor.reading]}}
    targets:
      - id: t
        type: http
        url: {also_bad}
"""


@dataclass
class Setup:
    runtime: EventBridgeRuntime
    ok: TargetServer
    broken: TargetServer
    other: TargetServer
    also_bad: TargetServer

    async def dead_lettered(self, key: TargetKey, count: int) -> None:
        stats = self.runtime.target_tasks()[key].stats
        async with asyncio.timeout(10):
            while stats.dead_lettered < count:
                await asyncio.sleep(0.01)


BROKEN = TargetKey("default", "fan", "broken")
ALSO_BAD = TargetKey("default", "also-bad", "t")


@pytest.fixture
async def setup(broker: Broker, tmp_path: Path) -> AsyncIterator[Setup]:
    """Rule `fan` with a working and a broken (400) target, rule `other` working, rule `also-bad` broken; three
    events, dead-lettered by both broken targets."""
    servers = [await TargetServer(status=status).start() for status in (200, 400, 200, 400)]
    ok, broken, other, also_bad = servers
    urls = {"ok": ok.url, "broken": broken.url, "other": other.url, "also_bad": also_bad.url}
    write_rules(tmp_path / "rules", "r.yaml", RULES.format(**urls))
    client = HttpTargetClient()
    runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=0.05)
    await runtime.start()
    made = Setup(runtime, ok, broken, other, also_bad)
    await runtime.buses.put("default", [event(n) for n in range(3)])
    await made.dead_lettered(BROKEN, 3)
    await made.dead_lettered(ALSO_BAD, 3)
    await ok.wait_for(3)
    await other.wait_for(3)
    yield made
    await runtime.close()
    await client.close()
    for server in servers:
        await server.stop()


async def test_the_list_shows_where_each_event_was_going_and_why_it_failed(setup: Setup) -> None:
    page = await DeadLetterQueues(setup.runtime).listing(DLQ)
    assert page.total == 6
    letters = [listed.letter for listed in page.entries]
    assert sorted((x.rule, x.target, x.id) for x in letters) == sorted(
        (rule, target, f"e{n}") for rule, target in (("fan", "broken"), ("also-bad", "t")) for n in range(3)
    )
    for letter in letters:
        assert (letter.bus, letter.type, letter.status, letter.attempts) == ("default", "sensor.reading", 400, 1)
        assert "400" in letter.error
        assert letter.origin is not None and letter.origin.startswith("%EVENTBUS%default/")
        assert letter.store_timestamp_ms > 0
    assert [listed.redriven for listed in page.entries] == [False] * 6
    assert [x.offset for x in letters] == list(range(6))
    second_page = await DeadLetterQueues(setup.runtime).listing(DLQ, limit=2, offset=3)
    assert [listed.letter.offset for listed in second_page.entries] == [3, 4]
    assert second_page.total == 6


async def test_a_redrive_reaches_the_fixed_target_once_and_nobody_else(setup: Setup) -> None:
    setup.broken.status = 200
    summary = await DeadLetterQueues(setup.runtime).redrive(DLQ, RedriveFilter(RuleKey("default", "fan")))
    assert dict(summary.redriven) == {BROKEN: 3}
    await setup.broken.wait_for(3)
    await asyncio.sleep(QUIET_S)
    assert sorted(setup.broken.ids()) == ["e0", "e1", "e2"]
    # The rule's other target and the other rules delivered them already: nothing again.
    assert len(setup.ok.received) == 3 and len(setup.other.received) == 3
    assert setup.also_bad.requests == 3
    # Progress lives in the broker: a new instance (as after a restart) sends nothing again.
    again = await DeadLetterQueues(setup.runtime).redrive(DLQ, RedriveFilter(RuleKey("default", "fan")))
    assert again.total == 0
    await asyncio.sleep(QUIET_S)
    assert len(setup.broken.received) == 3
    page = await DeadLetterQueues(setup.runtime).listing(DLQ)
    assert {(listed.letter.rule, listed.redriven) for listed in page.entries} == {("fan", True), ("also-bad", False)}


async def test_a_redrive_reads_each_dead_letter_once(setup: Setup) -> None:
    setup.broken.status = 200
    with calls_of(decode_event, "eventbridge/targets/dead_letters.py") as decoded:
        summary = await DeadLetterQueues(setup.runtime).redrive(DLQ, RedriveFilter(RuleKey("default", "fan"), "broken"))
    assert dict(summary.redriven) == {BROKEN: 3}
    # The six dead letters are each read once (also-bad's three to be passed over): not once to list, again to copy.
    assert len(decoded) == 6
    await setup.broken.wait_for(3)


async def test_a_redrive_to_one_rule_sends_its_own_dead_letters_whatever_its_pattern_says_now(
    setup: Setup, tmp_path: Path
) -> None:
    # Restricted to a rule, a redrive takes the dead letters that rule's targets gave up on (by the rule each letter
    # records), not what the rule's pattern matches today: each was matched when it was routed, and was
    # acknowledged to its sender; matching again against an edited pattern would drop it for good.
    urls = {"ok": setup.ok.url, "broken": setup.broken.url, "other": setup.other.url, "also_bad": setup.also_bad.url}
    edited = RULES.format(**urls).replace("{type: [sensor.reading]}", "{type: [x]}", 1)  # fan's pattern only
    write_rules(tmp_path / "rules", "r.yaml", edited)
    assert await setup.runtime.reload() == ()
    pattern = setup.runtime.rules.get(RuleKey("default", "fan")).pattern  # type: ignore[union-attr]
    assert pattern is not None and pattern.value == {"type": ["x"]}
    setup.broken.status = setup.also_bad.status = 200
    summary = await DeadLetterQueues(setup.runtime).redrive(DLQ, RedriveFilter(RuleKey("default", "fan")))
    assert dict(summary.redriven) == {BROKEN: 3}
    await setup.broken.wait_for(3)
    await asyncio.sleep(QUIET_S)
    assert sorted(setup.broken.ids()) == ["e0", "e1", "e2"]
    assert setup.also_bad.requests == 3  # the dead letters of another rule in the same topic stay where they are
    assert len(setup.ok.received) == len(setup.other.received) == 3


async def test_a_redrive_of_one_rule_leaves_the_others_for_a_later_redrive_of_everything(setup: Setup) -> None:
    setup.broken.status = setup.also_bad.status = 200
    dead_letters = DeadLetterQueues(setup.runtime)
    first = await dead_letters.redrive(DLQ, RedriveFilter(RuleKey("default", "also-bad"), "t"))
    assert dict(first.redriven) == {ALSO_BAD: 3}
    await setup.also_bad.wait_for(3)
    rest = await dead_letters.redrive(DLQ)
    assert dict(rest.redriven) == {BROKEN: 3}  # also-bad's were sent by the first redrive: not again
    await setup.broken.wait_for(3)
    assert (await dead_letters.redrive(DLQ)).total == 0
    await asyncio.sleep(QUIET_S)
    assert sorted(setup.also_bad.ids()) == sorted(setup.broken.ids()) == ["e0", "e1", "e2"]
    assert len(setup.ok.received) == len(setup.other.received) == 3


async def test_new_dead_letters_after_a_redrive_are_redriven_next_time(setup: Setup) -> None:
    dead_letters = DeadLetterQueues(setup.runtime)
    await dead_letters.redrive(DLQ)  # the targets still answer 400: every copy is dead-lettered again
    await setup.dead_lettered(BROKEN, 6)
    await setup.dead_lettered(ALSO_BAD, 6)
    setup.broken.status = setup.also_bad.status = 200
    summary = await dead_letters.redrive(DLQ)
    assert dict(summary.redriven) == {BROKEN: 3, ALSO_BAD: 3}  # the second round's, not the first's again
    await setup.broken.wait_for(3)
    await setup.also_bad.wait_for(3)
    await asyncio.sleep(QUIET_S)
    assert sorted(setup.broken.ids()) == ["e0", "e1", "e2"]


async def test_unknown_topics_rules_and_targets_are_refused(setup: Setup) -> None:
    dead_letters = DeadLetterQueues(setup.runtime)
    with pytest.raises(NotFoundError, match="'orders' is not a dead-letter topic"):
        await dead_letters.listing("orders")
    with pytest.raises(NotFoundError, match="'%EVENTBUS-DLQ%nope' does not exist"):
        await dead_letters.redrive(default_dead_letter_topic("nope"))
    with pytest.raises(NotFoundError, match="no rule 'gone' on bus 'default'"):
        await dead_letters.redrive(DLQ, RedriveFilter(RuleKey("default", "gone")))
    with pytest.raises(NotFoundError, match="rule default/fan has no target 'x'"):
        await dead_letters.redrive(DLQ, RedriveFilter(RuleKey("default", "fan"), "x"))
    with pytest.raises(ReprocessError, match="limit 0"):
        await dead_letters.listing(DLQ, limit=0)
    with pytest.raises(ReprocessError, match="needs its rule"):
        RedriveFilter(None, "t")


def test_pages_span_queues_in_order() -> None:
    ranges = [(0, 5, 8), (1, 0, 0), (2, 10, 14)]  # 3, 0 and 4 messages
    assert page_slices(ranges, 0, 100) == [(0, 5, 3), (2, 10, 4)]
    assert page_slices(ranges, 2, 3) == [(0, 7, 1), (2, 10, 2)]
    assert page_slices(ranges, 3, 1) == [(2, 10, 1)]
    assert page_slices(ranges, 7, 5) == []
