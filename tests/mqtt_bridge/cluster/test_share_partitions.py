"""Shared subscriptions' partitions on a cluster: names the core takes that lead back to their subscription, every
partition handed out by exactly one node with members, and the send hook spreading a stream over the nodes."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from core import LIGHT_QUEUE_PREFIX, MAX_TOPIC_LENGTH
from mqtt_bridge.cluster.filter_registry import FilterRegistry
from mqtt_bridge.cluster.share_partitions import dispatched_by, partition_base, partition_queue
from mqtt_bridge.sessions.session import light_queue_name

SHARED_PREFIX = f"{LIGHT_QUEUE_PREFIX}S%"
filters = st.text(min_size=1, max_size=80).filter(lambda f: "\x00" not in f)
nodes = st.text(min_size=1, max_size=100)


@given(filters, st.text(min_size=1, max_size=20), nodes)
def test_a_partition_is_a_core_name_that_leads_back_to_its_shared_queue(topic_filter, share, node):
    queue = light_queue_name(topic_filter, share)
    partition = partition_queue(queue, node)
    assert len(partition) <= MAX_TOPIC_LENGTH
    assert partition.startswith(queue)
    assert partition_base(partition, SHARED_PREFIX) == queue
    assert partition_base(queue, SHARED_PREFIX) is None  # the shared queue itself is no partition
    assert partition_base(light_queue_name(topic_filter), SHARED_PREFIX) is None  # nor a plain filter's


def test_two_nodes_have_two_partitions():
    queue = light_queue_name("a/#", "g")
    assert partition_queue(queue, "broker-a") != partition_queue(queue, "broker-b")
    assert partition_queue(queue, "broker.a") != partition_queue(queue, "broker_a")  # hashed when not plain


@given(st.sets(st.sampled_from("abcdefgh"), min_size=1), st.sets(st.sampled_from("abcdefghijk")))
def test_every_known_node_s_partitions_are_handed_out_by_exactly_one_node_with_members(users, known):
    known = known | users
    holders = Counter(node for user in users for node in dispatched_by(user, sorted(users), known))
    assert set(holders) == known
    assert all(count == 1 for count in holders.values())
    for user in users:
        assert dispatched_by(user, sorted(users), known)[0] == user  # its own first


def test_a_node_without_members_hands_out_nothing():
    assert dispatched_by("c", ["a", "b"], ["a", "b", "c"]) == []


def test_the_send_hook_spreads_a_shared_stream_over_the_nodes_with_members_in_turn():
    registry = FilterRegistry()
    shared = light_queue_name("t/#", "g")
    plain = light_queue_name("t/#")
    registry.add("broker-a", shared, "t/#", "g")
    registry.add("broker-b", shared, "t/#", "g")
    registry.add("broker-a", plain, "t/#", None)
    routed = Counter()
    for _ in range(100):
        queues = registry.partitioned_queues_for("t/x")
        assert plain in queues and shared not in queues
        routed.update(queue for queue in queues if queue != plain)
    assert routed == {partition_queue(shared, "broker-a"): 50, partition_queue(shared, "broker-b"): 50}
    # broker-a's last member goes: its partition gets nothing more.
    registry.remove("broker-a", shared)
    assert [q for q in registry.partitioned_queues_for("t/x") if q != plain] == [partition_queue(shared, "broker-b")]
    # One node alone: the plain hook is unchanged.
    assert set(registry.queues_for("t/x")) == {shared, plain}
