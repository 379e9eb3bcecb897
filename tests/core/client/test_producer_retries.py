"""Producer send timeouts and retries against a store that really refuses writes, then takes them again
(tests/core/refusing_store.py). What was refused is retried and stored once; bad input is never retried; a send
that runs out of time says so."""

import asyncio
import logging
import time

import pytest

from core import (
    IllegalMessageError,
    LocalTransactionState,
    Producer,
    PullStatus,
    RequestTimeoutError,
    SendStatus,
    ServiceNotAvailableError,
    TransactionProducer,
)
from core.store.config import FlushMode
from core.system_topics import PROPERTY_REAL_TOPIC, TRANS_HALF_TOPIC

from ..refusing_store import refusing_broker


@pytest.fixture
async def refusing(tmp_path):
    async with refusing_broker(tmp_path) as (broker, disk):
        yield broker, disk


async def stored_in(broker, topic):
    await broker.wait_visible()
    found = []
    for queue in range(broker.topic_config(topic).read_queue_nums):
        got = await broker.pull("audit", topic, queue, 0, max_count=256)
        if got.status is PullStatus.FOUND:
            found += got.messages
    return found


async def until_logged(caplog, text: str) -> None:
    for _ in range(500):
        if any(text in record.getMessage() for record in caplog.records):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nothing logged with {text!r}")


async def test_a_refused_send_is_retried_until_the_store_takes_it_and_is_stored_once(refusing, caplog):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill()
    producer = Producer(broker, retry_times_when_send_failed=50, send_msg_timeout_ms=20_000)
    with caplog.at_level(logging.WARNING, logger="core.client.send_retry"):
        sending = asyncio.ensure_future(producer.send("r", b"once", keys="k-1"))
        await until_logged(caplog, "attempt 2 of 51 refused")
        assert not sending.done()
        await disk.empty()
        result = await sending
    assert result.status is SendStatus.SEND_OK
    [message] = await stored_in(broker, "r")
    assert (message.body, message.keys, message.unique_id) == (b"once", ["k-1"], result.msg_id)
    retries = [r.getMessage() for r in caplog.records if r.name == "core.client.send_retry"]
    assert len(retries) >= 2 and all(f"message {result.msg_id}: attempt" in text for text in retries)


async def test_a_refused_send_to_light_queues_reaches_them_once(refusing, caplog):
    # The first attempt names the light queue in the message's properties before the store refuses it; the retry
    # sends the message as it was before that attempt, and the message lands in the light queue once.
    broker, disk = refusing
    broker.create_topic("lq", queue_nums=1)
    broker.add_send_hook(lambda message: ["%LMQ%audit"] if message.topic == "lq" else None)
    await disk.fill()
    producer = Producer(broker, retry_times_when_send_failed=50, send_msg_timeout_ms=20_000)
    with caplog.at_level(logging.WARNING, logger="core.client.send_retry"):
        sending = asyncio.ensure_future(producer.send("lq", b"one"))
        await until_logged(caplog, "attempt 2 of 51 refused")
        await disk.empty()
        result = await sending
    [message] = await stored_in(broker, "lq")
    assert message.light_queues == ["%LMQ%audit"] and message.unique_id == result.msg_id
    got = await broker.pull("audit", "%LMQ%audit", 0, 0, max_count=16)
    assert [m.unique_id for m in got.messages] == [result.msg_id]


async def test_a_send_the_store_never_takes_runs_out_of_time(refusing):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill()
    producer = Producer(broker, retry_times_when_send_failed=1000, send_msg_timeout_ms=300)
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(RequestTimeoutError, match=r"send_msg_timeout_ms 300 ran out after .* no attempt stored it"):
        await producer.send("r", b"never")
    assert 0.3 <= loop.time() - began < 5
    # With RocketMQ's 2 retries the refusals run out first: the store's error, after 3 attempts.
    with pytest.raises(ServiceNotAvailableError, match=r"refused 3 times, the last time: .*disk_refuse_ratio") as out:
        await Producer(broker).send("r", b"never either")
    # The last refusal is the cause, in the compiled module too (mypyc ignores `raise ... from`).
    assert isinstance(out.value.__cause__, ServiceNotAvailableError) and "disk_refuse_ratio" in str(out.value.__cause__)
    await disk.empty()
    assert await stored_in(broker, "r") == []


async def test_bad_input_is_not_retried(refusing, caplog):
    broker, _ = refusing
    producer = Producer(broker, retry_times_when_send_failed=5)
    with (
        caplog.at_level(logging.WARNING, logger="core.client.send_retry"),
        pytest.raises(IllegalMessageError, match="delay level '99' does not exist"),
    ):
        await producer.send("r", b"bad", properties={"DELAY": "99"})
    assert not [r for r in caplog.records if r.name == "core.client.send_retry"]


