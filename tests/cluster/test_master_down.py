"""A SYNC_MASTER killed with kill -9 and its slave: consumers of every RocketMQ 4 kind (the C++ client, ali-ons, the
remote client's push consumer) read the whole stream from the slave and commit their offsets there; when the master
returns, the slave gives those offsets back and no offset moves back, on either broker (RocketMQ's slave would
overwrite them with the master's older ones: apache/rocketmq#1094)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from core import ConsumeFromWhere, ConsumeStatus, PushConsumerOptions
from remote_client import Cluster, Producer, PushConsumer
from tests.broker_remoting import cpp_clients
from tests.cluster.brokers import committed, wait_topics
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address, sync_master_with_slave
from tests.cluster.test_rocketmq4_clients import ons, ons_finish

pytestmark = pytest.mark.slow

TOPIC = "md"
QUEUES = 4
MESSAGES = 200
GROUPS = ("md_cpp", "md_ons", "md_remote")
# The slave copies its master's tables every 10 s, and gives back offsets ahead of the master's then.
GIVEN_BACK_WITHIN_S = 40.0


@pytest.fixture
def pair(tmp_path) -> Iterator[ClusterProcesses]:
    with sync_master_with_slave(tmp_path) as cluster:
        yield cluster


def remote_consumer(namesrv: str, seconds: float) -> Counter[str]:
    got: Counter[str] = Counter()

    async def run() -> None:
        async def listener(messages, context):  # type: ignore[no-untyped-def]
            got.update(m.body.decode() for m in messages)
            return ConsumeStatus.CONSUME_SUCCESS

        async with Cluster(namesrv, instance_name="md") as cluster:
            options = PushConsumerOptions(
                rebalance_interval_s=2.0, long_poll_ms=1000, consume_from=ConsumeFromWhere.FIRST_OFFSET
            )
            consumer = PushConsumer(cluster, "md_remote", listener, options=options)
            consumer.subscribe(TOPIC)
            await consumer.start()
            deadline = time.monotonic() + seconds
            while sum(got.values()) < MESSAGES and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            await consumer.shutdown()  # commits its offsets

    asyncio.run(run())
    return got


def test_consumers_go_on_from_the_slave_and_no_offset_moves_back(pair: ClusterProcesses):
    pair.admin("topic", "create", TOPIC, "--cluster", CLUSTER, "--queues", str(QUEUES))

    async def send() -> None:
        async with Cluster(pair.namesrv_addr) as client:
            producer = Producer(client)
            for n in range(MESSAGES):
                result = await producer.send(TOPIC, f"md-{n}".encode())
                assert result.status.value == "SEND_OK"

    asyncio.run(send())
    slave = remoting_address(pair.brokers["broker-a-s1"])
    wait_topics(slave, TOPIC)
    pair.brokers["broker-a"].kill()
    deadline = time.monotonic() + 30
    while pair.broker_row("broker-a", 0) is not None:  # the NameServer drops a master whose connection closes
        assert time.monotonic() < deadline
        time.sleep(0.5)

    remote: list[Counter[str]] = []
    reader = threading.Thread(target=lambda: remote.append(remote_consumer(pair.namesrv_addr, 120)))
    reader.start()
    cpp = cpp_clients.start(pair.namesrv_addr, "consume", TOPIC, "md_cpp", "--seconds", 120, "--expect", MESSAGES)
    ons_lines = ons_finish(ons(pair.namesrv_addr, "consume", TOPIC, "md_ons", "*", MESSAGES, 120))
    cpp_lines = cpp_clients.finish(cpp)
    reader.join()
    wanted = Counter(f"md-{n}" for n in range(MESSAGES))
    assert Counter(line["body"] for line in cpp_lines if "body" in line) == wanted
    assert Counter(line["body"] for line in ons_lines if "body" in line) == wanted
    assert remote and +remote[0] == wanted

    # Every group committed the whole stream to the slave (the C++ client every 5 s, the others as they close).
    ends = {queue_id: MESSAGES // QUEUES for queue_id in range(QUEUES)}
    deadline = time.monotonic() + 30
    while any(committed(slave, group, TOPIC, q) != ends[q] for group in GROUPS for q in range(QUEUES)):
        assert time.monotonic() < deadline, {g: [committed(slave, g, TOPIC, q) for q in range(QUEUES)] for g in GROUPS}
        time.sleep(1)

    master = pair.start_broker("broker-a", "--role", "SYNC_MASTER")
    pair.wait_in_sync("broker-a")
    deadline = time.monotonic() + GIVEN_BACK_WITHIN_S
    while True:
        on_slave = {(g, q): committed(slave, g, TOPIC, q) for g in GROUPS for q in range(QUEUES)}
        assert all(offset == ends[q] for (_, q), offset in on_slave.items()), f"an offset moved back: {on_slave}"
        on_master = {(g, q): committed(remoting_address(master), g, TOPIC, q) for g in GROUPS for q in range(QUEUES)}
        if all(offset == ends[q] for (_, q), offset in on_master.items()):
            break
        assert time.monotonic() < deadline, f"the master did not get the slave's offsets back: {on_master}"
        time.sleep(1)
