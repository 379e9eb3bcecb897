"""Two NameServers, independent of each other as in RocketMQ: both know every broker; with one killed, brokers and
clients go on with the other; a broker silent for RocketMQ's 120 s (stopped, its connections open) leaves the
routes, and comes back with its next registration."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator

import pytest

from remote_client import Cluster
from remote_client import Producer as RemoteProducer
from tests.broker_remoting import cpp_clients
from tests.cluster.processes import CLUSTER, ClusterProcesses

pytestmark = pytest.mark.slow

# RocketMQ's NameServer drops a broker not heard for 120 s, looking every 5 s; a broker registers every 30 s.
BROKER_TIMEOUT_S = 120.0
SCAN_S = 5.0
REGISTER_EVERY_S = 30.0


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    processes = ClusterProcesses(tmp_path_factory.mktemp("two-namesrvs"), namesrvs=2)
    try:
        yield processes
    finally:
        processes.stop()


def test_every_nameserver_knows_every_broker(two: ClusterProcesses):
    for namesrv in two.namesrvs:
        assert two.registered(namesrv.address) == {"broker-a", "broker-b"}


def test_with_one_nameserver_killed_brokers_and_clients_go_on_with_the_other(two: ClusterProcesses):
    first, second = two.namesrvs
    first.kill()
    # A topic made now reaches the second NameServer by the brokers' registrations; admin asks whichever answers.
    made = two.admin("topic", "create", "after_kill", "--cluster", CLUSTER, "--queues", "2")
    assert made["broker_groups"] == ["broker-a", "broker-b"]
    sent = cpp_clients.run(two.namesrv_addr, "send", "after_kill", "--count", 20, "--body", "k")
    assert [line["status"] for line in sent] == [0] * 20

    async def remote_send() -> set[str]:
        async with Cluster(two.namesrv_addr) as client:
            producer = RemoteProducer(client)
            return {(await producer.send("after_kill", b"r")).message_queue.broker_name for _ in range(8)}

    assert asyncio.run(remote_send()) == {"broker-a", "broker-b"}
    status = two.admin("topic", "status", "after_kill", namesrv=second.address)
    assert status["messages"] == 28


def test_a_broker_silent_for_120_s_leaves_the_routes_and_comes_back_when_it_registers(two: ClusterProcesses):
    live = [namesrv.address for namesrv in two.namesrvs if namesrv.process.poll() is None]
    namesrv = live[0]
    broker = two.brokers["broker-b"]
    os.kill(broker.process.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        deadline = stopped_at + BROKER_TIMEOUT_S + SCAN_S + 30
        while "broker-b" in two.registered(namesrv):
            assert time.monotonic() < deadline, "broker-b is still in the routes"
            time.sleep(2)
        gone_after = time.monotonic() - stopped_at
        # Its last registration came at most 30 s before the stop: it is dropped 120 s after that one, no sooner.
        assert gone_after >= BROKER_TIMEOUT_S - REGISTER_EVERY_S
        assert "broker-b" not in {g for t in two.admin("topic", "list", namesrv=namesrv) for g in t["groups"]}
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    two.wait_registered(("broker-a", "broker-b"), namesrv)
