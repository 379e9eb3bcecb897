"""Retry and dead-letter topics (core/retries/send_back.py and the consumers that use it): a failed message goes to
%RETRY%<group> after 10 s, 30 s, 1 m ... 2 h, then to %DLQ%<group>; orderly consumption retries in place and then
dead-letters; pop sends messages not acked in time back; a crash while retries wait loses and repeats nothing."""

import asyncio
import collections

from core import (
    BrokerConfig,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    MessageModel,
    Producer,
    PushConsumer,
    PushConsumerOptions,
    SimpleConsumer,
)
from core.clock import ManualClock
from core.pop.service import PopService
from core.retries.send_back import send_back
from core.tables.subscription_group import SubscriptionGroupConfig
from core.tables.topic_config import MessageType
from tests.core.child_broker import run_killed_child
from tests.core.reading import eventually, everything_in

FAST = PushConsumerOptions(
    consume_from=ConsumeFromWhere.FIRST_OFFSET,
    heartbeat_interval_s=0.05,
    rebalance_interval_s=0.1,
    lock_renew_interval_s=0.1,
    suspend_time_ms=10,
    long_poll_ms=200,
)
# Delay levels 3 to 18, the waits of retries 1 to 16 (RocketMQ's defaults).
RETRY_WAITS_S = [10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]


