"""The EventBridge runtime in process: a real broker, rule files in a directory, real aiohttp targets that parse
what they get with the cloudevents SDK, and the real HTTP target client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from core import Broker
from eventbridge.bus import OnlyFor, bus_topic, default_dead_letter_topic
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.targets.clock import ManualClock
from eventbridge.targets.http_target import HttpTargetClient
from eventbridge.targets.target_task import (
    PROPERTY_DLQ_ATTEMPTS,
    PROPERTY_DLQ_ERROR,
    PROPERTY_DLQ_RULE,
    PROPERTY_DLQ_STATUS,
    PROPERTY_DLQ_TARGET,
)
from tests.eventbridge.target_server import TargetServer, unused_port


def event(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"e{n}",
        "source": "mqgate/test",
        "type": fields.pop("type", "sensor.reading"),
        "subject": f"room/{n}",
        "datacontenttype": "application/json",
        "data": {"n": n, **fields},
    }


def write_rules(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{name}.tmp"
    temporary.write_text(text)
    temporary.rename(directory / name)  # as an editor's save: the watcher never sees half a file


def rule_yaml(name: str, url: str, pattern: str = "{type: [sensor.reading]}", extra: str = "") -> str:
    return f"""
rules:
  - name: {name}
    pattern: {pattern}
    targets:
      - id: t
        type: http
        url: {url}
        {extra}
