"""Replay in process: a real broker, the runtime with a rule file, real aiohttp targets that parse what they get with
the cloudevents SDK; and the pure parts (selection, names, times) on their own."""

from __future__ import annotations

import asyncio
import datetime
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core import Broker
from eventbridge.archives.replay import (
    REPLAY_NAME_EXTENSION,
    Replayer,
    check_replay_name,
    new_replay_name,
    select_for_replay,
)
from eventbridge.bus import PROPERTY_ONLY_RULE, bus_topic
from eventbridge.errors import NotFoundError, ReprocessError
from eventbridge.runtime import EventBridgeRuntime
from eventbridge.targets.http_target import HttpTargetClient
from eventbridge.time_range import TimeRange, format_ms, parse_time_ms
from tests.eventbridge.target_server import TargetServer
from tests.eventbridge.test_runtime import event, read_topic, rule_yaml, write_rules

# Between two puts, so that their store times (milliseconds) cannot touch.
GAP_S = 0.02
# How long "nothing more arrives" is watched for.
QUIET_S = 0.3


@dataclass
class Setup:
    runtime: EventBridgeRuntime
    a: TargetServer
    b: TargetServer
    stored: list[list[Any]] = field(default_factory=list)  # the stored messages of each put, in put order


@pytest.fixture
async def setup(broker: Broker, tmp_path: Path) -> AsyncIterator[Setup]:
    """Rules `a` and `b` on the default bus, both matching every sensor.reading, each with its own target."""
    a, b = await TargetServer().start(), await TargetServer().start()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("a", a.url) + rule_yaml("b", b.url).replace("rules:\n", ""))
    client = HttpTargetClient()
    runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=0.05)
    await runtime.start()
    yield Setup(runtime, a, b)
    await runtime.close()
    await client.close()
    await a.stop()
    await b.stop()


async def put_in_three_puts(setup: Setup, broker: Broker) -> None:
    """e1 e2 | e3 e4 | e5, a gap between the puts; both targets got all five when this returns."""
    for numbers in ([1, 2], [3, 4], [5]):
        await setup.runtime.buses.put("default", [event(n) for n in numbers])
        await asyncio.sleep(GAP_S)
    await setup.a.wait_for(5)
    await setup.b.wait_for(5)
    by_id = {json.loads(m.body)["id"]: m for m in await read_topic(broker, bus_topic("default"))}
    setup.stored = [[by_id[f"e{n}"] for n in numbers] for numbers in ([1, 2], [3, 4], [5])]


def range_of(messages: list[Any]) -> TimeRange:
    stamps = [message.store_timestamp for message in messages]
    return TimeRange(min(stamps), max(stamps))


def replayed(target: TargetServer) -> list[tuple[str, str]]:
    return sorted(
        (r.attributes["id"], r.attributes[REPLAY_NAME_EXTENSION])
        for r in target.received
        if REPLAY_NAME_EXTENSION in r.attributes
    )


async def test_a_time_range_is_delivered_again_with_its_replay_name(setup: Setup, broker: Broker) -> None:
    await put_in_three_puts(setup, broker)
    middle = range_of(setup.stored[1])
    assert max(m.store_timestamp for m in setup.stored[0]) < middle.from_ms
    assert min(m.store_timestamp for m in setup.stored[2]) > middle.to_ms
    # Batches of 1: the range is read and appended over several batches.
    summary = await Replayer(setup.runtime, batch=1).replay("default", middle)
    assert summary.replayed == 2 and summary.skipped == 0
    assert summary.name.startswith("replay-")
    await setup.a.wait_for(7)
    await setup.b.wait_for(7)
    await asyncio.sleep(QUIET_S)
    for target in (setup.a, setup.b):
        assert len(target.received) == 7
        assert replayed(target) == [("e3", summary.name), ("e4", summary.name)]
        # The copy is the event: same source, type, subject and data.
        copy = next(r for r in target.received if r.attributes.get(REPLAY_NAME_EXTENSION))
        original = next(r for r in target.received if r.attributes["id"] == copy.attributes["id"])
        assert copy.attributes["subject"] == original.attributes["subject"]
        assert copy.data["data"] == original.data["data"]
    # Per queue: the offsets read cover exactly the replayed events.
    assert sum(q.to_offset - q.from_offset for q in summary.queues) == 2


async def test_a_replay_to_one_rule_reaches_only_that_rule(setup: Setup, broker: Broker) -> None:
    await put_in_three_puts(setup, broker)
    everything = TimeRange(range_of(setup.stored[0]).from_ms, range_of(setup.stored[2]).to_ms)
    summary = await Replayer(setup.runtime).replay("default", everything, rule="b", name="fix-b.1")
    assert (summary.name, summary.replayed) == ("fix-b.1", 5)
    await setup.b.wait_for(10)
    await asyncio.sleep(QUIET_S)
    assert replayed(setup.b) == [(f"e{n}", "fix-b.1") for n in range(1, 6)]
    assert len(setup.a.received) == 5 and replayed(setup.a) == []
    copies = [m for m in await read_topic(broker, bus_topic("default")) if REPLAY_NAME_EXTENSION in json.loads(m.body)]
    assert {m.properties[PROPERTY_ONLY_RULE] for m in copies} == {"default/b"}


