"""Connectors on a cluster with automatic failover underneath: a NameServer, etcd, broker group broker-a (one master)
and broker group broker-b (three `mqgate serve --etcd` members, SYNC_MASTER). A file sink's task runs on broker-b's
master, reading a topic spread over both groups; messages are sent to both while that master is killed with SIGKILL.
The elected master runs the connectors for its term (a slave's API answers 503 meanwhile), takes the task over
from the offsets the sink stored with its file, and every acknowledged message is in the file once."""

from __future__ import annotations

import asyncio
from collections import Counter

import aiohttp
import pytest

from connectors.cluster import task_work
from core import CoreError, MessageQueue
from peers.owners import owner
from tests.cluster.brokers import runtime_info
from tests.cluster.processes import ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import wait_until
from tests.cluster.test_connectors_cluster import GROUPS, QUEUES, Sender, create_topic, eventually, request, status_of
from tests.cluster.test_mqtt_cluster_failover import sync_state_set
from tests.etcd_process import EtcdProcess

pytestmark = pytest.mark.slow

KILL_AFTER_S = 2.0
AFTER_ELECTION_S = 5.0


def run_by(group: str) -> str:
    return next(name for n in range(1000) if owner(task_work(name := f"fo-sink-{n}", 0), list(GROUPS)) == group)


async def test_a_sink_task_on_the_killed_master_moves_to_the_elected_one_and_writes_each_message_once(tmp_path):
    etcd = await asyncio.to_thread(EtcdProcess, tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    try:
        await asyncio.to_thread(cluster.start_broker, "broker-a")
        members = [
            await asyncio.to_thread(cluster.start_member, "broker-b", member, etcd.address) for member in (1, 2, 3)
        ]
        assert members[0].ready["role"] == "master", members[0].line
        await asyncio.to_thread(cluster.wait_registered, GROUPS)
        await asyncio.to_thread(wait_until, lambda: sync_state_set(etcd.address) == {1, 2, 3}, 60, "the set of 3")
        await asyncio.to_thread(create_topic, cluster, "fo-lines")
        name = run_by("broker-b")
        out = tmp_path / "out.txt"
        config = {"connector.class": "file-sink", "topics": "fo-lines", "file": str(out)}
        async with aiohttp.ClientSession() as session:
            await request(session, "PUT", cluster.brokers["broker-a"], f"/connectors/{name}/config", json=config)
            async with session.get(members[1].http_url + "/connectors") as response:
                assert response.status == 503, await response.text()  # a slave's connectors do not run

            async def running_on_b() -> bool:
                status = await status_of(session, members[0], name)
                return status is not None and status["tasks"][0] == {**status["tasks"][0], "state": "RUNNING",
                                                                      "worker_id": "broker-b"}  # fmt: skip

            await eventually(running_on_b, 60, "the task running on broker-b's master")
        acked: list[str] = []
        stop = asyncio.Event()

        async def send_all() -> None:
            async with Sender(cluster) as producer:
                n = 0
                while not stop.is_set():
                    n += 1
                    group = GROUPS[n % 2]
                    body = f"{group}-{n}"
                    try:
                        await producer.send_message(
                            producer.message("fo-lines", body.encode()), MessageQueue("fo-lines", group, n % QUEUES)
                        )
                        acked.append(body)
                    except CoreError:
                        await asyncio.sleep(0.1)  # broker-b electing: this one is not acknowledged
                        await producer.cluster.route("fo-lines", refresh=True)
                    await asyncio.sleep(0.005)

        sending = asyncio.get_running_loop().create_task(send_all())
        await asyncio.sleep(KILL_AFTER_S)
        members[0].kill()
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
        assert any(body.startswith("broker-b") for body in acked[at_election:]), "broker-b took sends again"

        async def all_written() -> bool:
            return out.exists() and set(acked) <= set(out.read_text().splitlines())

        await eventually(all_written, 90, "every acknowledged message in the file")
        await asyncio.sleep(2.0)
        written = Counter(out.read_text().splitlines())
        assert not [line for line, count in written.items() if count > 1], "a message written twice"
    finally:
        await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(etcd.stop)
