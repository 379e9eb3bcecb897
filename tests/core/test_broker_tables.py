"""What front doors ask of the broker's topic and offset tables, through its methods."""

from core import MessageType


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
