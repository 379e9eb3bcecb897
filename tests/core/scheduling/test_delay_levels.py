"""Delay levels (core/scheduling/delay_levels.py): messages sent with DELAY=n reach their topic after the n-th level's
time, in order, exactly once, across clean restarts and SIGKILL; bad levels are refused, never sent at once."""

import asyncio
import json

import pytest

from core import BrokerConfig, IllegalMessageError, Producer
from core.clock import ManualClock
from core.scheduling.delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels
from core.system_topics import SCHEDULE_TOPIC
from tests.core.child_broker import run_killed_child
from tests.core.reading import eventually, everything_in

LEVEL_S = [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]


async def bodies_in(broker, topic):
    return [message.body for message in await everything_in(broker, topic)]


def test_default_levels_are_rocketmqs_eighteen():
    assert parse_delay_levels(DEFAULT_DELAY_LEVELS) == tuple(s * 1000 for s in LEVEL_S)
    assert parse_delay_levels("500s 2d") == (500_000, 172_800_000)


@pytest.mark.parametrize("text", ["", "1s 5x", "0s", "1.5s", "10", "s", "-1s"])
def test_malformed_level_tables_are_refused_with_the_level(text):
    with pytest.raises(ValueError, match="message_delay_level"):
        BrokerConfig(message_delay_level=text)


async def test_all_eighteen_levels_arrive_in_order_and_on_time(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    broker.create_topic("d", queue_nums=1)
    producer = Producer(broker)
    for level in range(18, 0, -1):  # sent longest first: arrival order must follow due time, not send order
        result = await producer.send("d", b"level-%d" % level, properties={"DELAY": str(level)})
        assert result.message_queue.topic == "d"
    assert await bodies_in(broker, "d") == []
    elapsed = 0
    for level, seconds in enumerate(LEVEL_S, 1):
        clock.advance(seconds - elapsed - 0.001)
        await asyncio.sleep(0.05)
        assert len(await bodies_in(broker, "d")) == level - 1, f"level {level} arrived early"
        clock.advance(0.001)
        elapsed = seconds
        await eventually(lambda n=level: broker.max_offset("d", 0) == n)
    assert await bodies_in(broker, "d") == [b"level-%d" % level for level in range(1, 19)]
    assert broker.schedule.offsets() == {level: 1 for level in range(1, 19)}


async def test_a_delayed_message_arrives_as_it_was_sent(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    producer = Producer(broker)
    big = bytes(range(256)) * 40  # over 4 KiB: compressed on the way in
    sent = await producer.send(
        "d", big, tags="TagA", keys=["k1", "k2"], properties={"DELAY": "3", "region": "eu"}, sharding_key="s"
    )
    clock.advance(10)
    await eventually(lambda: broker.max_offset("d", sent.message_queue.queue_id) == 1)
    await broker.wait_visible()
    [moved] = (await broker.pull("g", "d", sent.message_queue.queue_id, 0, 10)).messages
    assert moved.unique_id == sent.msg_id
    assert (moved.tags, moved.keys, moved.properties["region"]) == ("TagA", ["k1", "k2"], "eu")
    assert not {"DELAY", "REAL_TOPIC", "REAL_QID", "__TAG_CODE"} & moved.properties.keys()
    from core.compression import decode_for_consumer

    assert decode_for_consumer(moved).body == big


async def test_real_time_level_one_waits_a_second(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    broker.create_topic("rt", queue_nums=1)
    sent_at = broker.clock.now_ms()
    await producer.send("rt", b"x", properties={"DELAY": "1"})
    await eventually(lambda: broker.max_offset("rt", 0) == 1)
    [moved] = (await broker.pull("g", "rt", 0, 0, 10)).messages
    assert moved.store_timestamp - sent_at >= 1000


@pytest.mark.parametrize("value", ["19", "-1", "abc", "1.5", " 3", ""])
async def test_an_unknown_level_is_refused_and_nothing_is_stored(make_broker, value):
    broker = await make_broker()
    broker.create_topic("d", queue_nums=1)
    with pytest.raises(IllegalMessageError, match="delay level"):
        await Producer(broker).send("d", b"x", properties={"DELAY": value})
    assert broker.store.max_offset(SCHEDULE_TOPIC, 0) == 0 and broker.max_offset("d", 0) == 0


async def test_level_zero_is_no_delay_and_a_batch_cannot_be_delayed(make_broker):
    broker = await make_broker(clock=ManualClock())
    broker.create_topic("d", queue_nums=1)
    producer = Producer(broker)
    await producer.send("d", b"now", properties={"DELAY": "0"})
    await broker.wait_visible()
    assert broker.max_offset("d", 0) == 1
    with pytest.raises(IllegalMessageError, match="batch"):
        await producer.send_batch("d", [b"a", b"b"], properties={"DELAY": "1"})
    with pytest.raises(IllegalMessageError, match="not both"):
        await producer.send("d", b"x", properties={"DELAY": "1", "TIMER_DELAY_SEC": "3"})


async def test_a_clean_restart_keeps_waiting_messages_and_moves_each_once(make_broker, tmp_path):
    clock = ManualClock()
    broker = await make_broker(tmp_path, clock=clock)
    broker.create_topic("d", queue_nums=1)
    producer = Producer(broker)
    for n in range(20):
        await producer.send("d", b"m%d" % n, properties={"DELAY": "2" if n % 2 else "4"})
    clock.advance(5)  # level 2 (5 s) is due, level 4 (30 s) is not
    await eventually(lambda: broker.max_offset("d", 0) == 10)
    await broker.close()
    broker.store.close()
    later = ManualClock(clock.now_ms() + 3600_000)
    again = await make_broker(tmp_path, clock=later)
    await eventually(lambda: again.max_offset("d", 0) == 20)
    await asyncio.sleep(0.2)
    bodies = await bodies_in(again, "d")
    assert sorted(bodies) == sorted(b"m%d" % n for n in range(20))
    again.schedule.persist()  # every second, and at close
    assert json.loads((tmp_path / "config" / "delayOffset.json").read_text())["offsetTable"] == {"2": 10, "4": 10}


async def test_sigkill_while_moving_loses_nothing_and_moves_nothing_twice(make_broker, tmp_path):
    total = 3000
    output = run_killed_child(
        tmp_path,
        f"""
        broker = await open_broker(directory, BrokerConfig(message_delay_level="1s 2s"))
        broker.create_topic("d", queue_nums=1)
        offsets = directory / "config" / "delayOffset.json"

        def persisted():
            try:
                return json.loads(offsets.read_text())["offsetTable"].get("1", 0)
            except (OSError, ValueError):
                return 0

        def moved_ahead_of_progress():
            moved = broker.store.max_offset("d", 0)
            return 0 < moved < {total} and moved > persisted() + 10

        kill_when(moved_ahead_of_progress)
        producer = Producer(broker)
        for n in range({total}):
            await producer.send("d", b"m%d" % n, properties={{"DELAY": "1"}})
            if n % 100 == 0:
                await asyncio.sleep(0.01)
        """,
    )
    assert "killed" in output
    broker = await make_broker(tmp_path, config=BrokerConfig(message_delay_level="1s 2s"))
    assert broker.store.recovery.clean is False
    await eventually(lambda: broker.max_offset("d", 0) >= total, timeout=60)
    await asyncio.sleep(1.5)  # anything moved twice would show up now
    bodies = await bodies_in(broker, "d")
    assert len(bodies) == total and set(bodies) == {b"m%d" % n for n in range(total)}
