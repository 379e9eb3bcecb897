"""The broker's counters (core/traffic.py): messages and bytes in and out per topic, store refusals by reason; and
what the store tells of itself for a report (flush times, disk usage, committed offsets)."""

import pytest

from core import Message, PayloadTooLargeError, PopService, Producer, PullStatus
from core.traffic import refusal_reason


async def test_sends_count_in_and_pulls_and_pops_count_out_per_topic(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", 1)
    broker.create_topic("audit", 1)
    producer = Producer(broker)
    for number in range(10):
        await producer.send("orders", b"x" * number)  # 0 + 1 + ... + 9 = 45 bytes
    await broker.send_batch([Message(topic="audit", body=b"abc") for _ in range(5)])
    await broker.wait_visible()
    counts = broker.traffic.snapshot()
    assert (counts["orders"].messages_in, counts["orders"].bytes_in) == (10, 45)
    assert (counts["audit"].messages_in, counts["audit"].bytes_in) == (5, 15)
    assert counts["orders"].messages_out == counts["audit"].messages_out == 0

    got = await broker.pull("readers", "orders", 0, 0, max_count=4)
    assert got.status is PullStatus.FOUND and len(got.messages) == 4
    popped = await PopService.of(broker).pop("poppers", "audit", 32, 30_000)
    assert len(popped) == 5
    counts = broker.traffic.snapshot()
    assert (counts["orders"].messages_out, counts["orders"].bytes_out) == (4, 0 + 1 + 2 + 3)
    assert (counts["audit"].messages_out, counts["audit"].bytes_out) == (5, 15)


async def test_reads_of_a_light_queue_are_not_counted(make_broker):
    broker = await make_broker()
    await broker.send(Message(topic="sensors", body=b"one", light_queues=["%LMQ%mine"]))
    await broker.wait_visible()
    got = await broker.pull("session", "%LMQ%mine", 0, 0)
    assert len(got.messages) == 1
    counts = broker.traffic.snapshot()
    assert "%LMQ%mine" not in counts
    assert counts["sensors"].messages_in == 1 and counts["sensors"].messages_out == 0


async def test_a_message_the_store_refuses_is_counted_by_reason_and_not_as_in(make_broker):
    broker = await make_broker(max_message_size=4096)
    with pytest.raises(PayloadTooLargeError):
        await broker.send(Message(topic="big", body=b"x" * 10_000))
    with pytest.raises(PayloadTooLargeError):
        await broker.send_batch([Message(topic="big", body=b"x" * 10_000), Message(topic="big", body=b"y")])
    assert broker.traffic.refused == {"message_too_large": 3}
    assert broker.traffic.snapshot().get("big") is None or broker.traffic.snapshot()["big"].messages_in == 0


def test_refusal_reasons_are_the_store_errors_in_snake_case():
    from core.store.errors import InvalidTopicError, StoreNotWritableError

    assert refusal_reason(StoreNotWritableError("full")) == "store_not_writable"
    assert refusal_reason(InvalidTopicError("bad")) == "invalid_topic"


async def test_flush_times_disk_usage_and_committed_offsets_are_readable(make_broker):
    broker = await make_broker()
    await broker.send(Message(topic="t", body=b"z" * 5000))
    broker.store.flush()
    counts, total_s = broker.store.flush_times.snapshot()
    assert sum(counts) >= 1 and total_s > 0
    assert len(counts) == len(broker.store.flush_times.bounds) + 1
    await broker.wait_visible()
    usage = broker.store.disk_usage()
    assert set(usage) == {"commitlog", "consumequeue", "index", "write_ring"}
    assert usage["commitlog"] >= 4096 and usage["consumequeue"] > 0
    assert usage["write_ring"] >= broker.store.config.write_ring_size
    assert 0 < broker.store.disk_usage_ratio() < 1
    broker.commit_offset("g", "t", 2, 7)
    broker.commit_offset("a", "t", 0, 1)
    assert [row for row in broker.committed_offsets() if row[1] == "t"] == [("a", "t", 0, 1), ("g", "t", 2, 7)]