async def test_a_failing_message_is_retried_after_growing_delays_then_dead_lettered_then_resent(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    broker.create_topic("orders", queue_nums=1)
    deliveries = []

    async def always_fails(messages, context):  # until it comes back from the dead-letter topic
        deliveries.extend((m.topic, m.reconsume_times, m.body) for m in messages)
        return ConsumeStatus.RECONSUME_LATER if len(deliveries) <= 17 else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(broker, "billing", always_fails, options=FAST)
    consumer.subscribe("orders")
    await consumer.start()
    sent = await Producer(broker).send("orders", b"poison", tags="T", keys=["k"], properties={"p": "1"})
    await eventually(lambda: len(deliveries) == 1)
    for retry, wait in enumerate(RETRY_WAITS_S, 1):
        clock.advance(wait - 0.5)
        await asyncio.sleep(0.05)
        assert len(deliveries) == retry, f"retry {retry} came before {wait} s"
        clock.advance(0.5)
        await eventually(lambda r=retry: len(deliveries) == r + 1)
    await eventually(lambda: broker.max_offset("%DLQ%billing", 0) == 1)
    clock.advance(3 * 3600)
    await asyncio.sleep(0.1)
    assert deliveries == [("orders", n, b"poison") for n in range(17)]  # 1 + maxReconsumeTimes (16)
    # Resent from the dead-letter topic: the group gets it once more, under its topic, counted afresh.
    summary = await broker.dead_letters.resend_all("billing")
    assert [outcome.unique_id for outcome in summary.resent] == [sent.msg_id]
    await eventually(lambda: len(deliveries) == 18)
    assert deliveries[17] == ("orders", 0, b"poison")
    assert (await broker.dead_letters.resend_all("billing")).resent == []
    await asyncio.sleep(0.1)
    await consumer.shutdown()
    assert len(deliveries) == 18
    [dead] = await everything_in(broker, "%DLQ%billing")
    assert (dead.body, dead.tags, dead.keys, dead.properties["p"]) == (b"poison", "T", ["k"], "1")
    assert dead.unique_id == sent.msg_id and dead.reconsume_times == 17
    assert dead.properties["RETRY_TOPIC"] == "orders"
    assert dead.properties["ORIGIN_MESSAGE_ID"] == sent.offset_msg_id
    assert "16" in dead.properties["DLQ_ORIGIN_REASON"] or "17" in dead.properties["DLQ_ORIGIN_REASON"]
    assert broker.query_offset("billing", "orders", 0) == 1  # the original no longer holds the group back


async def test_the_listener_chooses_the_level_or_the_dead_letter_topic(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    broker.create_topic("t", queue_nums=1)
    seen = collections.Counter()

    async def listener(messages, context):
        message = messages[0]
        seen[message.body] += 1
        if seen[message.body] > 1:
            return ConsumeStatus.CONSUME_SUCCESS
        context.delay_level_when_next_consume = 1 if message.body == b"soon" else -1
        return ConsumeStatus.RECONSUME_LATER

    consumer = PushConsumer(broker, "g", listener, options=FAST)
    consumer.subscribe("t")
    await consumer.start()
    producer = Producer(broker)
    await producer.send("t", b"soon")
    await producer.send("t", b"dead")
    await eventually(lambda: broker.max_offset("%DLQ%g", 0) == 1 and seen[b"soon"] == 1)
    clock.advance(1)  # level 1
    await eventually(lambda: seen[b"soon"] == 2)
    await consumer.shutdown()
    assert [m.body for m in await everything_in(broker, "%DLQ%g")] == [b"dead"]
    assert seen[b"dead"] == 1


async def test_orderly_consumption_retries_in_place_then_dead_letters_and_moves_on(make_broker):
    broker = await make_broker()
    broker.create_topic("o", queue_nums=1)
    delivered = []

    async def listener(messages, context):
        message = messages[0]
        delivered.append((message.body, message.reconsume_times))
        if message.body == b"poison":
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(broker, "og", listener, orderly=True, options=FAST)
    consumer.subscribe("o")
    broker.groups.create_or_update(SubscriptionGroupConfig("og", retry_max_times=3))
    await consumer.start()
    producer = Producer(broker)
    for body in (b"a", b"poison", b"b", b"c"):
        await producer.send("o", body, sharding_key="one")
    await eventually(lambda: [b for b, _ in delivered][-2:] == [b"b", b"c"])
    await consumer.shutdown()
    assert delivered == [(b"a", 0)] + [(b"poison", n) for n in range(4)] + [(b"b", 0), (b"c", 0)]
    [dead] = await everything_in(broker, "%DLQ%og")
    assert dead.body == b"poison" and dead.properties["RETRY_TOPIC"] == "o"
    assert broker.query_offset("og", "o", 0) == 4


async def test_a_popped_message_not_acked_comes_back_from_the_retry_topic_then_is_dead_lettered(make_broker):
    broker = await make_broker()
    broker.create_topic("p", queue_nums=2)
    broker.groups.create_or_update(SubscriptionGroupConfig("pg", retry_max_times=2))
    now = [1000.0]
    consumer = SimpleConsumer(
        broker, "pg", {"p": "*"}, await_duration_s=0, pop_service=PopService(broker, lambda: now[0])
    )
    await Producer(broker).send("p", b"x", keys=["k"])
    await broker.wait_visible()
    attempts = []
    for _ in range(3):
        [view] = await consumer.receive(1, 10)
        attempts.append((view.topic, view.delivery_attempt, view.message.reconsume_times))
        now[0] += 10
    assert attempts == [("p", 1, 0), ("p", 2, 1), ("p", 3, 2)]
    assert await consumer.receive(1, 10) == []  # the third delivery was the last: dead-lettered
    [dead] = await everything_in(broker, "%DLQ%pg")
    assert (dead.body, dead.keys, dead.properties["RETRY_TOPIC"]) == (b"x", ["k"], "p")
    assert broker.query_offset("pg", "p", 0) + broker.query_offset("pg", "p", 1) == 1


async def test_a_fifo_popped_message_comes_back_in_place_then_is_dead_lettered(make_broker):
    broker = await make_broker()
    broker.create_topic("f", queue_nums=1, message_type=MessageType.FIFO)
    broker.groups.create_or_update(SubscriptionGroupConfig("fg", retry_max_times=1))
    now = [1000.0]
    consumer = SimpleConsumer(
        broker, "fg", {"f": "*"}, await_duration_s=0, pop_service=PopService(broker, lambda: now[0])
    )
    producer = Producer(broker)
    await producer.send("f", b"first", sharding_key="g1")
    await producer.send("f", b"second", sharding_key="g1")
    await broker.wait_visible()
    [one] = await consumer.receive(2, 10)  # the group's second waits for the first
    now[0] += 10
    [two] = await consumer.receive(2, 10)
    assert (one.body, two.body, two.delivery_attempt) == (b"first", b"first", 2)
    now[0] += 10
    [after] = await consumer.receive(2, 10)  # "first" went to the dead-letter topic; the group goes on in order
    assert after.body == b"second"
    assert [m.body for m in await everything_in(broker, "%DLQ%fg")] == [b"first"]
    assert broker.max_offset("%RETRY%fg", 0) == 0  # FIFO messages never wait in the retry topic


async def test_broadcasting_failures_are_dropped_as_rocketmq_does(make_broker):
    broker = await make_broker()
    broker.create_topic("b", queue_nums=1)
    calls = []

    async def fails(messages, context):
        calls.append(messages[0].body)
        return ConsumeStatus.RECONSUME_LATER

    options = PushConsumerOptions(
        message_model=MessageModel.BROADCASTING, consume_from=ConsumeFromWhere.FIRST_OFFSET, long_poll_ms=200
    )
    consumer = PushConsumer(broker, "bg", fails, options=options)
    consumer.subscribe("b")
    await consumer.start()
    await Producer(broker).send("b", b"x")
    await eventually(lambda: calls == [b"x"])
    await asyncio.sleep(0.3)
    await consumer.shutdown()
    assert calls == [b"x"] and not broker.has_topic("%RETRY%bg")


async def test_sigkill_while_retries_wait_loses_nothing_and_repeats_nothing(make_broker, tmp_path):
    total = 1500
    levels = "1s 1s 1s"  # every retry waits a second
    run_killed_child(
        tmp_path,
        f"""
        from core.retries.send_back import send_back
        broker = await open_broker(directory, BrokerConfig(message_delay_level="{levels}"))
        broker.create_topic("t", queue_nums=1)
        producer = Producer(broker)
        for n in range({total}):
            await producer.send("t", b"m%d" % n)
        await broker.wait_visible()
        kill_when(lambda: 0 < broker.store.max_offset("%RETRY%g", 0) < {total})
        offset = 0
        while offset < {total}:
            got = await broker.pull("g", "t", 0, offset, 100)
            for message in got.messages:
                await send_back(broker, message, "g")
            offset = got.next_begin_offset
        """,
    )
    broker = await make_broker(tmp_path, config=BrokerConfig(message_delay_level=levels))
    await eventually(lambda: broker.max_offset("%RETRY%g", 0) >= total, timeout=60)
    await asyncio.sleep(1.5)
    retried = await everything_in(broker, "%RETRY%g")
    assert sorted(m.body for m in retried) == sorted(b"m%d" % n for n in range(total))
    assert {m.reconsume_times for m in retried} == {1}
    # And the group's members consume them under their own topic.
    bodies = set()

    async def listener(messages, context):
        bodies.update((m.topic, m.body) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(broker, "g", listener, options=FAST)
    consumer.subscribe("t", "NONE_OF_THE_ORIGINALS")
    await consumer.start()
    await eventually(lambda: len(bodies) == total)
    await consumer.shutdown()
    assert bodies == {("t", b"m%d" % n) for n in range(total)}
    assert send_back  # the helper the child used is the public one


async def test_sigkill_after_an_orderly_dead_letter_keeps_order_and_does_not_repeat_it(make_broker, tmp_path):
    run_killed_child(
        tmp_path,
        """
        from core import ConsumeOrderlyStatus, ConsumeFromWhere, PushConsumer, PushConsumerOptions
        from core.tables.subscription_group import SubscriptionGroupConfig
        broker = await open_broker(directory, BrokerConfig(offset_persist_interval_s=0.02))
        broker.create_topic("o", queue_nums=1)
        broker.groups.create_or_update(SubscriptionGroupConfig("og", retry_max_times=3))
        offsets = directory / "config" / "consumerOffset.json"

        def dead_lettered_and_persisted():
            try:
                committed = json.loads(offsets.read_text())["offsetTable"].get("o@og", {}).get("0", 0)
            except (OSError, ValueError):
                return False
            return broker.store.max_offset("%DLQ%og", 0) == 1 and committed >= 2

        async def listener(messages, context):
            if messages[0].body == b"poison":
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            await asyncio.sleep(0.2)  # slow: the kill comes while later messages are being consumed
            return ConsumeOrderlyStatus.SUCCESS

        options = PushConsumerOptions(consume_from=ConsumeFromWhere.FIRST_OFFSET, suspend_time_ms=10, long_poll_ms=200)
        consumer = PushConsumer(broker, "og", listener, orderly=True, options=options)
        consumer.subscribe("o")
        producer = Producer(broker)
        for body in (b"a", b"poison", b"b", b"c", b"d"):
            await producer.send("o", body, sharding_key="one")
        kill_when(dead_lettered_and_persisted)
        await consumer.start()
        """,
    )
    broker = await make_broker(tmp_path)
    delivered = []

    async def listener(messages, context):
        delivered.extend(m.body for m in messages)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(broker, "og", listener, orderly=True, options=FAST)
    consumer.subscribe("o")
    await consumer.start()
    await eventually(lambda: delivered[-1:] == [b"d"])
    await consumer.shutdown()
    assert b"poison" not in delivered and b"a" not in delivered  # both settled before the crash
    assert delivered == [b"b", b"c", b"d"][-len(delivered) :]  # the rest in order, from the committed offset
    assert [m.body for m in await everything_in(broker, "%DLQ%og")] == [b"poison"]
