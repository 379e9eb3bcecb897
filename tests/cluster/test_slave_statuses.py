"""A SYNC_MASTER's two refusals, each produced on purpose and seen by the clients as RocketMQ shows them: with its
slave's link cut in a network namespace, FLUSH_SLAVE_TIMEOUT once slave_timeout_ms passes; once the master drops
the silent link, and with the slave stopped, SLAVE_NOT_AVAILABLE at once. Both mean "stored on the master only":
never SEND_OK. The remote client returns the status, as RocketMQ's Java producer does (retryAnotherBrokerWhenNot
StoreOK off); RocketMQ's C++ client sends again on any status but SEND_OK, retryTimes in all, then raises (its
misleading "No route info of this topic"): the send fails, as it should, and the master holds a copy per try."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from core import SendStatus
from remote_client import Cluster, Producer
from tests.broker_remoting import cpp_clients
from tests.cluster.brokers import ha_status
from tests.cluster.netns import NetworkNamespace
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.serve_process import ServeProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating a network namespace needs root (CAP_NET_ADMIN)"),
]

SEND_OK = 0  # the C++ client's
# Heartbeats every second each way: a quiet link stays up (a link is dropped after 4 s of silence, the default
# heartbeat is 5 s: a slow start of the clients would drop it before the first send), a cut one goes in 4 s.
MASTER = """
[ha]
slave_timeout_ms = 1000
housekeeping_interval_ms = 4000
send_heartbeat_interval_ms = 1000
"""


@pytest.fixture
def linked(tmp_path) -> Iterator[tuple[ClusterProcesses, NetworkNamespace]]:
    namespace = NetworkNamespace("ha")
    cluster = ClusterProcesses(tmp_path, groups=())
    try:
        master = cluster.start_broker("broker-a", "--role", "SYNC_MASTER", config=MASTER)
        cluster.wait_registered(("broker-a",))
        ha_port = master.ready["ha"].rpartition(":")[2]
        (tmp_path / "slave").mkdir()
        (tmp_path / "slave" / "mqgate.toml").write_text(
            f'[ha]\nmaster_address = "{namespace.host_ip}:{ha_port}"\nhousekeeping_interval_ms = 4000\n'
            "send_heartbeat_interval_ms = 1000\n"
        )
        # Inside the namespace: no NameServer reachable (it runs its own); its master is the fixed address.
        cluster.brokers["slave"] = ServeProcess(
            tmp_path / "slave", "--role", "SLAVE", "--broker-id", "1", "--broker-name", "broker-a",
            wrapper=namespace.wrapper,
        )  # fmt: skip
        wait_slaves(master, 1)
        cluster.admin("topic", "create", "st", "--cluster", CLUSTER, "--queues", "2")
        cluster.wait_topic("st")
        yield cluster, namespace
    finally:
        cluster.stop()
        namespace.close()


def wait_slaves(master: ServeProcess, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len([c for c in ha_status(remoting_address(master))["haConnectionInfo"] if c["inSync"]]) != count:
        assert time.monotonic() < deadline, f"not {count} slave(s) in sync within {timeout_s} s"
        time.sleep(0.3)


def cpp_send(cluster: ClusterProcesses, body: str) -> dict[str, Any]:
    lines = cpp_clients.run(cluster.namesrv_addr, "send", "st", "--count", 1, "--body", body, "--timeout-ms", 6000,
                            "--keep-going")  # fmt: skip
    assert len(lines) == 1, lines
    return lines[0]


def remote_send(cluster: ClusterProcesses, body: str) -> tuple[SendStatus, float]:
    async def run() -> tuple[SendStatus, float]:
        async with Cluster(cluster.namesrv_addr) as client:
            producer = Producer(client, send_msg_timeout_ms=6000)
            started = time.monotonic()
            result = await producer.send("st", body.encode())
            return result.status, time.monotonic() - started

    return asyncio.run(run())


def test_flush_slave_timeout_then_slave_not_available(linked):
    cluster, namespace = linked
    master = cluster.brokers["broker-a"]
    sent = cpp_send(cluster, "linked")
    assert sent.get("status") == SEND_OK, sent
    assert remote_send(cluster, "linked")[0] is SendStatus.SEND_OK

    namespace.cut()  # the slave's packets stop; its connection stays open on the master
    assert "No route info" in cpp_send(cluster, "cut")["error"]  # its tries all answered FLUSH_SLAVE_TIMEOUT
    status, took = remote_send(cluster, "cut")
    assert status is SendStatus.FLUSH_SLAVE_TIMEOUT and took >= 0.9  # it waited out slave_timeout_ms for the slave
    wait_slaves(master, 0)  # the master drops a link silent for housekeeping_interval_ms
    status, _ = remote_send(cluster, "dropped")  # answered without waiting: no slave to wait for
    assert status is SendStatus.SLAVE_NOT_AVAILABLE
    assert "error" in cpp_send(cluster, "dropped")

    namespace.restore()
    wait_slaves(master, 1)
    assert cpp_send(cluster, "restored")["status"] == SEND_OK

    assert cluster.brokers["slave"].stop() == 0
    wait_slaves(master, 0, timeout_s=5)
    status, _ = remote_send(cluster, "stopped")
    assert status is SendStatus.SLAVE_NOT_AVAILABLE
    assert "error" in cpp_send(cluster, "stopped")
