import asyncio
import json
import os
import time
import zlib

import pytest

from core import (
    BrokerConfig,
    ConsumeFromWhere,
    FilterExpressionError,
    IllegalMessageError,
    MessageModel,
    PayloadTooLargeError,
    Producer,
    PullConsumer,
    PullStatus,
    SendStatus,
    TopicNotFoundError,
)
from core.store.message_id import decode_offset_msg_id


async def test_send_then_pull_round_trip(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    result = await producer.send("orders", b"hello", tags="created", keys=["o-1", "shop-9"], properties={"a": "1"})
    assert result.status is SendStatus.SEND_OK
    assert len(result.msg_id) == 32
    await broker.store.wait_visible()  # consume queues and the index follow the log asynchronously
    assert (
        decode_offset_msg_id(result.offset_msg_id)[1]
        == broker.store.find_by_unique_id("orders", result.msg_id).commit_log_offset
    )
    consumer = PullConsumer(broker, "g1", consume_from=ConsumeFromWhere.FIRST_OFFSET)
    queue = result.message_queue
    got = await consumer.pull(queue, consumer.start_offset(queue), long_poll_ms=5000)
    assert got.status is PullStatus.FOUND
    [message] = got.messages
    assert (message.body, message.tags, message.keys, message.properties["a"]) == (
        b"hello",
        "created",
        ["o-1", "shop-9"],
        "1",
    )
    assert message.unique_id == result.msg_id
    assert got.next_begin_offset == 1


async def test_concurrent_first_sends_create_the_topic_once(make_broker, tmp_path):
    broker = await make_broker(config=BrokerConfig(default_queue_nums=6))
    producers = [Producer(broker) for _ in range(20)]
    version_before = broker.topics.data_version.counter
    results = await asyncio.gather(*(p.send("fresh", b"x%d" % n) for n, p in enumerate(producers * 10)))
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert broker.topics.data_version.counter == version_before + 1
    table = json.loads((tmp_path / "config" / "topics.json").read_text())["topicConfigTable"]
    assert table["fresh"]["writeQueueNums"] == 6 and table["fresh"]["readQueueNums"] == 6
    assert {r.message_queue.queue_id for r in results} == set(range(6))
    await broker.store.wait_visible()
    assert sum(broker.max_offset("fresh", q) for q in range(6)) == 200


async def test_auto_create_off_refuses_unknown_topics(make_broker):
    broker = await make_broker(config=BrokerConfig(auto_create_topic=False))
    with pytest.raises(TopicNotFoundError, match="does not exist"):
        await Producer(broker).send("typo", b"x")
    broker.create_topic("known", queue_nums=2)
    assert (await Producer(broker).send("known", b"x")).status is SendStatus.SEND_OK


async def test_sharding_key_keeps_each_key_in_one_queue_in_order(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    for n in range(400):
        await producer.send("fifo", b"%d" % n, sharding_key=f"key-{n % 8}")
    await broker.store.wait_visible()
    consumer = PullConsumer(broker, "g", consume_from=ConsumeFromWhere.FIRST_OFFSET)
    seen: dict[str, list[int]] = {}
    queues_of: dict[str, set[int]] = {}
    for queue in consumer.fetch_queues("fifo"):
        got = await consumer.pull(queue, 0, max_nums=1000)
        for message in got.messages:
            n = int(message.body)
            seen.setdefault(f"key-{n % 8}", []).append(n)
            queues_of.setdefault(f"key-{n % 8}", set()).add(queue.queue_id)
    assert all(len(q) == 1 for q in queues_of.values())
    assert all(numbers == sorted(numbers) and len(numbers) == 50 for numbers in seen.values())


async def test_selector_and_round_robin(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    picked = await producer.send("t", b"x", selector=lambda queues, message, arg: queues[arg], selector_arg=3)
    assert picked.message_queue.queue_id == 3
    spread = [(await producer.send("t", b"y")).message_queue.queue_id for _ in range(8)]
    assert sorted(spread) == [0, 0, 1, 1, 2, 2, 3, 3]


async def test_async_callback_and_oneway(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    outcomes = []
    task = producer.send_async("t", b"cb", callback=lambda result, error: outcomes.append((result, error)))
    result = await task
    await asyncio.sleep(0)
    assert outcomes == [(result, None)]
    producer.send_oneway("t", b"fire")
    await producer.shutdown()
    await broker.store.wait_visible()
    assert sum(broker.max_offset("t", q) for q in range(4)) == 2


async def test_batch_goes_to_one_queue_and_limits_hold(make_broker):
    broker = await make_broker()
    producer = Producer(broker)
    results = await producer.send_batch("t", [b"a", b"b", b"c"], sharding_key="k")
    assert len({r.message_queue for r in results}) == 1
    assert [r.queue_offset for r in results] == [0, 1, 2]
    with pytest.raises(PayloadTooLargeError, match="batch"):
        await producer.send_batch("t", [os.urandom(900_000) for _ in range(5)])  # incompressible
    with pytest.raises(IllegalMessageError, match="delayed"):
        await producer.send_batch("t", [b"x"], properties={"DELAY": "3"})


async def test_large_bodies_are_compressed_and_restored(make_broker):
    broker = await make_broker()
    body = b"sensor reading 21.5C " * 10_000  # 210 kB, compressible
    result = await Producer(broker).send("big", body)
    await broker.store.wait_visible()
    stored = broker.store.find_by_unique_id("big", result.msg_id)
    assert stored.body == zlib.compress(body, 5) and stored.sys_flag & 1
    consumer = PullConsumer(broker, "g", consume_from=ConsumeFromWhere.FIRST_OFFSET)
    got = await consumer.pull(result.message_queue, 0)
    assert got.messages[0].body == body


async def test_long_poll_wakes_on_the_next_message(make_broker):
    broker = await make_broker()
    broker.create_topic("lp", queue_nums=1)
    consumer = PullConsumer(broker, "g")
    queue = consumer.fetch_queues("lp")[0]
    # A pull that would wait a minute: only a wake-up on the new message lets it finish within the bound.
    waiting = asyncio.create_task(consumer.pull(queue, 0, long_poll_ms=60_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await Producer(broker).send("lp", b"wake")
    got = await asyncio.wait_for(waiting, timeout=10)
    assert got.status is PullStatus.FOUND and got.messages[0].body == b"wake"
    empty = await consumer.pull(queue, 1, long_poll_ms=100)
    assert empty.status is PullStatus.NO_NEW_MSG and empty.next_begin_offset == 1


async def test_tag_and_sql92_filters_run_in_the_broker(make_broker):
    broker = await make_broker()
    broker.create_topic("f", queue_nums=1)
    producer = Producer(broker)
    for n in range(30):
        await producer.send("f", b"%d" % n, tags=["red", "green", "blue"][n % 3], properties={"n": str(n)})
    await broker.store.wait_visible()
    consumer = PullConsumer(broker, "g")
    queue = consumer.fetch_queues("f")[0]
    red_or_blue = await consumer.pull(queue, 0, max_nums=100, expression="red || blue")
    assert [int(m.body) for m in red_or_blue.messages] == [n for n in range(30) if n % 3 != 1]
    sql = await consumer.pull(queue, 0, max_nums=100, expression="n > 20 AND TAGS = 'green'", expression_type="SQL92")
    assert [int(m.body) for m in sql.messages] == [22, 25, 28]
    none = await consumer.pull(queue, 0, expression="purple")
    assert none.status is PullStatus.NO_MATCHED_MSG and none.next_begin_offset == 30
    with pytest.raises(FilterExpressionError) as error:
        await consumer.pull(queue, 0, expression="n > AND x = 1", expression_type="SQL92")
    assert error.value.position == 4


async def test_offsets_consume_from_and_reset(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic("o", queue_nums=1)
    producer = Producer(broker)
    for n in range(5):
        await producer.send("o", b"early%d" % n)
    await asyncio.sleep(0.02)
    cut = int(time.time() * 1000)
    await asyncio.sleep(0.02)
    for n in range(3):
        await producer.send("o", b"late%d" % n)
    await broker.store.wait_visible()
    queue = broker.read_queues("o")[0]
    assert PullConsumer(broker, "new-last").start_offset(queue) == 8
    assert PullConsumer(broker, "new-first", consume_from=ConsumeFromWhere.FIRST_OFFSET).start_offset(queue) == 0
    by_time = PullConsumer(broker, "new-time", consume_from=ConsumeFromWhere.TIMESTAMP, consume_timestamp_ms=cut)
    assert by_time.start_offset(queue) == 5
    consumer = PullConsumer(broker, "g")
    consumer.commit(queue, 3)
    assert consumer.start_offset(queue) == 3
    assert broker.reset_offsets_to_time("g", "o", cut) == {0: 5}
    assert consumer.committed(queue) == 5


async def test_broadcasting_offsets_stay_with_each_client(make_broker):
    broker = await make_broker()
    broker.create_topic("b", queue_nums=1)
    queue = broker.read_queues("b")[0]
    one = PullConsumer(broker, "bc", message_model=MessageModel.BROADCASTING)
    two = PullConsumer(broker, "bc", message_model=MessageModel.BROADCASTING)
    one.commit(queue, 7)
    assert one.committed(queue) == 7 and two.committed(queue) == -1
    assert broker.query_offset("bc", "b", 0) == -1


async def test_queue_out_of_range_is_refused(make_broker):
    broker = await make_broker()
    broker.create_topic("q", queue_nums=2)
    producer = Producer(broker)
    with pytest.raises(ValueError, match="not a write queue"):
        await producer.send("q", b"x", selector=lambda queues, m, a: queues[0].__class__("q", "broker-a", 5))
