"""Archives filled in process: a real broker and store, the runtime with rule files, real aiohttp targets. An archive
holds exactly the events of its bus that its pattern matches, never a replayed or redriven copy; it starts at the
end of its bus; it keeps events for a retention of its own, on the runtime's clock, shorter or longer than the
store's; it follows its definition through reloads, and its files go when it is deleted."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core import Broker
from eventbridge.archives.filler import (
    POSITIONS_ONLY_INTERVAL_S,
    ArchiveFiller,
    ArchiveState,
    event_time_ms,
    select_for_archive,
)
from eventbridge.archives.log import DAY_MS
from eventbridge.archives.record import HEADER_SIZE, Commit, decode_record
from eventbridge.archives.replay import Replayer
from eventbridge.bus import PROPERTY_ONLY_RULE, REPLAY_NAME_EXTENSION, bus_topic, default_dead_letter_topic
from eventbridge.patterns.matcher import Matcher
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.targets.clock import ManualClock
from eventbridge.targets.dead_letters import DeadLetterQueues
from eventbridge.targets.http_target import HttpTargetClient
from eventbridge.time_range import TimeRange
from tests.eventbridge.target_server import TargetServer
from tests.eventbridge.test_runtime import event, read_topic, write_rules

EVERYTHING = TimeRange(0, 2**42)  # epoch ms up to the year 2109


@pytest.fixture
async def runtimes(broker: Broker, client: HttpTargetClient, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    started: list[EventBridgeRuntime] = []

    async def start(**options: Any) -> EventBridgeRuntime:
        runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=3600, **options)
        await runtime.start()
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        await runtime.close()


async def caught_up(runtime: EventBridgeRuntime, name: str) -> ArchiveFiller:
    """The archive once it has read its bus to the end."""
    filler = runtime.archives()[name]
    topic = bus_topic(filler.archive.bus)
    async with asyncio.timeout(20):
        while True:
            await runtime.broker.wait_visible()
            ends = {q.queue_id: runtime.broker.max_offset(topic, q.queue_id) for q in runtime.broker.read_queues(topic)}
            if filler.positions == ends:
                return filler
            await asyncio.sleep(0.02)


async def archived(runtime: EventBridgeRuntime, name: str, time_range: TimeRange = EVERYTHING) -> list[dict[str, Any]]:
    filler = await caught_up(runtime, name)
    assert filler.log is not None
    return [
        json.loads(e.body) async for batch in filler.log.read(time_range.from_ms, time_range.to_ms, 7) for e in batch
    ]


async def still_in_the_store(broker: Broker, topic: str) -> list[Any]:
    """The messages of a topic the store still holds, from each queue's first offset on."""
    await broker.wait_visible()
    found = []
    for queue in broker.read_queues(topic):
        first = broker.min_offset(topic, queue.queue_id)
        found += broker.store.get_messages(topic, queue.queue_id, first, 10_000, None, None).messages
    return found


def ids(events: list[dict[str, Any]]) -> list[str]:
    return sorted(e["id"] for e in events)


ARCHIVES = """
archives:
  - name: readings
    pattern: {type: [sensor.reading]}
  - name: everything
"""


def rule(name: str, url: str, pattern: str = "{type: [sensor.reading, alarm]}") -> str:
    return f"  - name: {name}\n    pattern: {pattern}\n    targets: [{{id: t, type: http, url: '{url}'}}]\n"


async def test_an_archive_holds_exactly_the_matching_events_not_replays_or_redrives(
    runtimes: Callable[..., Any], tmp_path: Path
) -> None:
    ok, broken = await TargetServer().start(), await TargetServer(status=400).start()
    try:
        write_rules(tmp_path / "rules", "r.yaml", ARCHIVES + "rules:\n" + rule("ok", ok.url) + rule("bad", broken.url))
        runtime = await runtimes()
        readings = [event(n) for n in range(12)]
        alarms = [event(n, type="alarm") for n in range(100, 105)]
        await runtime.buses.put("default", readings[:6] + alarms + readings[6:])
        await ok.wait_for(17)
        # A replay of everything (copies to every rule), one to rule `ok` only, and a redrive of the broken target's
        # dead letters (copies to that target only) once it answers again.
        replay = await Replayer(runtime).replay("default", EVERYTHING)
        assert replay.replayed == 17
        await Replayer(runtime).replay("default", EVERYTHING, rule="ok")
        task = runtime.target_tasks()[TargetKey("default", "bad", "t")]
        async with asyncio.timeout(10):
            while task.stats.dead_lettered < 17 + 17:
                await asyncio.sleep(0.01)
        broken.status = 200
        redrive = await DeadLetterQueues(runtime).redrive(default_dead_letter_topic("default"))
        assert redrive.total == 34
        await broken.wait_for(34)
        await ok.wait_for(17 * 3)

        copies = [
            m for m in await read_topic(runtime.broker, bus_topic("default")) if PROPERTY_ONLY_RULE in m.properties
        ]
        assert len(copies) == 17 + 34  # the bus holds the copies ...
        assert ids(await archived(runtime, "readings")) == ids(readings)  # ... the archives only the originals
        assert ids(await archived(runtime, "everything")) == ids(readings + alarms)
        stored = await archived(runtime, "everything")
        assert all(REPLAY_NAME_EXTENSION not in e for e in stored) and len(stored) == 17
    finally:
        await ok.stop()
        await broken.stop()


