"""What front doors ask of the broker's topic and offset tables, through its methods."""

import asyncio

import pytest

from core import Message, MessageType, NoPermissionError, Perm


async def test_topics_exist_and_are_listed_once_created(make_broker):
    broker = await make_broker()
    assert not broker.has_topic("orders")
    broker.create_topic("orders", 2, MessageType.NORMAL)
    assert broker.has_topic("orders")
    configs = broker.topic_configs()
    assert "orders" in [config.topic_name for config in configs]
    broker.create_topic("later", 1)
    assert "later" not in [config.topic_name for config in configs]  # a copy, not a live view


async def test_a_group_s_offsets_are_forgotten_for_good(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", 1)
    broker.commit_offset("billing", "orders", 0, 7)
    broker.commit_offset("audit", "orders", 0, 3)
    assert broker.query_offset("billing", "orders", 0) == 7
    broker.delete_group_offsets("billing")
    assert broker.query_offset("billing", "orders", 0) < 0
    assert broker.query_offset("audit", "orders", 0) == 3


async def test_a_send_follows_the_topic_table_as_it_changes(make_broker):
    """The broker caches each topic's route and drops it when the topic table changes: a send after an update,
    from this thread or another, sees the new queues and permissions."""
    broker = await make_broker()
    broker.create_topic("orders", 2)
    assert len(broker.write_queues("orders")) == 2
    broker.admin.update_topic("orders", write_queue_nums=4)
    assert len(broker.write_queues("orders")) == 4
    assert (await broker.send(Message("orders", b"x", 3))).message_queue.queue_id == 3
    await asyncio.to_thread(broker.admin.update_topic, "orders", perm=Perm.READ)
    with pytest.raises(NoPermissionError):
        await broker.send(Message("orders", b"x", 0))
    broker.delete_topic("orders")
    assert not broker.has_topic("orders")
    assert len(broker.write_queues("orders")) == broker.config.default_queue_nums  # auto-created again
