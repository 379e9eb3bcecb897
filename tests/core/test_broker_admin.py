"""Broker.admin on real stores: topic status and changes, groups, consumer progress and lag, live members, offset
resets by time (refused while push consumers would undo them), and Broker.queries.by_time_range."""

import asyncio
import time

import pytest

from core import (
    SCHEDULE_TOPIC,
    ConsumersOnlineError,
    ConsumeStatus,
    ConsumeType,
    GroupNotFoundError,
    IllegalArgumentError,
    Message,
    Perm,
    PullConsumer,
    PushConsumer,
    TopicConfigError,
    TopicNotFoundError,
    topic_kind,
)


async def test_topic_status_names_each_queues_offsets_and_last_store_time(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=2)
    before = time.time_ns() // 1_000_000
    for index in range(5):
        await broker.send(_message("orders", 1, index))
    await broker.wait_visible()
    status = broker.admin.topic_status("orders")
    assert [(q.queue_id, q.min_offset, q.max_offset) for q in status] == [(0, 0, 0), (1, 0, 5)]
    assert status[0].last_update_ms is None
    assert status[1].last_update_ms is not None and status[1].last_update_ms >= before
    with pytest.raises(TopicNotFoundError):
        broker.admin.topic_status("nope")


def _message(topic: str, queue_id: int, index: int) -> Message:
    return Message(topic=topic, body=f"m{index}".encode(), queue_id=queue_id)


async def test_update_topic_changes_only_what_is_given_and_delete_forgets_offsets(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=4)
    updated = broker.admin.update_topic("orders", write_queue_nums=2, perm=Perm.READ)
    assert (updated.read_queue_nums, updated.write_queue_nums, updated.perm) == (4, 2, Perm.READ)
    assert broker.topic_config("orders") == updated
    with pytest.raises(TopicConfigError, match="readQueueNums is 0"):
        broker.admin.update_topic("orders", read_queue_nums=0)
    if not broker.has_topic(SCHEDULE_TOPIC):
        broker.create_topic(SCHEDULE_TOPIC, queue_nums=1)
    with pytest.raises(TopicConfigError, match="broker's own topics"):
        broker.admin.delete_topic(SCHEDULE_TOPIC)
    broker.commit_offset("billing", "orders", 0, 3)
    broker.admin.delete_topic("orders")
    assert not broker.has_topic("orders")
    assert broker.query_offset("billing", "orders", 0) == -1
    with pytest.raises(TopicNotFoundError):
        broker.admin.delete_topic("orders")


def test_topic_kinds():
    assert [topic_kind(t) for t in ("orders", "%RETRY%g", "%DLQ%g", "%LMQ%q", "rmq_sys_wheel_timer")] == [
        "normal",
        "retry",
        "dlq",
        "light",
        "system",
    ]


async def test_consumer_progress_counts_lag_per_queue_and_the_last_consume_time(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=2)
    for index in range(10):
        await broker.send(_message("orders", index % 2, index))
    await broker.wait_visible()
    broker.admin.create_group("billing")
    progress = {(p.topic, p.queue_id): p for p in broker.admin.consumer_progress("billing")}
    assert progress == {}  # configured, but consumes nothing yet
    broker.commit_offset("billing", "orders", 0, 2)
    progress = {(p.topic, p.queue_id): p for p in broker.admin.consumer_progress("billing")}
    assert (progress["orders", 0].broker_offset, progress["orders", 0].consumer_offset, progress["orders", 0].lag) == (
        5,
        2,
        3,
    )
    assert progress["orders", 0].last_consume_ms is not None
    # No offset committed on queue 1: the whole queue is ahead of the group.
    assert (progress["orders", 1].consumer_offset, progress["orders", 1].lag) == (-1, 5)
    assert progress["orders", 1].last_consume_ms is None
    with pytest.raises(GroupNotFoundError):
        broker.admin.consumer_progress("nobody")