async def test_a_refused_half_message_is_retried_as_sent_and_parked_once(refusing):
    # The broker rewrites a half message in place when it parks it: a retry must send the message as it was.
    broker, disk = refusing
    broker.create_topic("orders", queue_nums=1)
    producer = TransactionProducer(
        broker, "pg", lambda message: LocalTransactionState.COMMIT_MESSAGE, retry_times_when_send_failed=50
    )
    await producer.start()
    await disk.fill()
    sending = asyncio.ensure_future(
        producer.send_message_in_transaction("orders", b"t", lambda m, a: LocalTransactionState.COMMIT_MESSAGE)
    )
    await asyncio.sleep(0.1)
    await disk.empty()
    result = await sending
    assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    [half] = await stored_in(broker, TRANS_HALF_TOPIC)
    assert half.properties[PROPERTY_REAL_TOPIC] == "orders"
    [message] = await stored_in(broker, "orders")
    assert message.body == b"t" and message.unique_id == result.msg_id
    await producer.shutdown()


async def test_async_sends_retry_and_oneway_sends_do_not(refusing, caplog):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill()
    heard = []
    producer = Producer(broker, retry_times_when_send_failed=0, retry_times_when_send_async_failed=3)
    with caplog.at_level(logging.WARNING):
        await asyncio.gather(
            producer.send_async("r", b"a", callback=lambda result, error: heard.append(error)), return_exceptions=True
        )
        producer.send_oneway("r", b"o")
        await producer.shutdown()
    [error] = heard
    assert isinstance(error, ServiceNotAvailableError) and "refused 4 times" in str(error)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("attempt" in text and "refused" in text for text in messages) == 3
    assert sum(text.startswith("oneway send failed") for text in messages) == 1
    with pytest.raises(ServiceNotAvailableError, match="refused once, the last time"):
        await producer.send("r", b"s")


async def test_retry_settings_out_of_range_are_refused(make_broker):
    broker = await make_broker()  # a real one: the compiled Producer checks its broker's type
    with pytest.raises(ValueError, match="send_msg_timeout_ms must be"):
        Producer(broker, send_msg_timeout_ms=0)
    with pytest.raises(ValueError, match="retry times must be"):
        Producer(broker, retry_times_when_send_async_failed=-1)


async def test_an_attempt_cut_off_by_the_timeout_may_have_stored_the_message(make_broker):
    # A send hook that takes longer than the whole timeout stands for a slow broker: the attempt is cut off while
    # it waits for the disk, after its record was appended, so the error cannot say "not stored".
    broker = await make_broker(flush_mode=FlushMode.SYNC_FLUSH)
    broker.create_topic("slow", queue_nums=1)
    broker.add_send_hook(lambda message: time.sleep(0.2) if message.topic == "slow" else None)
    producer = Producer(broker, send_msg_timeout_ms=100)
    with pytest.raises(RequestTimeoutError, match=r"attempt 1 of 3 was cut off .* may or may not have been stored"):
        await producer.send("slow", b"maybe")
    assert [m.body for m in await stored_in(broker, "slow")] == [b"maybe"]


def test_each_attempt_sends_a_copy_of_every_field_with_properties_of_its_own():
    # Built field by field for speed: a field added to Message and not copied would be lost on every send.
    from dataclasses import fields

    from core.client.producer import _fresh_copy
    from core.store.message import Message

    values = {"topic": "t", "body": b"b", "queue_id": 3, "properties": {"a": "1"}, "flag": 4, "sys_flag": 5,
              "born_timestamp": 6, "born_host": ("10.0.0.1", 7), "reconsume_times": 8,
              "prepared_transaction_offset": 9, "light_queues": ("%LMQ%x",)}  # fmt: skip
    assert set(values) == {field.name for field in fields(Message)}
    original = Message(**values)
    copy = _fresh_copy(original, original.properties)
    assert copy == original and copy.properties is not original.properties
    before = {"a": "0"}
    copy = _fresh_copy(original, before)  # a retry: the properties as they were before the failed attempt
    assert copy.properties == before and copy.properties is not before


async def test_only_a_broker_that_waits_for_the_disk_has_sends_that_may_wait(make_broker, tmp_path):
    # Producers arm a send timer only for a broker whose sends may suspend: the others answer at once.
    assert not (await make_broker(tmp_path / "a", flush_mode=FlushMode.ASYNC_FLUSH)).sends_may_wait
    assert (await make_broker(tmp_path / "s", flush_mode=FlushMode.SYNC_FLUSH)).sends_may_wait
