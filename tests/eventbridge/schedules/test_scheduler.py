"""Scheduled rules on a manual clock: the events a schedule puts (their ids, times and subject), retries of a failing
put and missed fires (with a bus that fails on demand), and, on a real broker with the EventBridge runtime and a
real aiohttp target, one event per fire time to the scheduled rule's targets only, across a reload that changes
the schedule, a removal, and a restart that makes up nothing."""

from __future__ import annotations

import asyncio
import calendar
import datetime
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from core import Broker
from eventbridge.bus import BusError, OnlyFor
from eventbridge.rules.model import Rule, RuleKey
from eventbridge.rules.rule_file import parse_rule_file
from eventbridge.runtime import EventBridgeRuntime
from eventbridge.schedules.scheduler import MAX_SLEEP_S, SCHEDULED_EVENT_NAMESPACE, Scheduler, scheduled_event
from eventbridge.targets.clock import ManualClock
from eventbridge.targets.http_target import HttpTargetClient
from tests.core.conftest import make_broker  # noqa: F401
from tests.eventbridge.target_server import TargetServer


def at(text: str) -> int:
    return calendar.timegm(datetime.datetime.fromisoformat(text).timetuple())


def rules(*definitions: str) -> list[Rule]:
    return list(parse_rule_file("r.yaml", "rules:\n" + "".join(definitions)))


def scheduled(name: str, schedule: str, url: str = "http://x/", enabled: bool = True, bus: str = "default") -> str:
    return (
        f"  - name: {name}\n    bus: {bus}\n    enabled: {str(enabled).lower()}\n    schedule: {schedule}\n"
        f"    targets:\n      - {{id: t, type: http, url: '{url}'}}\n"
    )


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.002)


async def wake_next(clock: ManualClock, expected: float | None = None) -> float:
    """Wait for a sleeper, check when it wakes, and move the clock there."""
    await until(lambda: clock.next_wake() is not None)
    wake = clock.next_wake()
    assert wake is not None
    if expected is not None:
        assert wake == expected, (iso(wake), iso(expected))
    clock.advance(wake - clock.time())
    return wake


async def advance_to(clock: ManualClock, when: float) -> None:
    """Move the clock to `when` from one sleeper's wake-up to the next (timers wake at least every MAX_SLEEP_S)."""
    while clock.time() < when:
        await until(lambda: clock.next_wake() is not None)
        wake = clock.next_wake()
        assert wake is not None and wake - clock.time() <= MAX_SLEEP_S
        clock.advance(min(wake, when) - clock.time())


def iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat()


# --- the event ---------------------------------------------------------------------------------------------------


def test_a_scheduled_event_is_a_cloudevent_with_an_id_of_its_bus_rule_and_time() -> None:
    key = RuleKey("default", "nightly")
    event = scheduled_event(key, at("2030-01-01T00:05:00"))
    assert event == {
        "specversion": "1.0",
        "id": str(uuid.uuid5(SCHEDULED_EVENT_NAMESPACE, "default/nightly/2030-01-01T00:05:00Z")),
        "source": "mqgate.events",
        "type": "Scheduled Event",
        "subject": "default/nightly",
        "time": "2030-01-01T00:05:00Z",
        "datacontenttype": "application/json",
        "data": {},
    }
    assert scheduled_event(key, at("2030-01-01T00:05:00")) == event  # the same after a restart
    others = {
        scheduled_event(key, at("2030-01-01T00:10:00"))["id"],
        scheduled_event(RuleKey("default", "nightly2"), at("2030-01-01T00:05:00"))["id"],
        scheduled_event(RuleKey("other", "nightly"), at("2030-01-01T00:05:00"))["id"],
    }
    assert event["id"] not in others and len(others) == 3


# --- the timers, with a bus that fails on demand -----------------------------------------------------------------