async def test_groups_list_configured_and_offset_holding_groups_and_delete_drops_both(make_broker):
    broker = await make_broker()
    broker.admin.create_group("configured", retry_max_times=3)
    broker.commit_offset("committed", "orders", 0, 1)
    assert {"configured", "committed"} <= set(broker.admin.groups())
    assert broker.admin.group_config("configured").retry_max_times == 3
    broker.admin.delete_group("committed")
    assert "committed" not in broker.admin.groups()
    assert broker.query_offset("committed", "orders", 0) == -1
    with pytest.raises(GroupNotFoundError):
        broker.admin.delete_group("committed")


async def test_reset_offsets_by_time_is_refused_while_push_consumers_are_live(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=1)
    for index in range(3):
        await broker.send(_message("orders", 0, index))
    await asyncio.sleep(0.02)
    middle = time.time_ns() // 1_000_000
    await asyncio.sleep(0.02)
    for index in range(3, 5):
        await broker.send(_message("orders", 0, index))
    await broker.wait_visible()
    consumer = PushConsumer(broker, "billing", lambda messages, context: ConsumeStatus.CONSUME_SUCCESS)
    consumer.subscribe("orders")
    await consumer.start()
    try:
        members = broker.admin.members("billing")
        assert [m.topics for m in members] == [("%RETRY%billing", "orders")]  # as RocketMQ's consumers subscribe
        with pytest.raises(ConsumersOnlineError, match="live consumer"):
            broker.admin.reset_offsets_by_time("billing", "orders", middle)
    finally:
        await consumer.shutdown()
    assert broker.admin.reset_offsets_by_time("billing", "orders", middle) == {0: 3}
    assert broker.query_offset("billing", "orders", 0) == 3
    assert broker.admin.reset_offsets_by_time("billing", "orders", 0) == {0: 0}
    with pytest.raises(IllegalArgumentError):
        broker.admin.reset_offsets_by_time("billing", "orders", -1)


async def test_readers_that_join_a_group_are_members_until_they_leave_and_never_expire(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=1)
    reader = PullConsumer(broker, "sink", client_id="connector sink task 0")
    reader.join(["orders"])
    broker.join_group("reports", "grpc-client-1", ["orders"], ConsumeType.POP)
    (member,) = broker.admin.members("sink")
    assert (member.client_id, member.consume_type, member.topics) == ("connector sink task 0", "PULL", ("orders",))
    assert member.seconds_since_heartbeat is None  # it does not heartbeat
    assert [m.consume_type for m in broker.admin.members("reports")] == ["POP"]
    assert {"sink", "reports"} <= set(broker.admin.groups())
    # However long they have been silent: they leave when they stop reading, they do not expire.
    registry = broker.consumers
    registry.clock = lambda: time.monotonic() + 10 * registry.expire_after_s
    assert registry.expire() == []
    assert len(broker.admin.members("sink")) == 1
    # A pulling reader would commit its positions over a reset; a pop client follows one.
    with pytest.raises(ConsumersOnlineError, match=r"connector sink task 0 \(PULL\)"):
        broker.admin.reset_offsets_by_time("sink", "orders", 0)
    assert broker.admin.reset_offsets_by_time("reports", "orders", 0) == {0: 0}
    reader.leave()
    broker.leave_group("reports", "grpc-client-1")
    assert broker.admin.members("sink") == broker.admin.members("reports") == []
    assert broker.admin.reset_offsets_by_time("sink", "orders", 0) == {0: 0}


async def test_query_by_time_range_returns_the_first_messages_of_the_range_oldest_first(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=3)
    for index in range(4):
        await broker.send(_message("orders", index % 3, index))
    await asyncio.sleep(0.02)
    begin = time.time_ns() // 1_000_000
    for index in range(4, 10):
        await broker.send(_message("orders", index % 3, index))
    end = time.time_ns() // 1_000_000
    await asyncio.sleep(0.02)
    await broker.send(_message("orders", 0, 10))
    await broker.wait_visible()
    found = broker.queries.by_time_range("orders", begin, end, 64)
    assert [m.body for m in found] == [f"m{i}".encode() for i in range(4, 10)]
    assert [m.body for m in broker.queries.by_time_range("orders", begin, end, 2)] == [b"m4", b"m5"]
    with pytest.raises(IllegalArgumentError):
        broker.queries.by_time_range("orders", end, end - 1)
    with pytest.raises(TopicNotFoundError):
        broker.queries.by_time_range("nope", begin, end)