async def test_a_new_archive_starts_at_the_end_of_its_bus(runtimes: Callable[..., Any], tmp_path: Path) -> None:
    write_rules(tmp_path / "rules", "a.yaml", "archives: [{name: early}]\n")
    runtime = await runtimes()
    await runtime.buses.put("default", [event(n) for n in range(5)])
    write_rules(tmp_path / "rules", "b.yaml", "archives: [{name: late, bus: shop}]\n")
    write_rules(tmp_path / "rules", "c.yaml", "archives: [{name: later}]\n")
    assert await runtime.reload() == ()
    assert runtime.buses.exists("shop")  # created with its archive, as a rule's bus is
    await runtime.buses.put("default", [event(n) for n in range(5, 8)])
    await runtime.buses.put("shop", [event(9)])
    assert ids(await archived(runtime, "early")) == [f"e{n}" for n in range(8)]
    assert ids(await archived(runtime, "later")) == ["e5", "e6", "e7"]
    assert ids(await archived(runtime, "late")) == ["e9"]


async def test_an_archive_shows_creating_while_it_starts_not_failed(
    runtimes: Callable[..., Any], tmp_path: Path
) -> None:
    """From the moment a reload reads its definition until its files are open, an archive is CREATING (AWS's state
    then); FAILED is kept for a start that failed. A busy machine once showed a starting archive as FAILED."""
    runtime = await runtimes()
    write_rules(tmp_path / "rules", "a.yaml", "archives: [{name: a}]\n")
    reloading = asyncio.ensure_future(runtime.reload())
    seen: list[ArchiveState] = []
    while not reloading.done():
        filler = runtime.archives().get("a")
        if filler is not None:
            seen.append(filler.state)
        await asyncio.sleep(0)
    await reloading
    assert seen and seen[0] is ArchiveState.CREATING and ArchiveState.FAILED not in seen
    assert runtime.archives()["a"].state is ArchiveState.ENABLED and runtime.archives()["a"].reason is None


async def test_reloads_change_an_archive_keep_it_through_a_refused_file_and_delete_it(
    runtimes: Callable[..., Any], tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    write_rules(rules, "a.yaml", "archives: [{name: a, pattern: {type: [x]}}]\n")
    runtime = await runtimes()
    directory = runtime.archives_dir / "a"
    assert directory.is_dir()
    await runtime.buses.put("default", [event(1, type="x"), event(2, type="y")])
    assert ids(await archived(runtime, "a")) == ["e1"]

    write_rules(rules, "a.yaml", "archives: [{name: a, pattern: {type: [y]}, retention_days: 3}]\n")
    await runtime.reload()
    assert runtime.archives()["a"].archive.retention_days == 3
    await runtime.buses.put("default", [event(3, type="x"), event(4, type="y")])
    assert ids(await archived(runtime, "a")) == ["e1", "e4"]  # the new pattern from the next batch on

    write_rules(rules, "a.yaml", "archives: [{name: a, pattern: {type: [y]}, retention_days: -3}]\n")
    errors = await runtime.reload()
    assert len(errors) == 1 and "retention_days is -3" in errors[0].reason
    await runtime.buses.put("default", [event(5, type="y")])
    assert ids(await archived(runtime, "a")) == ["e1", "e4", "e5"]  # refused file: the archive keeps running

    write_rules(rules, "a.yaml", "archives: [{name: a, bus: other}]\n")
    await runtime.reload()
    filler = runtime.archives()["a"]
    assert filler.state is ArchiveState.FAILED and "hold events of bus 'default'" in (filler.reason or "")
    write_rules(rules, "a.yaml", "archives: [{name: a}]\n")
    await runtime.reload()
    assert runtime.archives()["a"].state is ArchiveState.ENABLED
    assert ids(await archived(runtime, "a")) == ["e1", "e4", "e5"]  # its events kept through it all

    (rules / "a.yaml").unlink()
    await runtime.reload()
    assert runtime.archives() == {} and not directory.exists()


async def test_retention_of_its_own_drops_events_the_store_still_has(
    runtimes: Callable[..., Any], tmp_path: Path
) -> None:
    clock = ManualClock()
    write_rules(tmp_path / "rules", "a.yaml", "archives: [{name: week, retention_days: 7}, {name: forever}]\n")
    runtime = await runtimes(clock=clock)
    await runtime.buses.put("default", [event(n) for n in range(10)])
    assert len(await archived(runtime, "week")) == 10
    clock.advance(6 * DAY_MS / 1000)
    await asyncio.sleep(1.5)  # a retention check (IDLE_WAIT_S) came and went: 6 days are not 7
    assert runtime.archives()["week"].stats().events == 10  # type: ignore[union-attr]
    clock.advance(1.1 * DAY_MS / 1000)
    async with asyncio.timeout(10):
        while runtime.archives()["week"].stats().events:  # type: ignore[union-attr]
            await asyncio.sleep(0.05)
    assert await archived(runtime, "week") == []
    assert len(await archived(runtime, "forever")) == 10  # retention 0: indefinitely
    assert len(await read_topic(runtime.broker, bus_topic("default"))) == 10  # the bus still has them
    # The archive goes on after its segments expired: the next events are archived.
    await runtime.buses.put("default", [event(11)])
    assert ids(await archived(runtime, "week")) == ["e11"]


async def test_an_archive_keeps_what_the_store_deleted_and_a_replay_reaches_it(
    make_broker: Callable[..., Any],
    client: HttpTargetClient,
    target: TargetServer,
    tmp_path: Path,
) -> None:
    # Commit-log segments of 64 KiB, expired as soon as they are sealed: the store keeps little.
    broker: Broker = await make_broker(
        tmp_path / "b", segment_size=64 * 1024, max_message_size=16 * 1024, file_reserved_hours=0
    )
    write_rules(tmp_path / "rules", "a.yaml", "archives: [{name: all}]\nrules:\n" + rule("r", target.url))
    runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=3600)
    await runtime.start()
    try:
        sent = [event(n, padding="x" * 1000) for n in range(300)]
        for start in range(0, 300, 50):
            await runtime.buses.put("default", sent[start : start + 50])
        await target.wait_for(300)
        assert len(await archived(runtime, "all")) == 300
        assert broker.store.delete_expired_files() > 0
        readable = await still_in_the_store(broker, bus_topic("default"))
        assert 0 < len(readable) < 300  # the store lost the oldest events ...
        everything = TimeRange(0, 2**42)
        from_bus = await Replayer(runtime).replay("default", everything)
        assert from_bus.replayed == len(readable)  # ... so a replay from the bus cannot reach them
        from_archive = await Replayer(runtime).replay("default", everything, archive="all", name="from-archive")
        assert from_archive.replayed == 300 and from_archive.queues == ()
        await target.wait_for(300 + len(readable) + 300)
        copies = [
            r.attributes["id"] for r in target.received if r.attributes.get(REPLAY_NAME_EXTENSION) == "from-archive"
        ]
        assert sorted(copies) == sorted(e["id"] for e in sent)
    finally:
        await runtime.close()


