"""The remote Producer against an in-process cluster of two broker groups: sends spread over both groups, come back
as the core's SendResult, fail with the core's errors, and go around a group that is gone."""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest

from core import IllegalMessageError, PayloadTooLargeError, SendStatus, TopicNotFoundError
from remote_client import Cluster, Producer
from tests.remote_client.conftest import LocalCluster


async def test_sends_spread_over_both_groups_and_are_stored_where_the_result_says(local_cluster: LocalCluster):
    await local_cluster.create_topic("orders", 4)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = Producer(cluster, "p")
        results = [await producer.send("orders", f"m{i}".encode(), tags="t", keys="k") for i in range(16)]
        await producer.shutdown()
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    assert Counter(r.message_queue.broker_name for r in results) == {"broker-a": 8, "broker-b": 8}
    for index, result in enumerate(results):
        broker = local_cluster.groups[result.message_queue.broker_name].broker
        pulled = await broker.pull("g", "orders", result.message_queue.queue_id, result.queue_offset, 1, None, 3000)
        (message,) = pulled.messages
        assert (message.body, message.unique_id, message.tags) == (f"m{index}".encode(), result.msg_id, "t")
        assert message.commit_log_offset == result.commit_log_offset


async def test_a_batch_goes_to_one_queue_with_an_id_each(local_cluster: LocalCluster):
    await local_cluster.create_topic("batch", 2)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        results = await Producer(cluster).send_batch("batch", [b"a", b"b", b"c"], sharding_key="k")
    assert len({r.message_queue for r in results}) == 1
    assert [r.queue_offset for r in results] == [0, 1, 2]
    assert len({r.msg_id for r in results}) == 3


async def test_refusals_are_the_cores_errors(local_cluster: LocalCluster):
    for name in list(local_cluster.groups):
        await local_cluster.groups.pop(name).close()
    await local_cluster.add_group("broker-c", auto_create_topic=False)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = Producer(cluster)
        with pytest.raises(TopicNotFoundError, match="no broker of the cluster creates topics on first send"):
            await producer.send("missing", b"x")
        await local_cluster.create_topic("big", 1)
        with pytest.raises(PayloadTooLargeError) as caught:
            await producer.send("big", os.urandom(2 << 20))  # random: compression does not shrink it
        assert isinstance(caught.value, IllegalMessageError)


async def test_a_topic_not_created_is_created_from_the_template_on_first_send(local_cluster: LocalCluster):
    async with Cluster(local_cluster.namesrv_address) as cluster:
        result = await Producer(cluster).send("fresh", b"x")
    assert result.status is SendStatus.SEND_OK
    assert local_cluster.groups[result.message_queue.broker_name].broker.has_topic("fresh")


async def test_sends_go_around_a_group_that_is_gone(local_cluster: LocalCluster):
    await local_cluster.create_topic("orders", 4)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = Producer(cluster)
        await producer.send("orders", b"warm")
        await local_cluster.groups.pop("broker-b").close()
        results = await asyncio.gather(*(producer.send("orders", b"x") for _ in range(20)))
        assert {r.message_queue.broker_name for r in results} == {"broker-a"}
        assert producer.faults is not None and producer.faults.passed_over(float("inf")) == []