"""


@pytest.fixture
async def targets() -> AsyncIterator[Callable[..., Any]]:
    started: list[TargetServer] = []

    async def start(port: int = 0, status: int = 200) -> TargetServer:
        server = await TargetServer(status=status).start(port)
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


async def start_runtime(broker: Broker, rules: Path, client: HttpTargetClient, **options: Any) -> EventBridgeRuntime:
    runtime = EventBridgeRuntime(broker, rules, client, reload_interval_s=0.05, **options)
    await runtime.start()
    return runtime


async def read_topic(broker: Broker, topic: str) -> list[Any]:
    await broker.wait_visible()
    messages = []
    for queue in broker.read_queues(topic):
        got = broker.store.get_messages(topic, queue.queue_id, 0, 10_000, None, None)
        messages += got.messages
    return messages


async def test_matching_events_reach_the_target_as_cloudevents(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("cold", target.url, "{data: {temp: [{numeric: ['<', 5]}]}}"))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        events = [event(n, temp=t) for n, t in enumerate([3, 10, 4.5, 5, -1])]
        await runtime.buses.put("default", events)
        await target.wait_for(3)
        await asyncio.sleep(0.2)  # nothing more comes
        assert target.ids() == ["e0", "e2", "e4"]
        first = target.received[0]
        assert first.attributes["source"] == "mqgate/test"
        assert first.attributes["type"] == "sensor.reading"
        assert first.attributes["subject"] == "room/0"
        # ORIGINAL: the whole matched event is the data.
        assert first.data["id"] == "e0" and first.data["data"] == {"n": 0, "temp": 3}
        stats = runtime.target_tasks()[TargetKey("default", "cold", "t")].stats
        assert (stats.matched, stats.delivered, stats.dead_lettered) == (3, 3, 0)
    finally:
        await runtime.close()


async def test_a_new_rule_starts_at_the_end_of_the_bus(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets()
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await runtime.buses.put("default", [event(1), event(2)])
        write_rules(tmp_path / "rules", "r.yaml", rule_yaml("late", target.url))
        assert not await runtime.reload()
        await runtime.buses.put("default", [event(3)])
        await target.wait_for(1)
        await asyncio.sleep(0.2)
        assert target.ids() == ["e3"]
    finally:
        await runtime.close()


async def test_a_target_down_then_up_gets_every_event(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    port = unused_port()
    url = f"http://127.0.0.1:{port}/events"
    policy = "retry_policy: {strategy: BACKOFF_RETRY, retries: 1000, min_delay_s: 0.05, max_delay_s: 0.1}"
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("all", url, extra=policy))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await runtime.buses.put("default", [event(n) for n in range(20)])
        stats = runtime.target_tasks()[TargetKey("default", "all", "t")].stats
        async with asyncio.timeout(10):
            while stats.retries < 20:
                await asyncio.sleep(0.02)
        target = await targets(port)
        await target.wait_for(20)
        await runtime.buses.put("default", [event(n) for n in range(20, 25)])
        await target.wait_for(25)
        assert sorted(target.ids()) == sorted(f"e{n}" for n in range(25))
        assert stats.dead_lettered == 0
        assert await read_topic(broker, default_dead_letter_topic("default")) == []
    finally:
        await runtime.close()


async def test_a_target_failing_forever_dead_letters_after_the_policy_on_a_manual_clock(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets(status=500)
    policy = "retry_policy: {strategy: EXPONENTIAL_DECAY_RETRY}\n        dead_letter_topic: failed-events"
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("doomed", target.url, extra=policy))
    clock = ManualClock()
    start = clock.time()
    runtime = await start_runtime(broker, tmp_path / "rules", client, clock=clock)
    try:
        await runtime.buses.put("default", [event(n) for n in range(3)])
        stats = runtime.target_tasks()[TargetKey("default", "doomed", "t")].stats
        async with asyncio.timeout(60):
            while stats.dead_lettered < 3:
                # Let every event make its attempt and go to sleep, then move time to the next wake-up.
                while clock.sleepers + stats.dead_lettered < 3:
                    await asyncio.sleep(0.001)
                wake = clock.next_wake()
                if wake is not None:
                    clock.advance(wake - clock.time())
                await asyncio.sleep(0)
        # The retry schedule's span on the manual clock (virtual time, not a speed): the policy's day, used up.
        schedule_span_s = clock.time() - start
        assert schedule_span_s <= 24 * 3600 + 60  # the age counts from arrival, a moment after the clock was made
        assert schedule_span_s > 20 * 3600  # it did not give up early
        dead = await read_topic(broker, "failed-events")
        assert sorted(json.loads(m.body)["id"] for m in dead) == ["e0", "e1", "e2"]
        for message in dead:
            assert message.properties[PROPERTY_DLQ_RULE] == "doomed"
            assert message.properties[PROPERTY_DLQ_TARGET] == "t"
            assert message.properties[PROPERTY_DLQ_STATUS] == "500"
            assert "HTTP 500" in message.properties[PROPERTY_DLQ_ERROR]
            assert 20 < int(message.properties[PROPERTY_DLQ_ATTEMPTS]) <= 186
        assert target.requests == sum(int(m.properties[PROPERTY_DLQ_ATTEMPTS]) for m in dead)
    finally:
        await runtime.close()


async def test_a_client_error_is_dead_lettered_at_once(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets(status=400)
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("bad", target.url))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await runtime.buses.put("default", [event(1)])
        stats = runtime.target_tasks()[TargetKey("default", "bad", "t")].stats
        async with asyncio.timeout(10):
            while stats.dead_lettered < 1:
                await asyncio.sleep(0.01)
        (dead,) = await read_topic(broker, default_dead_letter_topic("default"))
        assert dead.properties[PROPERTY_DLQ_ATTEMPTS] == "1"
        assert dead.properties[PROPERTY_DLQ_STATUS] == "400"
        assert target.requests == 1
    finally:
        await runtime.close()


async def test_a_rule_file_edited_mid_stream_loses_and_repeats_nothing_for_unchanged_rules(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    steady, edited = await targets(), await targets()
    rules = tmp_path / "rules"
    write_rules(rules, "steady.yaml", rule_yaml("steady", steady.url))
    write_rules(rules, "edited.yaml", rule_yaml("edited", edited.url, "{data: {n: [{numeric: ['<', 0]}]}}"))
    runtime = await start_runtime(broker, rules, client)
    try:
        total = 400
        for n in range(total):
            await runtime.buses.put("default", [event(n)])
            if n == 100:
                widened = rule_yaml("edited", edited.url, "{data: {n: [{numeric: ['>=', 0]}]}}")
                write_rules(rules, "edited.yaml", widened)
            if n == 200:
                (rules / "broken.yaml").write_text("rules:\n  - name: [oops\n")
            if n % 20 == 0:
                await asyncio.sleep(0.02)  # let the watcher see the edits mid-stream
        await steady.wait_for(total)
        await asyncio.sleep(0.3)
        assert sorted(steady.ids()) == sorted(f"e{n}" for n in range(total))  # each once
        assert edited.received, "the edited rule matched nothing after its edit"
        assert set(edited.ids()) <= {f"e{n}" for n in range(100, total)}
        assert "e399" in edited.ids()
        assert runtime.errors and "broken.yaml" in str(runtime.errors[0])
    finally:
        await runtime.close()


async def test_after_a_restart_a_target_goes_on_from_its_committed_offset(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("r", target.url))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    await runtime.buses.put("default", [event(1)])
    await target.wait_for(1)
    await runtime.close()
    await runtime.buses.put("default", [event(2), event(3)])  # while no rule runs
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await target.wait_for(3)
        await asyncio.sleep(0.2)
        assert sorted(target.ids()) == ["e1", "e2", "e3"]
    finally:
        await runtime.close()


async def test_a_copy_for_one_rule_reaches_only_that_rule(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    a, b = await targets(), await targets()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("a", a.url) + rule_yaml("b", b.url).replace("rules:\n", ""))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await runtime.buses.put("default", [event(1)], only_for=OnlyFor("default/b"))
        await runtime.buses.put("default", [event(2)])
        await a.wait_for(1)
        await b.wait_for(2)
        assert a.ids() == ["e2"]
        assert sorted(b.ids()) == ["e1", "e2"]
    finally:
        await runtime.close()


async def test_a_bus_message_that_is_not_an_event_is_skipped(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    target = await targets()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("r", target.url))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        from core.client import Producer

        await Producer(broker).send(bus_topic("default"), b"not json")
        await runtime.buses.put("default", [event(1)])
        await target.wait_for(1)
        assert target.ids() == ["e1"]
        runner = runtime.runner(TargetKey("default", "r", "t"))
        assert runner.state.value == "RUNNING"
    finally:
        await runtime.close()


async def test_a_dead_target_does_not_delay_another_target_of_the_same_rule(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    healthy = await targets()
    dead_url = f"http://127.0.0.1:{unused_port()}/events"
    text = f"""
