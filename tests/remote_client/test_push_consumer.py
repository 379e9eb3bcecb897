"""The remote PushConsumer against an in-process cluster of two broker groups: two members share every group's
queues (each message consumed once), a failed message comes back from the group's retry topic, the members
rebalance when one leaves, orderly members hold each queue's lock alone and consume in order, and broadcasting
members each get every message and go on from their own offsets."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

import pytest

from core import ConsumeOrderlyStatus, ConsumeStatus, IllegalArgumentError, MessageModel, PushConsumerOptions
from remote_client import Cluster, Producer, PushConsumer
from tests.remote_client.conftest import LocalCluster

QUICK = PushConsumerOptions(rebalance_interval_s=1.0, long_poll_ms=1000)


async def until(check, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


async def test_two_members_share_both_groups_queues_and_take_each_message_once(local_cluster: LocalCluster):
    await local_cluster.create_topic("pushed", 2)
    got: Counter[bytes] = Counter()

    async def listener(messages, context):
        got.update(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async with (
        Cluster(local_cluster.namesrv_address, instance_name="one") as one,
        Cluster(local_cluster.namesrv_address, instance_name="two") as two,
    ):
        members = [PushConsumer(cluster, "pushers", listener, options=QUICK) for cluster in (one, two)]
        for member in members:
            member.subscribe("pushed")
            await member.start()

        def shared() -> bool:
            owned = [{q for q in m.queues if q.topic == "pushed"} for m in members]
            return all(len(o) == 2 for o in owned) and not owned[0] & owned[1]

        await until(shared)
        assert {q.broker_name for m in members for q in m.queues if q.topic == "pushed"} == {"broker-a", "broker-b"}
        producer = Producer(one)
        for i in range(40):
            await producer.send("pushed", f"m{i}".encode())
        await until(lambda: len(got) == 40)
        await asyncio.sleep(0.5)
        assert got == Counter(f"m{i}".encode() for i in range(40))
        await members[1].shutdown()
        await until(lambda: len([q for q in members[0].queues if q.topic == "pushed"]) == 4)
        for i in range(8):
            await producer.send("pushed", f"late{i}".encode())
        await until(lambda: len(got) == 48)
        await members[0].shutdown()
    for group in local_cluster.groups.values():
        assert [group.broker.query_offset("pushers", "pushed", q) for q in range(2)] == [
            group.broker.max_offset("pushed", q) for q in range(2)
        ]


async def test_a_failed_message_comes_back_from_the_retry_topic(local_cluster: LocalCluster):
    await local_cluster.create_topic("again", 1)
    deliveries: list[tuple[str, int]] = []

    async def listener(messages, context):
        (message,) = messages
        deliveries.append((message.topic, message.reconsume_times))
        if message.reconsume_times == 0:
            context.delay_level_when_next_consume = 1  # 1 s
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    async with Cluster(local_cluster.namesrv_address) as cluster:
        consumer = PushConsumer(cluster, "retriers", listener, options=QUICK)
        consumer.subscribe("again")
        await consumer.start()
        await until(lambda: any(q.topic == "again" for q in consumer.queues))
        await Producer(cluster).send("again", b"x")
        await until(lambda: len(deliveries) == 2, 30)
        await consumer.shutdown()
    assert deliveries[0] == ("again", 0)
    assert deliveries[1] == ("%RETRY%retriers", 1)


def test_what_is_not_there_yet_is_refused(local_cluster: LocalCluster):
    async def listener(messages, context):
        return ConsumeStatus.CONSUME_SUCCESS

    cluster = Cluster(local_cluster.namesrv_address)
    for name, value, said in [
        ("consume_message_batch_max_size", 4, "one message at a time"),
        ("heartbeat_interval_s", 5.0, "give Cluster(heartbeat_s=...)"),
    ]:
        options = PushConsumerOptions(**{name: value})
        with pytest.raises(IllegalArgumentError, match=re.escape(said)):
            PushConsumer(cluster, "g", listener, options=options)


async def test_orderly_members_lock_their_queues_and_consume_each_key_in_order(local_cluster: LocalCluster):
    await local_cluster.create_topic("ordered", 2)
    seen: dict[str, list[int]] = {}
    suspended: set[bytes] = set()

    async def listener(messages, context):
        (message,) = messages
        if message.body == b"k1-3" and message.body not in suspended:
            suspended.add(message.body)  # once: the same message comes again, nothing after it first
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        key, n = message.body.decode().split("-")
        seen.setdefault(key, []).append(int(n))
        return ConsumeOrderlyStatus.SUCCESS

    options = PushConsumerOptions(rebalance_interval_s=1.0, long_poll_ms=1000, suspend_time_ms=200)
    async with (
        Cluster(local_cluster.namesrv_address, instance_name="one") as one,
        Cluster(local_cluster.namesrv_address, instance_name="two") as two,
    ):
        members = [PushConsumer(cluster, "orderers", listener, orderly=True, options=options) for cluster in (one, two)]
        for member in members:
            member.subscribe("ordered")
            await member.start()

        def split() -> bool:
            held = [{q for q, s in m.queues.items() if q.topic == "ordered" and s.locked} for m in members]
            return all(len(h) == 2 for h in held) and not held[0] & held[1]

        await until(split)
        producer = Producer(one)
        for n in range(10):
            for key in ("k1", "k2", "k3"):
                await producer.send("ordered", f"{key}-{n}".encode(), sharding_key=key)
        await until(lambda: sum(len(v) for v in seen.values()) == 30)
        assert seen == {key: list(range(10)) for key in ("k1", "k2", "k3")}
        for member in members:
            await member.shutdown()


async def test_broadcasting_members_each_get_every_message_and_keep_their_own_offsets(
    local_cluster: LocalCluster, tmp_path
):
    await local_cluster.create_topic("told", 2)
    got: dict[str, list[bytes]] = {"one": [], "two": []}

    def listener_of(name: str):
        async def listener(messages, context):
            got[name] += [m.body for m in messages]
            return ConsumeStatus.CONSUME_SUCCESS

        return listener

    def options(name: str) -> PushConsumerOptions:
        return PushConsumerOptions(message_model=MessageModel.BROADCASTING, instance_name=name,
                                   local_offset_dir=tmp_path, rebalance_interval_s=1.0, long_poll_ms=1000)  # fmt: skip

    async with Cluster(local_cluster.namesrv_address, instance_name="b1") as cluster:
        members = {name: PushConsumer(cluster if name == "one" else Cluster(local_cluster.namesrv_address,
                                                                            instance_name="b2"),
                                      "tellers", listener_of(name), options=options(name))
                   for name in ("one", "two")}  # fmt: skip
        for member in members.values():
            member.subscribe("told")
            await member.start()
        await until(lambda: all(len(m.queues) == 4 for m in members.values()))
        producer = Producer(cluster)
        for i in range(12):
            await producer.send("told", f"t{i}".encode())
        await until(lambda: all(len(bodies) == 12 for bodies in got.values()))
        assert Counter(got["one"]) == Counter(got["two"]) == Counter(f"t{i}".encode() for i in range(12))
        for member in members.values():
            await member.shutdown()
        await members["two"].cluster.close()
        assert (tmp_path / "two" / "tellers" / "offsets.json").exists()
        again = PushConsumer(cluster, "tellers", listener_of("one"), options=options("one"))
        again.subscribe("told")
        await again.start()
        await producer.send("told", b"after")
        await until(lambda: got["one"][-1:] == [b"after"])
        await again.shutdown()
    assert len(got["one"]) == 13  # nothing of the first twelve again: its offsets came from its file