class FlakyBuses:
    """Records every put; the first `failures` of them raise as a full disk would."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.puts: list[tuple[str, list[Mapping[str, Any]], OnlyFor | None]] = []

    async def put(
        self, bus: str, events: Sequence[Mapping[str, Any]], only_for: OnlyFor | None = None
    ) -> Sequence[object]:
        self.puts.append((bus, list(events), only_for))
        if self.failures:
            self.failures -= 1
            raise BusError("bus 'default': 1 event(s) not durable: FLUSH_DISK_TIMEOUT")
        return []


@pytest.fixture
async def scheduler_parts() -> AsyncIterator[tuple[Scheduler, FlakyBuses, ManualClock]]:
    clock = ManualClock(at("2030-01-01T00:00:30"))
    buses = FlakyBuses()
    scheduler = Scheduler(buses, clock)
    yield scheduler, buses, clock
    await scheduler.close()


async def test_each_fire_puts_one_event_restricted_to_its_rule(
    scheduler_parts: tuple[Scheduler, FlakyBuses, ManualClock],
) -> None:
    scheduler, buses, clock = scheduler_parts
    scheduler.update(rules(scheduled("tick", "rate(1 minute)", bus="plant")))
    key = RuleKey("plant", "tick")
    for minute in (1, 2, 3):
        await wake_next(clock, at(f"2030-01-01T00:0{minute}:00"))
        await until(lambda: len(buses.puts) == minute)  # noqa: B023
    assert [(bus, only) for bus, _, only in buses.puts] == [("plant", OnlyFor("plant/tick"))] * 3
    assert [events for _, events, _ in buses.puts] == [
        [scheduled_event(key, at(f"2030-01-01T00:0{minute}:00"))] for minute in (1, 2, 3)
    ]
    state = scheduler.state(key)
    assert state is not None and (state.fires, state.missed, state.last_error) == (3, 0, None)
    await until(lambda: state.next_fire == at("2030-01-01T00:04:00"))


async def test_a_failing_put_is_retried_within_the_interval_then_counted_as_missed(
    scheduler_parts: tuple[Scheduler, FlakyBuses, ManualClock],
) -> None:
    scheduler, buses, clock = scheduler_parts
    scheduler.update(rules(scheduled("tick", "rate(1 minute)")))
    state = scheduler.state(RuleKey("default", "tick"))
    assert state is not None
    fire = at("2030-01-01T00:01:00")
    # Two failures: put again 1 s and then 2 s later, the third attempt stores it.
    buses.failures = 2
    await wake_next(clock, fire)
    await wake_next(clock, fire + 1)
    await wake_next(clock, fire + 3)
    await until(lambda: state.fires == 1)
    assert len(buses.puts) == 3 and state.missed == 0
    assert buses.puts[0][1] == buses.puts[2][1]  # the same event, with the time it was due
    assert state.last_error is not None and "FLUSH_DISK_TIMEOUT" in state.last_error
    # Failing on: four attempts (1, 2 and 4 s apart), then missed; the next minute fires as usual.
    buses.failures = 4
    fire += 60
    for wake in (fire, fire + 1, fire + 3, fire + 7):
        await wake_next(clock, wake)
    await until(lambda: state.missed == 1)
    assert len(buses.puts) == 7 and state.fires == 1
    await wake_next(clock, fire + 60)
    await until(lambda: state.fires == 2)


async def test_no_retry_is_made_past_the_next_fire_time() -> None:
    clock = ManualClock(at("2030-01-01T00:00:30"))
    buses = FlakyBuses(failures=100)
    scheduler = Scheduler(buses, clock, first_retry_s=40)
    try:
        scheduler.update(rules(scheduled("tick", "rate(1 minute)")))
        state = scheduler.state(RuleKey("default", "tick"))
        assert state is not None
        await wake_next(clock, at("2030-01-01T00:01:00"))
        await wake_next(clock, at("2030-01-01T00:01:40"))  # the retry 80 s later would be past 00:02
        await until(lambda: state.missed == 1)
        assert len(buses.puts) == 2
        await wake_next(clock, at("2030-01-01T00:02:00"))
    finally:
        await scheduler.close()


async def test_an_update_keeps_unchanged_timers_and_stops_changed_disabled_and_deleted_ones(
    scheduler_parts: tuple[Scheduler, FlakyBuses, ManualClock],
) -> None:
    scheduler, _, clock = scheduler_parts
    keep, change, disable, delete = (RuleKey("default", name) for name in ("keep", "change", "disable", "delete"))
    five = "rate(5 minutes)"
    keep_schedule = "'cron(0/5 * * * ? *)'"
    scheduler.update(rules(scheduled("keep", keep_schedule), scheduled("change", five), scheduled("disable", five),
                           scheduled("delete", five)))  # fmt: skip
    before = {key: scheduler.state(key) for key in (keep, change, disable, delete)}
    await until(lambda: clock.sleepers == 4)
    # The kept rule's pattern changes, not its schedule (rewritten, same times): its timer goes on.
    kept = scheduled("keep", "'cron(*/5 * * * ? *)'").replace(
        "    schedule:", "    pattern: {type: [x]}\n    schedule:"
    )
    scheduler.update(rules(kept, scheduled("change", "rate(10 minutes)"), scheduled("disable", five, enabled=False)))
    assert scheduler.state(keep) is before[keep]
    changed = scheduler.state(change)
    assert changed is not None and changed is not before[change] and changed.fires == 0
    assert scheduler.state(disable) is None and scheduler.state(delete) is None
    await until(lambda: clock.sleepers == 2)
    await until(lambda: changed.next_fire == at("2030-01-01T00:10:00"))


async def test_a_schedule_that_fires_no_more_ends(scheduler_parts: tuple[Scheduler, FlakyBuses, ManualClock]) -> None:
    scheduler, buses, clock = scheduler_parts
    scheduler.update(rules(scheduled("once", "'cron(0 12 1 1 ? 2030)'"), scheduled("never", "'cron(0 0 * * ? 2029)'")))
    await advance_to(clock, at("2030-01-01T12:00:00"))
    once, never = scheduler.state(RuleKey("default", "once")), scheduler.state(RuleKey("default", "never"))
    assert once is not None and never is not None
    await until(lambda: once.fires == 1 and once.next_fire is None and never.next_fire is None)
    assert len(buses.puts) == 1 and clock.sleepers == 0


# --- the runtime: a real broker, rule files, a real HTTP target --------------------------------------------------

TICK_RULE = """\
  - name: tick
    schedule: {schedule}
    targets:
      - {{id: t, type: http, url: "{url}?tick"}}
