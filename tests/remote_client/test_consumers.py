"""The remote PullConsumer and SimpleConsumer against an in-process cluster of two broker groups: queues of both
groups, offsets kept by the brokers, pops that take from every group and wait on all of them at once, and the
core's errors."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from core import (
    ConsumeFromWhere,
    FilterExpressionError,
    PopRequestError,
    PullStatus,
    ReceiptHandleError,
    TopicNotFoundError,
)
from remote_client import Cluster, Producer, PullConsumer, SimpleConsumer
from tests.remote_client.conftest import LocalCluster


async def test_pulls_read_both_groups_and_commits_reach_the_brokers(local_cluster: LocalCluster):
    await local_cluster.create_topic("pulled", 2)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = Producer(cluster)
        for i in range(8):
            await producer.send("pulled", f"m{i}".encode(), tags="a" if i % 2 else "b")
        consumer = PullConsumer(cluster, "pullers", consume_from=ConsumeFromWhere.FIRST_OFFSET)
        await consumer.start()
        queues = await consumer.fetch_queues("pulled")
        assert {q.broker_name for q in queues} == {"broker-a", "broker-b"} and len(queues) == 4
        bodies = []
        for queue in queues:
            assert await consumer.committed(queue) == -1
            offset = await consumer.start_offset(queue)
            assert offset == 0
            while offset < 2:  # the store may not have dispatched both yet: a long poll waits for the next
                got = await consumer.pull(queue, offset, 32, long_poll_ms=2000)
                assert got.status is PullStatus.FOUND
                bodies += [m.body for m in got.messages]
                offset = got.next_begin_offset
            consumer.commit(queue, offset)
            assert await consumer.committed(queue) == 2
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(8))
        filtered = [await consumer.pull(queue, 0, 32, expression="a") for queue in queues]
        assert {m.tags for f in filtered for m in f.messages} == {"a"}
        assert sum(len(f.messages) for f in filtered) == 4
        with pytest.raises(FilterExpressionError):
            await consumer.pull(queues[0], 0, 32, expression="a > ", expression_type="SQL92")
        await consumer.shutdown()
    for group in local_cluster.groups.values():
        assert [group.broker.query_offset("pullers", "pulled", q) for q in range(2)] == [2, 2]


async def test_a_pull_past_the_end_waits_and_an_offset_outside_is_illegal(local_cluster: LocalCluster):
    await local_cluster.create_topic("tail", 1)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        consumer = PullConsumer(cluster, "tailers")
        (queue, *_) = await consumer.fetch_queues("tail")
        waiting = asyncio.ensure_future(consumer.pull(queue, 0, 4, long_poll_ms=5000))
        await asyncio.sleep(0.2)
        await local_cluster.groups[queue.broker_name].broker.send(_message("tail", queue.queue_id))
        assert (await waiting).status is PullStatus.FOUND
        assert (await consumer.pull(queue, 1)).status is PullStatus.NO_NEW_MSG
        assert (await consumer.pull(queue, 7)).status is PullStatus.OFFSET_ILLEGAL


def _message(topic: str, queue_id: int):
    from core import Message

    return Message(topic, b"late", queue_id)


async def test_a_simple_consumer_takes_from_both_groups_and_acks_where_each_came_from(local_cluster: LocalCluster):
    await local_cluster.create_topic("popped", 2)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = Producer(cluster)
        sent = [await producer.send("popped", f"p{i}".encode()) for i in range(10)]
        consumer = SimpleConsumer(cluster, "poppers", {"popped": "*"}, await_duration_s=0)
        await consumer.start()
        views = []
        while len(views) < 10:
            got = await consumer.receive(4, 30)
            assert got, f"only {len(views)} of 10 received"
            views += got
        assert Counter(v.broker_name for v in views) == Counter(r.message_queue.broker_name for r in sent)
        assert sorted(v.body for v in views) == sorted(f"p{i}".encode() for i in range(10))
        assert {v.delivery_attempt for v in views} == {1} and all("POP_CK" not in v.properties for v in views)
        for view in views[1:]:
            await consumer.ack(view)
        again = await consumer.change_invisible_duration(views[0], 0)
        with pytest.raises(ReceiptHandleError) as caught:
            await consumer.ack(views[0])  # the handle before the change
        assert caught.value.problem.name == "SUPERSEDED"
        (back,) = await consumer.receive(4, 30)
        assert back.body == again.body and back.delivery_attempt == 2
        await consumer.ack(back)
        assert await consumer.receive(4, 30) == []
        await consumer.shutdown()


async def test_a_waiting_receive_wakes_for_a_message_on_either_group(local_cluster: LocalCluster):
    await local_cluster.create_topic("waited", 1)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        consumer = SimpleConsumer(cluster, "waiters", {"waited": "*"}, await_duration_s=10)
        await consumer.start()
        for name in ("broker-b", "broker-a"):
            receiving = asyncio.ensure_future(consumer.receive(1, 30))
            await asyncio.sleep(0.3)
            assert not receiving.done()
            await local_cluster.groups[name].broker.send(_message("waited", 0))
            (view,) = await asyncio.wait_for(receiving, 5)
            assert view.broker_name == name
            await consumer.ack(view)


async def test_the_simple_consumers_refusals_are_the_cores(local_cluster: LocalCluster):
    async with Cluster(local_cluster.namesrv_address) as cluster:
        with pytest.raises(FilterExpressionError):
            SimpleConsumer(cluster, "g", {"t": ("SQL92", "a >")})
        with pytest.raises(TopicNotFoundError):
            await SimpleConsumer(cluster, "g", {"nowhere": "*"}).start()
        await local_cluster.create_topic("limits", 1)
        consumer = SimpleConsumer(cluster, "g", {"limits": "*"}, await_duration_s=0)
        with pytest.raises(PopRequestError, match="receive 1 to 32 at a time"):
            await consumer.receive(33, 30)
        with pytest.raises(PopRequestError, match="receive with 10 s to 43200 s"):
            await consumer.receive(1, 5)
