"""A master and its slave, separate processes, with reads from the slave on ([broker] slave_read_enable, and every
read counting as far behind: [store] access_message_in_memory_max_ratio = 0): a slave restarted a minute later has
the master's queues, message for message and offset for offset; ali-ons, which follows suggestWhichBrokerId, reads
from the slave; a slave given another log refuses to go on from it."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator

import pytest

from remote_client import Cluster, Producer
from tests.cluster.brokers import ha_status, queue_messages, runtime_info, wait_topics
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.cluster.test_rocketmq4_clients import ons, ons_finish

pytestmark = pytest.mark.slow

READ_FROM_SLAVE = """
[broker]
slave_read_enable = true

[store]
access_message_in_memory_max_ratio = 0
"""
QUEUES = 4
# The "restarted a minute later": the master takes sends all that time.
SLAVE_AWAY_S = 60.0


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(tmp_path_factory.mktemp("pair"), groups=())
    try:
        cluster.start_broker("broker-a", config=READ_FROM_SLAVE)
        cluster.wait_registered(("broker-a",))
        cluster.start_slave("broker-a", config=READ_FROM_SLAVE)
        cluster.wait_in_sync("broker-a")
        yield cluster
    finally:
        cluster.stop()


def send(cluster: ClusterProcesses, topic: str, count: int, prefix: str, interval_s: float = 0.0) -> None:
    async def run() -> None:
        async with Cluster(cluster.namesrv_addr) as client:
            producer = Producer(client)
            for n in range(count):
                await producer.send(topic, f"{prefix}-{n}".encode())
                if interval_s:
                    await asyncio.sleep(interval_s)

    asyncio.run(run())


def same_queues(master: str, slave: str, topic: str) -> int:
    total = 0
    for queue_id in range(QUEUES):
        ours = [
            (m.queue_offset, m.commit_log_offset, m.body, m.unique_id) for m in queue_messages(master, topic, queue_id)
        ]
        theirs = [
            (m.queue_offset, m.commit_log_offset, m.body, m.unique_id) for m in queue_messages(slave, topic, queue_id)
        ]
        assert ours == theirs, (
            f"queue {queue_id} of {topic} differs: {len(ours)} on the master, {len(theirs)} on the slave"
        )
        total += len(ours)
    return total


def test_ali_ons_follows_the_suggestion_to_read_old_messages_from_the_slave(pair: ClusterProcesses):
    pair.admin("topic", "create", "rs_ons", "--cluster", CLUSTER, "--queues", str(QUEUES))
    send(pair, "rs_ons", 400, "old")
    slave = remoting_address(pair.brokers["broker-a-s1"])
    wait_topics(slave, "rs_ons")
    pair.wait_in_sync("broker-a")
    before = int(runtime_info(slave)["msgGetTotalTodayNow"])
    consumed = ons_finish(ons(pair.namesrv_addr, "consume", "rs_ons", "rs_ons_group", "*", 400, 120))
    assert sorted(line["body"] for line in consumed if "body" in line) == sorted(f"old-{n}" for n in range(400))
    # The master answered the first pulls and suggested broker 1; the rest came from the slave.
    assert int(runtime_info(slave)["msgGetTotalTodayNow"]) - before >= 200


def test_a_slave_given_another_log_refuses_it(pair: ClusterProcesses, tmp_path):
    """A slave started on the data of a broker of another group: its log does not continue the master's."""
    other = ClusterProcesses(tmp_path, groups=())
    try:
        stranger = other.start_broker("broker-x")
        other.wait_registered(("broker-x",))
        send(other, "rs_stranger", 500, "x")
        assert stranger.stop() == 0
    finally:
        other.stop()
    data = pair.root / "broker-a-s2"
    shutil.copytree(tmp_path / "broker-x", data)
    (data / "mqgate.toml").unlink(missing_ok=True)
    slave = pair.start_slave("broker-a", 2)
    deadline = time.monotonic() + 30
    while True:
        link = ha_status(remoting_address(slave)).get("haClientRuntimeInfo") or {}
        master_side = [c for c in ha_status(remoting_address(pair.brokers["broker-a"]))["haConnectionInfo"]
                       if c["addr"] == link.get("localAddr")]  # fmt: skip
        if link.get("refused") or (link.get("masterAddr") and not link.get("isActivated")):
            break
        assert time.monotonic() < deadline, f"the slave took the other log: {link}, {master_side}"
        time.sleep(0.5)
    assert slave.stop() == 0
    log = (pair.root / "broker-a-s2.stderr").read_text()
    master_log = (pair.root / "broker-a.stderr").read_text()
    assert "does not continue this log" in log or "is not a copy of this log" in master_log, log[-3000:]
    assert "Traceback" not in log


def test_a_slave_restarted_a_minute_later_catches_up_with_the_same_queues(pair: ClusterProcesses):
    pair.admin("topic", "create", "rs_catch", "--cluster", CLUSTER, "--queues", str(QUEUES))
    send(pair, "rs_catch", 200, "before")
    pair.wait_in_sync("broker-a")
    assert pair.brokers["broker-a-s1"].stop() == 0
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < SLAVE_AWAY_S:
        send(pair, "rs_catch", 50, f"away{n}")
        n += 1
        time.sleep(1)
    row = pair.broker_row("broker-a", 0)
    assert row is not None and row["slaves"] == []
    pair.start_slave("broker-a", config=READ_FROM_SLAVE)
    row = pair.wait_in_sync("broker-a", timeout_s=120)
    assert row["role"] == "SLAVE" and row["in_sync"]
    master, slave = remoting_address(pair.brokers["broker-a"]), remoting_address(pair.brokers["broker-a-s1"])
    wait_topics(slave, "rs_catch")
    assert same_queues(master, slave, "rs_catch") == 200 + 50 * n
