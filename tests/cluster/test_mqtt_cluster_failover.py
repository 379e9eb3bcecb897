"""MQTT on a cluster with automatic failover underneath: a NameServer, etcd, broker group broker-a (one master) and
broker group broker-b (three `mqgate serve --etcd` members, SYNC_MASTER: two stay after the kill, as
min_in_sync_replicas asks), each with its MQTT door. A paho publisher on
broker-b's master at QoS 1 while that master is killed with SIGKILL: it reconnects to the elected one, and a
subscriber on broker-a receives every PUBACKed message."""

from __future__ import annotations

import asyncio
import time

import aetcd
import pytest

from controller.records import GroupRecords
from tests.cluster.brokers import runtime_info
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import Publisher, wait_until
from tests.cluster.test_mqtt_cluster import Subscriber, connect, mqtt_port, subscribe
from tests.etcd_process import EtcdProcess

pytestmark = pytest.mark.slow

KILL_AFTER_S = 2.0


def sync_state_set(etcd: str) -> frozenset[int]:
    async def read() -> frozenset[int]:
        host, _, port = etcd.rpartition(":")
        async with aetcd.Client(host=host, port=int(port)) as client:
            record = (await GroupRecords(client, CLUSTER, "broker-b").read()).record
            return record.sync_state_set if record is not None else frozenset()

    return asyncio.run(read())


AFTER_ELECTION_S = 5.0


def test_a_subscriber_on_one_group_gets_every_acknowledged_message_through_a_failover_of_the_other(tmp_path):
    etcd = EtcdProcess(tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    subscriber = publisher = None
    try:
        cluster.start_broker("broker-a")
        first = cluster.start_member("broker-b", 1, etcd.address)
        assert first.ready["role"] == "master", first.line
        second = cluster.start_member("broker-b", 2, etcd.address)
        third = cluster.start_member("broker-b", 3, etcd.address)
        assert second.ready["role"] == third.ready["role"] == "slave", (second.line, third.line)
        cluster.wait_registered(("broker-a", "broker-b"))
        wait_until(lambda: sync_state_set(etcd.address) == {1, 2, 3}, 60, "the set of three")
        subscriber = Subscriber(mqtt_port(cluster, "broker-a"), "fx-sub", "af/#")
        publisher = Publisher([member.mqtt_port for member in (first, second, third)])  # type: ignore[attr-defined]
        publisher.thread.start()
        time.sleep(KILL_AFTER_S)
        first.kill()
        wait_until(
            lambda: any(runtime_info(remoting_address(m)).get("brokerRole") != "SLAVE" for m in (second, third)),
            30,
            "a new master",
        )
        acked_at_election = len(publisher.acked)
        time.sleep(AFTER_ELECTION_S)
        publisher.stop.set()
        publisher.thread.join(30)
        acked = list(publisher.acked)
        assert len(acked) > acked_at_election > 0, "sends went on after the election"
        received = subscriber.wait_for(len(acked), 60)
        payloads = [payload for _, payload in received]
        assert set(acked) <= set(payloads), f"lost: {sorted(set(acked) - set(payloads))[:10]}"
        # In order, but for what the publisher sent again after the kill (at least once).
        firsts = list(dict.fromkeys(payloads))
        assert [p for p in firsts if p in set(acked)] == acked
    finally:
        if publisher is not None:
            publisher.stop.set()
        if subscriber is not None:
            subscriber.close()
        cluster.stop()
        etcd.stop()


def test_a_device_on_the_killed_master_moves_its_session_to_another_node_and_loses_nothing(tmp_path):
    etcd = EtcdProcess(tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    publisher = None
    try:
        cluster.start_broker("broker-a")
        members = [cluster.start_member("broker-b", broker_id, etcd.address) for broker_id in (1, 2, 3)]
        assert members[0].ready["role"] == "master", members[0].line
        cluster.wait_registered(("broker-a", "broker-b"))
        wait_until(lambda: sync_state_set(etcd.address) == {1, 2, 3}, 60, "the set of three")
        # The device's persistent session is on broker-b's master; the publisher on broker-a.
        device, first = connect(members[0].mqtt_port, "fx-device", clean=False)  # type: ignore[attr-defined]
        subscribe(device, "af/#")
        publisher = Publisher([mqtt_port(cluster, "broker-a")])
        publisher.thread.start()
        time.sleep(KILL_AFTER_S)
        members[0].kill()
        device.loop_stop()
        # The device reconnects to the node it can reach, as a device given several addresses does.
        deadline = time.monotonic() + 60
        moved = None
        while moved is None:
            try:
                moved, state = connect(mqtt_port(cluster, "broker-a"), "fx-device", clean=False)
            except AssertionError:
                assert time.monotonic() < deadline, "the session did not move within 60 s"
                time.sleep(0.5)
        time.sleep(AFTER_ELECTION_S)
        publisher.stop.set()
        publisher.thread.join(30)
        acked = set(publisher.acked)
        # What reached the device before the kill, and what its moved session got (again, some: at least once).
        before = {payload for _, payload in first["received"]}

        def missing() -> set[bytes]:
            return acked - before - {payload for _, payload in state["received"]}

        deadline = time.monotonic() + 60
        while missing() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not missing(), f"{len(missing())} of {len(acked)} lost: {sorted(missing())[:10]}"
        moved.disconnect()
        moved.loop_stop()
    finally:
        if publisher is not None:
            publisher.stop.set()
        cluster.stop()
        etcd.stop()
