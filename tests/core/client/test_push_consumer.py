import asyncio
import collections
from dataclasses import replace

import pytest

from core.broker import BrokerConfig
from core.client import ConsumeFromWhere, MessageModel, Producer
from core.client.push_consumer import (
    ConsumeOrderlyStatus,
    ConsumeStatus,
    PushConsumer,
    PushConsumerOptions,
)
from core.clock import ManualClock
from core.filter import FilterExpressionError

FAST = PushConsumerOptions(
    consume_from=ConsumeFromWhere.FIRST_OFFSET,
    heartbeat_interval_s=0.05,
    rebalance_interval_s=0.1,
    lock_renew_interval_s=0.1,
    retry_delay_s=0.05,
    suspend_time_ms=20,
    long_poll_ms=200,
)
LIVELY = BrokerConfig(consumer_expire_s=0.4, consumer_scan_interval_s=0.05, queue_lock_expire_s=0.4)


async def eventually(condition, timeout=20.0, what="condition"):
    """Wait for a condition of the system under test (not a speed check: the bound only stops a hung test)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def recorder(seen, tag):
    async def listener(messages, context):
        for message in messages:
            seen.append((tag, message.queue_id, message.queue_offset, message.body))
        return ConsumeStatus.CONSUME_SUCCESS

    return listener


async def test_clustering_delivers_each_message_to_one_member(make_broker):
    broker = await make_broker()
    broker.create_topic("c", queue_nums=4)
    seen: list = []
    consumers = [PushConsumer(broker, "g", recorder(seen, k), options=FAST) for k in range(2)]
    for consumer in consumers:
        consumer.subscribe("c")
        await consumer.start()
    # Four queues of "c" between two members (the group's retry topic, %RETRY%g, is shared out too).
    await eventually(lambda: all(sum(q.topic == "c" for q in c.process_queues) == 2 for c in consumers))
    producer = Producer(broker)
    for n in range(400):
        await producer.send("c", b"%d" % n)
    await eventually(lambda: len({s[3] for s in seen}) == 400)
    for consumer in consumers:
        await consumer.shutdown()
    assert {int(s[3]) for s in seen} == set(range(400))
    owners = collections.defaultdict(set)
    for tag, queue_id, _, _ in seen:
        owners[queue_id].add(tag)
    assert all(len(tags) == 1 for tags in owners.values())  # steady membership: one owner per queue
    assert [broker.query_offset("g", "c", q) for q in range(4)] == [100, 100, 100, 100]


async def test_broadcasting_delivers_every_message_to_every_member(make_broker):
    broker = await make_broker()
    broker.create_topic("b", queue_nums=2)
    seen: list = []
    broadcast = PushConsumerOptions(
        message_model=MessageModel.BROADCASTING,
        consume_from=ConsumeFromWhere.FIRST_OFFSET,
        heartbeat_interval_s=0.05,
        rebalance_interval_s=0.1,
        long_poll_ms=200,
    )
    # One process, three members: each its own instance name, so each its own offsets file.
    consumers = [
        PushConsumer(broker, "bg", recorder(seen, k), options=replace(broadcast, instance_name=f"member-{k}"))
        for k in range(3)
    ]
    for consumer in consumers:
        consumer.subscribe("b")
        await consumer.start()
    producer = Producer(broker)
    for n in range(50):
        await producer.send("b", b"%d" % n)
    await eventually(lambda: len(seen) == 150)
    for consumer in consumers:
        await consumer.shutdown()
    for k in range(3):
        assert sorted(int(s[3]) for s in seen if s[0] == k) == list(range(50))
    assert broker.query_offset("bg", "b", 0) == -1  # broadcasting offsets stay with the clients


async def test_reconsume_later_sends_back_through_the_retry_topic_and_the_offset_moves_on(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    broker.create_topic("r", queue_nums=1)
    attempts: dict[bytes, list[int]] = collections.defaultdict(list)
    topics: dict[bytes, set[str]] = collections.defaultdict(set)

    async def flaky(messages, context):
        message = messages[0]
        attempts[message.body].append(message.reconsume_times)
        topics[message.body].add(message.topic)
        if message.body == b"poison" and len(attempts[message.body]) < 3:
            return ConsumeStatus.RECONSUME_LATER
        if message.body == b"boom" and len(attempts[message.body]) < 2:
            raise RuntimeError("listener bug")
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(broker, "rg", flaky, options=FAST)
    consumer.subscribe("r")
    await consumer.start()
    producer = Producer(broker)
    for body in (b"a", b"poison", b"b", b"boom", b"c"):
        await producer.send("r", body)
    # Failed messages were sent back: the group's offset in "r" is not held back by them.
    await eventually(lambda: broker.query_offset("rg", "r", 0) == 5)
    assert attempts[b"poison"] == [0] and attempts[b"boom"] == [0]
    clock.advance(10)  # delay level 3 (10 s) for a first retry
    await eventually(lambda: len(attempts[b"poison"]) == 2 and len(attempts[b"boom"]) == 2)
    clock.advance(29)  # the second retry waits level 4 (30 s)
    await asyncio.sleep(0.3)
    assert len(attempts[b"poison"]) == 2
    clock.advance(1)
    await eventually(lambda: len(attempts[b"poison"]) == 3)
    await eventually(lambda: broker.query_offset("rg", "%RETRY%rg", 0) == 3)
    await consumer.shutdown()
    assert attempts[b"poison"] == [0, 1, 2]
    assert attempts[b"boom"] == [0, 1]
    assert attempts[b"a"] == [0] and attempts[b"c"] == [0]
    assert topics[b"poison"] == {"r"}  # retried messages are seen under their own topic


async def test_members_dying_lose_nothing_and_commits_never_pass_unconsumed(make_broker):
    broker = await make_broker(config=LIVELY)
    broker.create_topic("d", queue_nums=6)
    consumed: set[int] = set()
    commits_ok = []

    def listener_for(k):
        async def listener(messages, context):
            for message in messages:
                consumed.add(int(message.body))
            await asyncio.sleep(0.001)
            return ConsumeStatus.CONSUME_SUCCESS

        return listener

    consumers = [PushConsumer(broker, "dg", listener_for(k), options=FAST) for k in range(3)]
    for consumer in consumers:
        consumer.subscribe("d")
        await consumer.start()
    producer = Producer(broker)
    total = 3000
    for n in range(total):
        await producer.send("d", b"%d" % n, sharding_key=str(n))
        if n % 20 == 0:
            await asyncio.sleep(0.001)
        if n == 1000:
            consumers[0]._kill()  # a member crashes: no final commit, no goodbye
        if n == 2000:
            consumers[1]._kill()
        if n % 200 == 0:
            # No committed offset may pass a message nobody has consumed.
            await broker.store.wait_visible()
            for q in range(6):
                committed = broker.query_offset("dg", "d", q)
                got = broker.store.get_messages("d", q, 0, max(committed, 0))
                commits_ok.append(all(int(m.body) in consumed for m in got.messages))
    await eventually(lambda: len(consumed) == total, timeout=60)
    assert consumed == set(range(total))
    assert all(commits_ok)
    assert broker.consumers.client_ids("dg") == [consumers[2].client_id]
    await consumers[2].shutdown()


async def test_orderly_consumption_keeps_order_per_key_while_members_come_and_go(make_broker):
    broker = await make_broker(config=LIVELY)
    broker.create_topic("o", queue_nums=4)
    delivered: dict[str, list[int]] = collections.defaultdict(list)
    suspended = set()

    async def orderly(messages, context):
        for message in messages:
            key, n = message.body.decode().split(":")
            if int(n) % 997 == 5 and message.body not in suspended:
                suspended.add(message.body)
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            delivered[key].append(int(n))
        return ConsumeOrderlyStatus.SUCCESS

    def new_consumer():
        consumer = PushConsumer(broker, "og", orderly, orderly=True, options=FAST)
        consumer.subscribe("o")
        return consumer

    members = [new_consumer()]
    await members[0].start()
    producer = Producer(broker)
    total = 10_000
    for n in range(total):
        key = f"k{n % 8}"
        await producer.send("o", f"{key}:{n // 8}".encode(), sharding_key=key)
        if n % 20 == 0:
            await asyncio.sleep(0.001)  # let consumers run while messages keep coming (sends never block here)
        if n in (2000, 4000):
            member = new_consumer()
            await member.start()
            members.append(member)
        if n == 6000:
            await members.pop(0).shutdown()
    await eventually(lambda: sum(len(v) for v in delivered.values()) >= total, timeout=120)
    for member in members:
        await member.shutdown()
    assert sorted(delivered) == [f"k{i}" for i in range(8)]
    for key, numbers in delivered.items():
        assert numbers == list(range(total // 8)), f"{key}: order broken or messages lost or repeated"
    assert suspended  # the suspend path ran


async def test_malformed_subscription_is_refused_at_subscribe_time(make_broker):
    broker = await make_broker()  # a real one: the compiled PushConsumer checks its broker's type
    consumer = PushConsumer(broker=broker, group="g", listener=recorder([], 0))
    with pytest.raises(FilterExpressionError) as error:
        consumer.subscribe("t", "a > AND b = 1", "SQL92")
    assert error.value.position == 4


@pytest.mark.slow
async def test_backlog_with_a_slow_consumer_keeps_memory_bounded(make_broker):
    broker = await make_broker(segment_size=64 * 1024 * 1024)
    broker.create_topic("backlog", queue_nums=4)
    producer = Producer(broker)
    body = b"x" * 100
    total = 200_000
    for start in range(0, total, 1000):
        await producer.send_batch(
            "backlog", [body] * 1000, selector=lambda qs, m, a: qs[a], selector_arg=(start // 1000) % 4
        )
    consumed = 0
    peak = 0
    done: set[tuple[int, int]] = set()

    async def slow(messages, context):
        nonlocal consumed
        await asyncio.sleep(0.0005)
        consumed += len(messages)
        done.update((m.queue_id, m.queue_offset) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    options = PushConsumerOptions(
        consume_from=ConsumeFromWhere.FIRST_OFFSET,
        consume_thread_min=4,
        consume_thread_max=4,
        pull_threshold_for_queue=1000,
        heartbeat_interval_s=0.5,
        rebalance_interval_s=1,
        long_poll_ms=200,
    )
    consumer = PushConsumer(broker, "slow", slow, options=options)
    consumer.subscribe("backlog")
    await consumer.start()
    async with asyncio.timeout(600):
        while consumed < 20_000:
            peak = max(peak, sum(pq.count for pq in consumer.process_queues.values()))
            await asyncio.sleep(0.01)
    await consumer.shutdown()
    # Each queue holds at most its threshold plus one pull batch, whatever the backlog.
    assert 0 < peak <= 4 * (1000 + options.pull_batch_size)
    committed = [broker.query_offset("slow", "backlog", q) for q in range(4)]
    # Progress was committed, and never past a message that was not consumed (workers finish pulls out of order,
    # so some consumed messages sit above the committed offset: they would be delivered again).
    assert sum(committed) > 10_000
    assert all((q, offset) in done for q in range(4) for offset in range(committed[q]))


async def test_consume_workers_grow_from_min_to_max_under_load(make_broker):
    broker = await make_broker()
    broker.create_topic("w", queue_nums=4)
    release = asyncio.Event()
    busy = 0
    peak = 0

    async def blocked(messages, context):
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        await release.wait()
        busy -= 1
        return ConsumeStatus.CONSUME_SUCCESS

    options = PushConsumerOptions(
        consume_from=ConsumeFromWhere.FIRST_OFFSET,
        consume_thread_min=2,
        consume_thread_max=6,
        pull_batch_size=1,
        long_poll_ms=100,
    )
    consumer = PushConsumer(broker, "wg", blocked, options=options)
    consumer.subscribe("w")
    producer = Producer(broker)
    for n in range(40):
        await producer.send("w", b"%d" % n)
    await consumer.start()
    await eventually(lambda: peak == 6)
    await asyncio.sleep(0.1)
    assert peak == 6  # never more than consume_thread_max listeners at once
    release.set()
    await eventually(lambda: sum(broker.query_offset("wg", "w", q) for q in range(4)) == 40)
    await consumer.shutdown()


async def test_a_consumer_at_its_threshold_pulls_again_as_it_consumes(make_broker):
    # A queue threshold of 2 messages and pulls of 2: the pull loop is at its limit after every pull and goes on
    # only as the listener makes room. Every message arrives once, and the queue never holds more than the limit
    # and one pull.
    broker = await make_broker()
    broker.create_topic("tight", queue_nums=1)
    producer = Producer(broker)
    for n in range(300):
        await producer.send("tight", str(n).encode())
    seen: list[int] = []
    peak = 0
    consumer: PushConsumer | None = None

    async def listener(messages, context):
        nonlocal peak
        assert consumer is not None
        peak = max(peak, max(pq.count for pq in consumer.process_queues.values()))
        await asyncio.sleep(0)
        seen.extend(int(m.body) for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    options = replace(FAST, pull_threshold_for_queue=2, pull_batch_size=2, consume_thread_min=2, consume_thread_max=2)
    consumer = PushConsumer(broker, "tight", listener, options=options)
    consumer.subscribe("tight")
    await consumer.start()
    await eventually(lambda: len(seen) >= 300, what="all 300 consumed")
    await consumer.shutdown()
    assert sorted(seen) == list(range(300))
    assert 0 < peak <= 2 + 2