@dataclass
class Message:
    body: bytes
    properties: dict[str, str]
    store_timestamp: int
    queue_offset: int


def test_selection_skips_copies_and_non_events_and_takes_the_event_time() -> None:
    def message(body: dict[str, Any] | bytes, offset: int, **properties: str) -> Message:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return Message(data, properties, 5000, offset)

    messages = [
        message({**event(1), "time": "2020-01-01T00:00:00.250Z"}, 10),
        message({**event(2), REPLAY_NAME_EXTENSION: "r"}, 11),
        message(event(3), 12, **{PROPERTY_ONLY_RULE: "default/x"}),
        message(b"not an event", 13),
        message({**event(4, type="other")}, 14),
        message({**event(5), "time": "yesterday"}, 15),
    ]
    kept = select_for_archive(messages, 2, None)
    assert [(e.queue_id, e.queue_offset) for e in kept] == [(2, 10), (2, 14), (2, 15)]
    assert [e.event_ms for e in kept] == [1_577_836_800_250, 5000, 5000]  # no readable time: the store time
    only_readings = Matcher([("a", {"type": ["sensor.reading"]})])
    assert [e.queue_offset for e in select_for_archive(messages, 2, only_readings)] == [10, 15]
    assert event_time_ms({"time": "2024-05-01T12:00:00+02:00"}, 0) == 1_714_557_600_000


def commits_in(directory: Path) -> int:
    count = 0
    for path in directory.glob("*.seg"):
        data, position = path.read_bytes(), HEADER_SIZE
        while position < len(data):
            record, position = decode_record(data, position)
            count += isinstance(record, Commit)
    return count


async def test_positions_past_events_it_does_not_keep_are_written_at_most_every_interval(
    runtimes: Callable[..., Any], tmp_path: Path
) -> None:
    write_rules(tmp_path / "rules", "a.yaml", "archives: [{name: rare, pattern: {type: [never]}}]\n")
    runtime = await runtimes()
    started = time.monotonic()
    for n in range(40):  # forty rounds' worth of events, none of them the archive's
        await runtime.buses.put("default", [event(n)])
        await asyncio.sleep(0.005)
    elapsed = time.monotonic() - started
    filler = await caught_up(runtime, "rare")  # idle: the positions are written within a second or two
    assert filler.stats().events == 0  # type: ignore[union-attr]
    # The creation's commit, one per interval while events flowed, and the idle one: not one per event.
    assert commits_in(runtime.archives_dir / "rare") <= 1 + elapsed / POSITIONS_ONLY_INTERVAL_S + 2