async def test_replayed_copies_are_not_replayed_again(setup: Setup, broker: Broker) -> None:
    await put_in_three_puts(setup, broker)
    first = await Replayer(setup.runtime).replay("default", range_of(setup.stored[0]))
    await setup.a.wait_for(7)
    now_ms = datetime.datetime.now(datetime.UTC).timestamp() * 1000
    second = await Replayer(setup.runtime).replay("default", TimeRange(0, int(now_ms) + 1000))
    assert first.replayed == 2
    assert (second.replayed, second.skipped) == (5, 2)  # the originals again; the first replay's copies skipped
    await setup.a.wait_for(12)
    await asyncio.sleep(QUIET_S)
    assert sorted(r.attributes["id"] for r in setup.a.received) == sorted(
        [f"e{n}" for n in range(1, 6)] * 2 + ["e1", "e2"]
    )
    assert {name for _, name in replayed(setup.a)} == {first.name, second.name}


async def test_a_range_with_nothing_in_it_replays_nothing(setup: Setup, broker: Broker) -> None:
    await put_in_three_puts(setup, broker)
    before = range_of(setup.stored[0]).from_ms - 10_000
    summary = await Replayer(setup.runtime).replay("default", TimeRange(before, before + 5000))
    assert summary.replayed == 0
    assert all(q.from_offset == q.to_offset == 0 for q in summary.queues)
    await asyncio.sleep(QUIET_S)
    assert len(setup.a.received) == 5


async def test_unknown_bus_or_rule_and_bad_names_are_refused(setup: Setup) -> None:
    replayer = Replayer(setup.runtime)
    span = TimeRange(0, 1)
    with pytest.raises(NotFoundError, match="bus 'nope' does not exist"):
        await replayer.replay("nope", span)
    with pytest.raises(NotFoundError, match="no rule 'c' on bus 'default'"):
        await replayer.replay("default", span, rule="c")
    with pytest.raises(ReprocessError, match="replay name 'a b'"):
        await replayer.replay("default", span, name="a b")
    with pytest.raises(ReprocessError, match=r"'from' .* is after 'to'"):
        TimeRange(2, 1)


# --- the pure parts ----------------------------------------------------------------------------------------


@dataclass
class Stored:
    body: bytes
    store_timestamp: int
    properties: dict[str, str] = field(default_factory=dict)


def stored(event_: dict[str, Any], at: int, **properties: str) -> Stored:
    return Stored(json.dumps(event_).encode(), at, properties)


def test_selection_stops_at_the_first_message_past_the_end_and_skips_copies() -> None:
    messages = [
        stored(event(1), 10),
        stored({**event(2), REPLAY_NAME_EXTENSION: "old"}, 11),
        stored(event(3), 12, **{PROPERTY_ONLY_RULE: "default/x"}),
        Stored(b"not json", 13),
        stored(event(4), 20),
        stored(event(5), 21),  # past the end
        stored(event(6), 20),  # behind the first one past the end: not looked at
    ]
    selection = select_for_replay(messages, 20, "r")
    assert [copy["id"] for copy in selection.copies] == ["e1", "e4"]
    assert all(copy[REPLAY_NAME_EXTENSION] == "r" for copy in selection.copies)
    assert (selection.skipped, selection.considered, selection.past_end) == (3, 5, True)
    assert not select_for_replay(messages[:1], 20, "r").past_end


def test_generated_names_carry_the_start_time_in_utc_and_are_valid() -> None:
    moment = datetime.datetime(2024, 5, 1, 12, 30, 5, tzinfo=datetime.UTC).timestamp()
    name = new_replay_name(moment, random.Random(7))
    assert name.startswith("replay-20240501123005-") and len(name) == len("replay-20240501123005-") + 4
    assert check_replay_name(name) == name
    assert new_replay_name(moment, random.Random(1)) != new_replay_name(moment, random.Random(2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00Z", 1714564800000),
        ("2024-05-01T14:00:00+02:00", 1714564800000),
        ("2024-05-01T12:00:00", 1714564800000),  # naive: UTC
        ("2024-05-01T12:00:00.123Z", 1714564800123),
        (1714564800000, 1714564800000),
        ("1714564800000", 1714564800000),
    ],
)
def test_times_are_iso_8601_or_epoch_milliseconds(text: object, expected: int) -> None:
    assert parse_time_ms(text, "from") == expected
    assert format_ms(expected).endswith("Z")


@pytest.mark.parametrize("bad", ["yesterday", "", True, None, 1.5, 10**16, -1])
def test_other_times_are_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ReprocessError, match="'to'"):
        parse_time_ms(bad, "to")


# --- from an archive -------------------------------------------------------------------------------------------


