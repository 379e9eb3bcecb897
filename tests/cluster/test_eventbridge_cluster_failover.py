"""EventBridge on a cluster with automatic failover underneath: a NameServer, etcd, broker group broker-a (one
master) and broker group broker-b (three `mqgate serve --etcd` members, SYNC_MASTER). A rule's target runs on
broker-b's master; events are put on both groups while that master is killed with SIGKILL. The elected master runs
EventBridge for its term (the others answer 503 meanwhile), takes the target over, and every event a PutEvents
answer acknowledged reaches the target."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from peers.owners import owner
from tests.cluster.brokers import runtime_info
from tests.cluster.processes import ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import wait_until
from tests.cluster.test_mqtt_cluster_failover import sync_state_set
from tests.etcd_process import EtcdProcess
from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

GROUPS = ["broker-a", "broker-b"]
KILL_AFTER_S = 2.0
AFTER_ELECTION_S = 5.0


def rule_run_by(group: str) -> str:
    """A rule name whose target's node is `group`'s while both groups live."""
    return next(name for n in range(1000) if owner(f"default/{(name := f'fo-{n}')}/hook", GROUPS) == group)


class Putter:
    """PutEvents, one event a request, on broker-a and on whichever broker-b member answers (the master; a slave
    answers 503, a killed one not at all): the ids acknowledged."""

    def __init__(self, on_a: ServeProcess, b_members: list[ServeProcess]) -> None:
        self.on_a = on_a
        self.b_members = b_members
        self.acked: list[str] = []
        self.attempted: set[str] = set()
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        n = 0
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            while not self.stopped.is_set():
                n += 1
                event = {"specversion": "1.0", "id": f"e-{n}", "source": "sensors", "type": "t", "data": {"n": n}}
                targets = [self.on_a] if n % 2 else self.b_members
                self.attempted.add(event["id"])
                for serve in targets:
                    if await self._put(session, serve, event):
                        self.acked.append(event["id"])
                        break
                else:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.005)

    @staticmethod
    async def _put(session: aiohttp.ClientSession, serve: ServeProcess, event: dict[str, Any]) -> bool:
        try:
            async with session.post(
                serve.http_url + "/buses/default/events",
                data=json.dumps(event),
                headers={"Content-Type": "application/cloudevents+json"},
            ) as response:
                if response.status != 200:
                    return False
                return (await response.json())["FailedEntryCount"] == 0
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False


async def test_a_target_on_the_killed_master_moves_to_the_elected_one_and_loses_nothing(tmp_path):
    target = await TargetServer().start()
    etcd = await asyncio.to_thread(EtcdProcess, tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    try:
        await asyncio.to_thread(cluster.start_broker, "broker-a")
        members = [
            await asyncio.to_thread(cluster.start_member, "broker-b", broker_id, etcd.address)
            for broker_id in (1, 2, 3)
        ]
        assert members[0].ready["role"] == "master", members[0].line
        await asyncio.to_thread(cluster.wait_registered, tuple(GROUPS))
        await asyncio.to_thread(wait_until, lambda: sync_state_set(etcd.address) == {1, 2, 3}, 60, "the set of 3")
        rule = rule_run_by("broker-b")
        definition = {
            "pattern": {"source": ["sensors"]},
            "targets": [{"id": "hook", "type": "http", "url": target.url, "mode": "structured"}],
        }
        async with aiohttp.ClientSession() as session:
            rule_url = cluster.brokers["broker-a"].http_url + f"/rules/default/{rule}"
            async with session.put(rule_url, json=definition) as r:
                assert r.status == 201, await r.text()
            # A slave's EventBridge does not run: it says where it does.
            async with session.get(members[1].http_url + "/rules") as r:
                assert r.status == 503, await r.text()
            for _ in range(200):
                async with session.get(members[0].http_url + f"/rules/default/{rule}") as r:
                    if r.status == 200 and (await r.json())["targets"][0]["state"] == "RUNNING":
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("broker-b's master does not run the target")
        putter = Putter(cluster.brokers["broker-a"], members)
        putting = asyncio.get_running_loop().create_task(putter.run())
        await asyncio.sleep(KILL_AFTER_S)
        members[0].kill()
        await asyncio.to_thread(
            wait_until,
            lambda: any(runtime_info(remoting_address(m)).get("brokerRole") != "SLAVE" for m in members[1:]),
            30,
            "a new master",
        )
        acked_at_election = len(putter.acked)
        await asyncio.sleep(AFTER_ELECTION_S)
        putter.stopped.set()
        await putting
        acked = list(putter.acked)
        assert len(acked) > acked_at_election > 0, "puts went on after the election"
        on_b = [event_id for event_id in acked if int(event_id.split("-")[1]) % 2 == 0]
        assert on_b, "some events were put on broker-b"
        await target.wait_for_all(acked, lambda received: received.attributes["id"], timeout_s=90)
        # Nothing else: an event whose answer the kill cut off may have been stored (and is delivered) all the same.
        assert set(target.ids()) <= putter.attempted
    finally:
        await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(etcd.stop)
        await target.stop()
