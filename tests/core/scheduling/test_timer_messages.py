"""Timer messages (core/scheduling/timers.py): TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS reach their topic at
that time (never early), 1 s, 10 s, hours and 10 days ahead (rolled over the window), exactly once across clean restarts
and SIGKILL; bad times are refused, never sent at once."""

import asyncio
import json

import pytest

from core import BrokerConfig, IllegalMessageError, Producer
from core.clock import ManualClock
from core.system_topics import TIMER_TOPIC
from tests.core.child_broker import run_killed_child
from tests.core.reading import eventually, everything_in

DAY_S = 24 * 3600


async def step_to(clock, broker, due_ms, topic, count_before):
    """Move the clock to 1 ms before `due_ms` (nothing new may arrive), then to `due_ms` (one more arrives)."""
    clock.set(due_ms - 1)
    await asyncio.sleep(0.05)
    await broker.wait_visible()
    assert broker.max_offset(topic, 0) == count_before, f"arrived before {due_ms}"
    clock.set(due_ms)
    await eventually(lambda: broker.max_offset(topic, 0) == count_before + 1)


async def test_timers_one_second_ten_seconds_hours_and_ten_days_ahead_arrive_on_time(make_broker):
    clock = ManualClock(1_800_000_000_000)
    broker = await make_broker(clock=clock)
    broker.create_topic("t", queue_nums=1)
    producer = Producer(broker)
    start = clock.now_ms()
    plan = [
        ("TIMER_DELAY_SEC", "1", start + 1000),
        ("TIMER_DELAY_MS", "10500", start + 10_500),
        ("TIMER_DELIVER_MS", str(start + 3 * 3600_000 + 1), start + 3 * 3600_000 + 1),
        ("TIMER_DELAY_SEC", str(10 * DAY_S), start + 10 * DAY_S * 1000),
    ]
    for name, value, _ in reversed(plan):
        result = await producer.send("t", b"%s=%s" % (name.encode(), value.encode()), properties={name: value})
        assert result.message_queue.topic == "t"
    for count, (_, _, due) in enumerate(plan[:3]):
        await step_to(clock, broker, due, "t", count)
    # Ten days: the message is stored again each time a day (the roll window) of its wait is over.
    for day in range(1, 10):
        clock.set(start + day * DAY_S * 1000)
        await eventually(lambda: len(broker.timers.wheel) == 1 and broker.timers.wheel.firing is None)
        await asyncio.sleep(0.02)
    await step_to(clock, broker, plan[3][2], "t", 3)
    messages = await everything_in(broker, "t")
    assert [m.body for m in messages] == [b"%s=%s" % (n.encode(), v.encode()) for n, v, _ in plan]
    for message, (_, _, due) in zip(messages, plan, strict=True):
        assert int(message.properties["TIMER_DELIVER_MS"]) == due
        assert (
            not {"REAL_TOPIC", "REAL_QID", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__TAG_CODE"}
            & message.properties.keys()
        )
    assert int(messages[3].properties.get("TIMER_ROLL_TIMES", "0")) == 0  # dropped on arrival
    await broker.wait_visible()
    assert broker.store.max_offset(TIMER_TOPIC, 0) >= 4 + 9  # four parked, nine rolls of the ten-day one
    assert len(broker.timers.wheel) == 0


async def test_real_time_timer_is_never_early(make_broker):
    broker = await make_broker()
    broker.create_topic("rt", queue_nums=1)
    sent_at = broker.clock.now_ms()
    await Producer(broker).send("rt", b"x", properties={"TIMER_DELAY_MS": "1200"})
    await eventually(lambda: broker.max_offset("rt", 0) == 1)
    [message] = await everything_in(broker, "rt")
    assert message.store_timestamp - sent_at >= 1200
    assert int(message.properties["TIMER_OUT_MS"]) >= int(message.properties["TIMER_DELIVER_MS"])


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        ({"TIMER_DELAY_SEC": str(30 * DAY_S + 1)}, "at most 2592000 s ahead"),
        ({"TIMER_DELAY_SEC": "-5"}, "non-negative integer"),
        ({"TIMER_DELAY_MS": "1.5"}, "non-negative integer"),
        ({"TIMER_DELIVER_MS": "tomorrow"}, "non-negative integer"),
        ({"TIMER_DELAY_SEC": "5", "TIMER_DELAY_MS": "5000"}, "names its time once"),
    ],
)
async def test_bad_timers_are_refused_and_nothing_is_stored(make_broker, properties, error):
    broker = await make_broker(clock=ManualClock())
    broker.create_topic("t", queue_nums=1)
    with pytest.raises(IllegalMessageError, match=error):
        await Producer(broker).send("t", b"x", properties=properties)
    await broker.wait_visible()
    assert broker.store.max_offset(TIMER_TOPIC, 0) == 0 and broker.max_offset("t", 0) == 0


