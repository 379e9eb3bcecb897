"""Connectors on a cluster with automatic failover underneath: a NameServer, etcd, broker group broker-a (one master)
and broker group broker-b (three `mqgate serve --etcd` members, SYNC_MASTER). The Spark sink's task runs on
broker-b's master, reading a topic spread over both groups; messages are sent to both while that master is killed
with SIGKILL. The elected master runs the connectors for its term (a slave's API answers 503 meanwhile), takes the
task over from the offsets the table's manifest holds, and every acknowledged message is in the table once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from connectors.cluster import task_work
from core import CoreError, MessageQueue
from peers.owners import owner
from tests.cluster.brokers import runtime_info
from tests.cluster.processes import ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import wait_until
from tests.cluster.test_connectors_cluster import (
    GROUPS,
    QUEUES,
    Sender,
    committed_rows,
    create_topic,
    eventually,
    request,
    status_of,
    table_bodies,
)
from tests.cluster.test_mqtt_cluster_failover import sync_state_set
from tests.etcd_process import EtcdProcess

pytestmark = pytest.mark.slow

KILL_AFTER_S = 3.0
AFTER_ELECTION_S = 5.0


def run_by(group: str) -> str:
    return next(name for n in range(1000) if owner(task_work(name := f"fo-lake-{n}", 0), list(GROUPS)) == group)


def rows_committed(table: Path) -> int:
    try:
        return committed_rows(table)
    except (OSError, ValueError):
        return 0  # no batch committed yet


async def test_the_spark_sink_s_task_moves_to_the_elected_master_and_writes_each_acknowledged_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    table = tmp_path / "table"
    (tmp_path / "cluster").mkdir()
    etcd = await asyncio.to_thread(EtcdProcess, tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path / "cluster", groups=())
    try:
        await asyncio.to_thread(cluster.start_broker, "broker-a")
        members = [
            await asyncio.to_thread(cluster.start_member, "broker-b", member, etcd.address) for member in (1, 2, 3)
        ]
        assert members[0].ready["role"] == "master", members[0].line
        await asyncio.to_thread(cluster.wait_registered, GROUPS)
        await asyncio.to_thread(wait_until, lambda: sync_state_set(etcd.address) == {1, 2, 3}, 60, "the set of 3")
        await asyncio.to_thread(create_topic, cluster, "fo-telemetry")
        name = run_by("broker-b")
        config = {
            "connector.class": "spark-sink", "topics": "fo-telemetry", "path": str(table), "batch.size": "200",
            "batch.interval.ms": "500", "spark.sql.shuffle.partitions": "2",
        }  # fmt: skip
        async with aiohttp.ClientSession() as session:
            await request(session, "PUT", cluster.brokers["broker-a"], f"/connectors/{name}/config", json=config)
            async with session.get(members[1].http_url + "/connectors") as response:
                assert response.status == 503, await response.text()  # a slave's connectors do not run

            async def running_on_b() -> bool:
                status = await status_of(session, members[0], name)
                return status is not None and status["tasks"][0] == {**status["tasks"][0], "state": "RUNNING",
                                                                      "worker_id": "broker-b"}  # fmt: skip

            await eventually(running_on_b, 60, "the task running on broker-b's master")
        acked: list[bytes] = []
        stop = asyncio.Event()

        async def send_all() -> None:
            async with Sender(cluster) as producer:
                n = 0
                while not stop.is_set():
                    n += 1
                    group = GROUPS[n % 2]
                    body = f"{group}-{n}".encode()
                    try:
                        await producer.send_message(
                            producer.message("fo-telemetry", body), MessageQueue("fo-telemetry", group, n % QUEUES)
                        )
                        acked.append(body)
                    except CoreError:
                        await asyncio.sleep(0.1)  # broker-b electing: this one is not acknowledged
                        await producer.cluster.route("fo-telemetry", refresh=True)
                    await asyncio.sleep(0.005)

        sending = asyncio.get_running_loop().create_task(send_all())

        async def first_batch() -> bool:
            return rows_committed(table) > 0

        await eventually(first_batch, 120, "a first batch committed")
        await asyncio.sleep(KILL_AFTER_S)
        members[0].kill()  # SIGKILL while batches are being committed
        await asyncio.to_thread(
            wait_until,
            lambda: any(runtime_info(remoting_address(m)).get("brokerRole") != "SLAVE" for m in members[1:]),
            30,
            "a new master",
        )
        at_election = len(acked)
        await asyncio.sleep(AFTER_ELECTION_S)
        stop.set()
        await sending
        assert len(acked) > at_election > 0, "sends went on after the election"

        async def settled() -> bool:
            before = rows_committed(table)
            await asyncio.sleep(3.0)
            return before >= len(acked) and rows_committed(table) == before

        await eventually(settled, 240, "every acknowledged message committed")
    finally:
        await asyncio.to_thread(cluster.stop)  # a clean stop: the last batch's files are moved into place
        await asyncio.to_thread(etcd.stop)

    bodies = table_bodies(table)
    assert not set(acked) - set(bodies), "acknowledged and not in the table"
    assert [body for body, count in bodies.items() if count > 1] == [], "each message once"
