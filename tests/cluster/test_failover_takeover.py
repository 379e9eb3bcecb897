"""The master's services move with the master: delay-level and timer messages parked on a master that is killed
are delivered by the slave elected in its place, each once (those the old master had moved already are not moved
again), and a half message left undecided is checked back with its producer by the new master and committed."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from remote_client import Cluster, Producer
from tests.broker_remoting import cpp_clients
from tests.cluster.brokers import has_topic
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import GROUP, record, wait_until
from tests.etcd_process import EtcdProcess

pytestmark = pytest.mark.slow

# Transactions are checked back soon, so that the test does not wait RocketMQ's 30 s.
CONFIG = "[broker]\ntransaction_timeout_ms = 2000\ntransaction_check_interval_ms = 3000\n"
EARLY, LATE = 10, 10  # messages due before the kill (moved by the old master) and after it


@pytest.fixture
def group(tmp_path) -> Iterator[tuple[ClusterProcesses, EtcdProcess]]:
    etcd = EtcdProcess(tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    try:
        cluster.start_member(GROUP, 1, etcd.address, config=CONFIG)
        for broker_id in (2, 3):
            cluster.start_member(GROUP, broker_id, etcd.address, config=CONFIG)
        wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3}, 60, "the set of three")
        yield cluster, etcd
    finally:
        cluster.stop()
        etcd.stop()


async def send_timers(namesrv: str, prefix: str, count: int, delay_s: int) -> None:
    async with Cluster(namesrv) as client:
        producer = Producer(client)
        for n in range(count):
            await producer.send("to_timer", f"{prefix}-{n}".encode(), properties={"TIMER_DELAY_SEC": str(delay_s)})


def test_delay_timers_and_transactions_parked_on_a_killed_master_are_delivered_once_by_the_new_one(group):
    cluster, etcd = group
    for topic in ("to_delay", "to_timer", "to_trans"):
        cluster.admin("topic", "create", topic, "--cluster", CLUSTER, "--queues", "2")
    for name in (f"{GROUP}-n2", f"{GROUP}-n3"):
        address = remoting_address(cluster.brokers[name])
        wait_until(lambda address=address: all(has_topic(address, t) for t in ("to_delay", "to_timer", "to_trans")),
                   30, f"{name} copies the topics")  # fmt: skip
    namesrv = cluster.namesrv_addr
    # Due before the kill: the old master moves them (level 1: 1 s; timers of 1 s).
    early = cpp_clients.run(namesrv, "send", "to_delay", "--count", EARLY, "--delay-level", 1, "--body", "early")
    asyncio.run(send_timers(namesrv, "early", EARLY, 1))
    # Due after the kill: level 3 (10 s), timers of 10 s.
    late = cpp_clients.run(namesrv, "send", "to_delay", "--count", LATE, "--delay-level", 3, "--body", "late")
    asyncio.run(send_timers(namesrv, "late", LATE, 10))
    assert all(line.get("status") == 0 for line in early + late)
    transaction = cpp_clients.start(namesrv, "transaction", "to_trans", "to_trans_producer", "--state", "unknown",
                                    "--check", "commit", "--seconds", 150)  # fmt: skip
    time.sleep(3.0)  # the early ones are moved; the half message is stored and replicated
    old = record(etcd.address)
    cluster.brokers[f"{GROUP}-n{old.master_id}"].kill()
    wait_until(lambda: (r := record(etcd.address)) and r.master_epoch > old.master_epoch, 30, "a new master")

    # Consumers that read for a while after the last is due, so that a second delivery would be seen.
    consumers = [cpp_clients.start(namesrv, "consume", topic, f"{topic}_c", "--seconds", 35)
                 for topic in ("to_delay", "to_timer")]  # fmt: skip
    delayed, timers = (cpp_clients.finish(consumer) for consumer in consumers)
    lines = cpp_clients.finish(transaction)
    committed = cpp_clients.run(namesrv, "consume", "to_trans", "to_trans_c", "--seconds", 60, "--expect", 1)

    for got in (delayed, timers):
        counts = Counter(line["body"] for line in got)
        assert {f"late-{n}" for n in range(LATE)} | {f"early-{n}" for n in range(EARLY)} == set(counts), counts
        assert set(counts.values()) == {1}, [body for body, count in counts.items() if count > 1]
    assert any("checked" in line for line in lines), lines
    assert [line["body"] for line in committed] == ["body-0"]