async def test_a_replay_from_an_archive_selects_by_event_time_and_reaches_one_rule(
    setup: Setup, broker: Broker, tmp_path: Path
) -> None:
    write_rules(tmp_path / "rules", "archive.yaml", "archives: [{name: kept}, {name: elsewhere, bus: shop}]\n")
    assert await setup.runtime.reload() == ()
    january = [{**event(n), "time": f"2020-01-{n:02d}T00:00:00Z"} for n in range(1, 7)]
    await setup.runtime.buses.put("default", january)
    await setup.a.wait_for(6)
    await setup.b.wait_for(6)
    kept = setup.runtime.archives()["kept"]
    async with asyncio.timeout(10):
        while kept.stats().events < 6:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
    second_to_fourth = TimeRange(parse_time_ms("2020-01-02", "from"), parse_time_ms("2020-01-04T00:00:00Z", "to"))

    summary = await Replayer(setup.runtime, batch=2).replay("default", second_to_fourth, "b", "jan", archive="kept")
    assert (summary.replayed, summary.skipped, summary.queues) == (3, 0, ())
    assert summary.archive is not None and summary.archive.archive == "kept"
    await setup.b.wait_for(9)
    await asyncio.sleep(QUIET_S)
    assert replayed(setup.b) == [("e2", "jan"), ("e3", "jan"), ("e4", "jan")]
    assert len(setup.a.received) == 6 and replayed(setup.a) == []
    # The bus itself replays by store time: its events were stored now, not in January 2020.
    assert (await Replayer(setup.runtime).replay("default", second_to_fourth)).replayed == 0

    with pytest.raises(NotFoundError, match="no archive 'nope'"):
        await Replayer(setup.runtime).replay("default", second_to_fourth, archive="nope")
    with pytest.raises(ReprocessError, match="archive 'elsewhere' holds events of bus 'shop'"):
        await Replayer(setup.runtime).replay("default", second_to_fourth, archive="elsewhere")


# --- to one rule: what its pattern matches -------------------------------------------------------------------


async def test_a_replay_to_one_rule_takes_only_the_events_its_pattern_matches(broker: Broker, tmp_path: Path) -> None:
    readings, orders = await TargetServer().start(), await TargetServer().start()
    # As in the issue: a replay to `orders` must not send it the readings that only `readings` matches.
    rules = f"""
rules:
  - {{name: readings, pattern: {{type: [sensor.reading]}}, targets: [{{id: t, type: http, url: '{readings.url}'}}]}}
  - {{name: orders, pattern: {{type: [order]}}, targets: [{{id: t, type: http, url: '{orders.url}'}}]}}
  - {{name: hourly, schedule: rate(1 hour), targets: [{{id: t, type: http, url: '{orders.url}'}}]}}
"""
    write_rules(tmp_path / "rules", "r.yaml", rules)
    write_rules(tmp_path / "rules", "archive.yaml", "archives: [{name: kept}]\n")
    client = HttpTargetClient()
    runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=0.05)
    try:
        await runtime.start()
        assert runtime.errors == ()
        kept = runtime.archives()["kept"]
        async with asyncio.timeout(10):
            while kept.log is None:
                await asyncio.sleep(0.02)
        await runtime.buses.put("default", [event(n, type="order" if n % 2 else "sensor.reading") for n in range(6)])
        await readings.wait_for(3)
        await orders.wait_for(3)
        now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000) + 1000
        everything = TimeRange(0, now_ms)

        summary = await Replayer(runtime).replay("default", everything, rule="orders", name="orders-again")
        assert (summary.replayed, summary.unmatched, summary.skipped) == (3, 3, 0)
        await orders.wait_for(6)
        async with asyncio.timeout(10):
            while kept.stats().events < 6:  # type: ignore[union-attr]
                await asyncio.sleep(0.02)
        from_archive = await Replayer(runtime).replay("default", everything, "orders", "from-kept", archive="kept")
        assert (from_archive.replayed, from_archive.unmatched) == (3, 3)
        await orders.wait_for(9)
        await asyncio.sleep(QUIET_S)
        assert replayed(orders) == sorted(
            (f"e{n}", name) for n in (1, 3, 5) for name in ("orders-again", "from-kept")
        )  # the order events only, once per replay
        assert len(orders.received) == 9
        assert len(readings.received) == 3 and replayed(readings) == []

        with pytest.raises(ReprocessError, match="rule default/hourly has no event pattern"):
            await Replayer(runtime).replay("default", everything, rule="hourly")
    finally:
        await runtime.close()
        await client.close()
        await readings.stop()
        await orders.stop()


def test_selection_for_one_rule_counts_what_it_does_not_match_apart() -> None:
    messages = [stored(event(1, type="order"), 10), stored(event(2), 11), Stored(b"not json", 12)]
    selection = select_for_replay(messages, 20, "r", lambda found: found["type"] == "order")
    assert [copy["id"] for copy in selection.copies] == ["e1"]
    assert (selection.unmatched, selection.skipped, selection.considered) == (1, 1, 3)