rules:
  - name: both
    pattern: {{type: [sensor.reading]}}
    targets:
      - {{id: dead, type: http, url: "{dead_url}", retry_policy: EXPONENTIAL_DECAY_RETRY}}
      - {{id: healthy, type: http, url: "{healthy.url}"}}
"""
    write_rules(tmp_path / "rules", "r.yaml", text)
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        for n in range(50):
            await runtime.buses.put("default", [event(n)])
        await healthy.wait_for(50, timeout_s=10)
        dead = runtime.target_tasks()[TargetKey("default", "both", "dead")].stats
        assert dead.delivered == 0 and dead.retries >= 1  # still retrying, with its own schedule
    finally:
        await runtime.close()


async def test_events_a_target_had_not_delivered_before_routing_are_delivered_after_the_upgrade(
    broker: Broker, client: HttpTargetClient, targets: Callable[..., Any], tmp_path: Path
) -> None:
    # As a data directory written before routing: the target's group read the bus topic itself, and had committed
    # offsets in it past e0 and e1 (delivered) but not the rest.
    from eventbridge.bus import EventBuses

    buses = EventBuses(broker)
    buses.create("default")
    for n in range(6):
        await buses.put("default", [event(n, type="sensor.reading" if n != 4 else "other")])
    await broker.wait_visible()
    group = "connect-" + TargetKey("default", "r", "t").connector
    topic = bus_topic("default")
    delivered_before = {}
    for queue in broker.read_queues(topic):
        got = broker.store.get_messages(topic, queue.queue_id, 0, 100, None, None)
        done = [m for m in got.messages if json.loads(m.body)["id"] in ("e0", "e1")]
        delivered_before[queue.queue_id] = max([m.queue_offset + 1 for m in done], default=0)
        broker.commit_offset(group, topic, queue.queue_id, delivered_before[queue.queue_id])
    target = await targets()
    write_rules(tmp_path / "rules", "r.yaml", rule_yaml("r", target.url))
    runtime = await start_runtime(broker, tmp_path / "rules", client)
    try:
        await target.wait_for(3)
        await runtime.buses.put("default", [event(9)])
        await target.wait_for(4)
        await asyncio.sleep(0.2)
        assert sorted(target.ids()) == ["e2", "e3", "e5", "e9"]  # e4 is not matched; e0, e1 were delivered
        assert all(broker.query_offset(group, topic, q) == -1 for q in delivered_before)  # forgotten
    finally:
        await runtime.close()