async def test_the_maximum_is_configurable_and_a_past_time_is_now(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock, config=BrokerConfig(timer_max_delay_s=60))
    broker.create_topic("t", queue_nums=1)
    producer = Producer(broker)
    with pytest.raises(IllegalMessageError, match="at most 60 s"):
        await producer.send("t", b"x", properties={"TIMER_DELAY_SEC": "61"})
    await producer.send("t", b"past", properties={"TIMER_DELIVER_MS": str(clock.now_ms() - 5000)})
    await broker.wait_visible()
    assert broker.max_offset("t", 0) == 1
    with pytest.raises(IllegalMessageError, match="batch"):
        await producer.send_batch("t", [b"a"], properties={"TIMER_DELAY_SEC": "3"})


async def test_a_clean_restart_rebuilds_the_wheel_from_the_queue(make_broker, tmp_path):
    clock = ManualClock(1_800_000_000_000)
    broker = await make_broker(tmp_path, clock=clock)
    broker.create_topic("t", queue_nums=1)
    producer = Producer(broker)
    for n in range(30):
        await producer.send("t", b"m%d" % n, properties={"TIMER_DELAY_SEC": str(1 + n * 3600)})
    clock.advance(1)
    await eventually(lambda: broker.max_offset("t", 0) == 1)
    await eventually(
        lambda: (
            json.loads((tmp_path / "config" / "timerCheckpoint.json").read_text())["firedThroughS"]
            == clock.now_ms() // 1000
        )
    )
    await broker.close()
    broker.store.close()
    later = ManualClock(clock.now_ms() + 5 * 3600_000 + 500)  # five more are due while it was down
    again = await make_broker(tmp_path, clock=later)
    assert len(again.timers.wheel) == 29
    await eventually(lambda: again.max_offset("t", 0) == 6)
    later.advance(30 * 3600)
    await eventually(lambda: again.max_offset("t", 0) == 30)
    await asyncio.sleep(0.1)
    bodies = [m.body for m in await everything_in(again, "t")]
    assert bodies == [b"m%d" % n for n in range(30)]


async def test_sigkill_while_a_second_fires_loses_nothing_and_moves_nothing_twice(make_broker, tmp_path):
    total = 4000
    run_killed_child(
        tmp_path,
        f"""
        broker = await open_broker(directory, BrokerConfig(), flush_mode="SYNC_FLUSH")
        broker.create_topic("t", queue_nums=1)
        sent = []
        # Killed while the timer moves them, once every send is acknowledged: the sends take about a second here,
        # and a loaded machine took longer than the time to their due moment, which is why it is 4 s away.
        kill_when(lambda: sent and 0 < broker.store.max_offset("t", 0) < {total})
        producer = Producer(broker)
        due = str(broker.clock.now_ms() + 4000)
        for n in range({total}):
            await producer.send("t", b"m%d" % n, properties={{"TIMER_DELIVER_MS": due}})
        sent.append(True)
        """,
    )
    broker = await make_broker(tmp_path)
    assert broker.store.recovery.clean is False
    await eventually(lambda: broker.max_offset("t", 0) >= total, timeout=60)
    await asyncio.sleep(1.5)  # anything moved twice would show up now
    bodies = [m.body for m in await everything_in(broker, "t")]
    assert len(bodies) == total and set(bodies) == {b"m%d" % n for n in range(total)}