"""
# Its pattern matches the scheduled events, which are not for it.
EVERYTHING_RULE = """\
  - name: everything-from-mqgate
    pattern: {{source: [mqgate.events]}}
    targets:
      - {{id: t, type: http, url: "{url}?all"}}
"""


def rules_text(url: str, schedule: str | None) -> str:
    tick = TICK_RULE.format(schedule=schedule, url=url) if schedule is not None else ""
    return "rules:\n" + tick + EVERYTHING_RULE.format(url=url)


def write_rules(directory: Path, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / ".r.yaml.tmp"
    temporary.write_text(text)
    temporary.rename(directory / "r.yaml")


def received(target: TargetServer, query: str) -> list[dict[str, Any]]:
    return [r.attributes for r in target.received if r.query == query]


async def fire_and_receive(
    clock: ManualClock, runtime: EventBridgeRuntime, target: TargetServer, fire: int, count: int
) -> None:
    """Move the clock to `fire` once the tick rule's timer waits for it; wait for the target's `count`th event."""
    key = RuleKey("default", "tick")
    await until(lambda: (state := runtime.scheduler.state(key)) is not None and state.next_fire == fire)
    await advance_to(clock, fire)
    await until(lambda: len(received(target, "tick")) == count)


async def test_a_scheduled_rule_on_a_manual_clock_through_the_runtime(
    make_broker: Callable[..., Any],  # noqa: F811
    target: TargetServer,
    client: HttpTargetClient,
    tmp_path: Path,
) -> None:
    broker: Broker = await make_broker()
    clock = ManualClock(at("2030-01-01T00:00:30"))
    directory = tmp_path / "rules"
    write_rules(directory, rules_text(target.url, "rate(5 minutes)"))
    runtime = EventBridgeRuntime(broker, directory, client, clock=clock, reload_interval_s=3600)
    await runtime.start()
    key = RuleKey("default", "tick")
    try:
        fires = [at(f"2030-01-01T00:{minute:02}:00") for minute in (5, 10, 15)]
        for count, fire in enumerate(fires, 1):
            await fire_and_receive(clock, runtime, target, fire, count)
        got = received(target, "tick")
        assert [event["id"] for event in got] == [scheduled_event(key, fire)["id"] for fire in fires]
        assert [event["time"] for event in got] == [datetime.datetime.fromtimestamp(f, datetime.UTC) for f in fires]
        assert {(e["source"], e["type"], e["subject"], e["specversion"]) for e in got} == {
            ("mqgate.events", "Scheduled Event", "default/tick", "1.0")}  # fmt: skip
        assert target.received[0].data["data"] == {}  # ORIGINAL: the whole event is the data

        # The other rule's pattern matches such events, but they are for the tick rule only. An event put on the
        # bus by anyone else reaches it, and is all it gets.
        await runtime.buses.put("default", [{**scheduled_event(key, 0), "id": "by-hand"}])
        await until(lambda: len(received(target, "all")) == 1)
        assert [event["id"] for event in received(target, "all")] == ["by-hand"]
        state = runtime.scheduler.state(key)
        assert state is not None and (state.fires, state.missed) == (3, 0)

        # A reload that changes the schedule: the old one's 00:20 passes without a fire, the new one's comes.
        write_rules(directory, rules_text(target.url, "cron(7 * * * ? *)"))
        assert not await runtime.reload()
        await until(lambda: (state := runtime.scheduler.state(key)) is not None and state.next_fire == at(
            "2030-01-01T01:07:00"))  # fmt: skip
        await advance_to(clock, at("2030-01-01T00:20:00"))
        await asyncio.sleep(0.2)
        assert len(received(target, "tick")) == 3
        await fire_and_receive(clock, runtime, target, at("2030-01-01T01:07:00"), 4)
        assert received(target, "tick")[-1]["id"] == scheduled_event(key, at("2030-01-01T01:07:00"))["id"]

        # Removed: no timer, nothing more.
        write_rules(directory, rules_text(target.url, None))
        assert not await runtime.reload()
        assert runtime.scheduler.state(key) is None and clock.next_wake() is None
        clock.advance(3 * 3600)
        await asyncio.sleep(0.3)
        assert len(received(target, "tick")) == 4 and len(received(target, "all")) == 1
    finally:
        await runtime.close()


async def test_after_a_restart_the_next_fire_is_the_first_after_now_and_none_is_made_up(
    make_broker: Callable[..., Any],  # noqa: F811
    target: TargetServer,
    client: HttpTargetClient,
    tmp_path: Path,
) -> None:
    broker: Broker = await make_broker()
    clock = ManualClock(at("2030-01-01T00:00:30"))
    directory = tmp_path / "rules"
    write_rules(directory, rules_text(target.url, "rate(1 hour)"))
    key = RuleKey("default", "tick")
    runtime = EventBridgeRuntime(broker, directory, client, clock=clock, reload_interval_s=3600)
    await runtime.start()
    try:
        await fire_and_receive(clock, runtime, target, at("2030-01-01T01:00:00"), 1)
    finally:
        await runtime.close()
    # Down from 01:00 to 04:30: the fires of 02:00, 03:00 and 04:00 are not made up.
    clock.advance(at("2030-01-01T04:30:00") - clock.time())
    runtime = EventBridgeRuntime(broker, directory, client, clock=clock, reload_interval_s=3600)
    await runtime.start()
    try:
        await fire_and_receive(clock, runtime, target, at("2030-01-01T05:00:00"), 2)
        assert [event["id"] for event in received(target, "tick")] == [
            scheduled_event(key, at(f"2030-01-01T0{hour}:00:00"))["id"] for hour in (1, 5)
        ]
    finally:
        await runtime.close()
