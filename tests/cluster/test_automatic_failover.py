"""Automatic failover, as users run it: etcd, a NameServer and one broker group of three `mqgate serve` processes
with `--etcd` (SYNC_MASTER), each its own process on loopback. `kill -9` of the master under load from the C++
RocketMQ 4 client, the RocketMQ 5 Python client (gRPC) and paho at QoS 1: a slave becomes master, every SEND_OK,
SendReceipt and PUBACK is on it, in its queue, and the killed broker comes back as a slave of the new master."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import aetcd
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from controller.records import GroupRecords
from tests.broker_remoting import cpp_clients
from tests.cluster.brokers import queue_messages, runtime_info, wait_topics
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.etcd_process import EtcdProcess
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

GROUP = "broker-a"
SENDS = 600
INTERVAL_S = 0.01
KILL_AFTER_S = 2.0
ELECTED_WITHIN_S = 30.0


def record(etcd: str):
    async def read():
        host, _, port = etcd.rpartition(":")
        async with aetcd.Client(host=host, port=int(port)) as client:
            return (await GroupRecords(client, CLUSTER, GROUP).read()).record

    return asyncio.run(read())


def wait_until(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.2)


@pytest.fixture
def group(tmp_path) -> Iterator[tuple[ClusterProcesses, EtcdProcess]]:
    etcd = EtcdProcess(tmp_path / "etcd")
    cluster = ClusterProcesses(tmp_path, groups=())
    try:
        first = cluster.start_member(GROUP, 1, etcd.address)
        assert first.ready["role"] == "master", first.line
        for broker_id in (2, 3):
            member = cluster.start_member(GROUP, broker_id, etcd.address)
            assert member.ready["role"] == "slave" and member.ready["master"] == "1", member.line
        wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3}, 60, "the set of three")
        yield cluster, etcd
    finally:
        cluster.stop()
        etcd.stop()


class Publisher:
    """paho at QoS 1 that, when its broker goes away, connects to the next of the group's MQTT ports."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.acked: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _connect(self, attempt: int) -> paho.Client | None:
        port = self.ports[attempt % len(self.ports)]
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id="af-device", clean_session=False)
        try:
            client.connect("127.0.0.1", port, keepalive=10)
        except OSError:
            return None
        client.loop_start()
        deadline = time.monotonic() + 3
        while not client.is_connected() and time.monotonic() < deadline:  # the CONNACK
            time.sleep(0.01)
        if not client.is_connected():
            client.loop_stop()
            client.disconnect()
            return None
        return client

    def _run(self) -> None:
        attempt, n, client = 0, 0, None
        while not self.stop.is_set():
            if client is None:
                client = self._connect(attempt)
                attempt += 1
                if client is None:
                    time.sleep(0.1)
                    continue
            payload = f"mqtt-{n}".encode()
            try:
                info = client.publish("af/data", payload, qos=1)
                info.wait_for_publish(3)
                published = info.is_published()
            except (RuntimeError, ValueError):  # not sent: the connection is gone
                published = False
            if published:
                self.acked.append(payload)
                n += 1
                time.sleep(INTERVAL_S)
            else:
                client.loop_stop()
                client.disconnect()
                client = None
        if client is not None:
            client.loop_stop()
            client.disconnect()


class GrpcSender:
    """The official RocketMQ 5 Python client (gRPC) sending one message after another; its access point lists the
    group's three gRPC ports (only the master's is open)."""

    def __init__(self, ports: list[int], topic: str) -> None:
        self.config = ClientConfiguration(";".join(f"127.0.0.1:{port}" for port in ports), Credentials("", ""),
                                          request_timeout=3)  # fmt: skip
        self.topic = topic
        self.acked: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        producer = Producer(self.config, (self.topic,))
        producer.startup()
        n = 0
        try:
            while not self.stop.is_set():
                message = Message()
                message.topic, message.body = self.topic, f"grpc-{n}".encode()
                with contextlib.suppress(Exception):  # refused or unreachable: not acknowledged
                    producer.send(message)
                    self.acked.append(f"grpc-{n}")
                n += 1
                time.sleep(INTERVAL_S)
        finally:
            producer.shutdown()


def new_master(cluster: ClusterProcesses, killed: str) -> ServeProcess:
    def elected():
        for name, serve in cluster.brokers.items():
            if name != killed and runtime_info(remoting_address(serve)).get("brokerRole") != "SLAVE":
                return serve
        return None

    return wait_until(elected, ELECTED_WITHIN_S, "a new master")


def test_kill_9_of_the_master_elects_a_slave_that_holds_every_acknowledged_message(group):
    cluster, etcd = group
    old = cluster.brokers[f"{GROUP}-n1"]
    cluster.admin("topic", "create", "af_cpp", "--cluster", CLUSTER, "--queues", "4")
    cluster.admin("topic", "create", "af_grpc", "--cluster", CLUSTER, "--queues", "4")
    publisher = Publisher([serve.mqtt_port for serve in cluster.brokers.values()])  # type: ignore[attr-defined]
    grpc = GrpcSender([serve.grpc_port for serve in cluster.brokers.values()], "af_grpc")  # type: ignore[attr-defined]
    for name in (f"{GROUP}-n2", f"{GROUP}-n3"):
        wait_topics(remoting_address(cluster.brokers[name]), "af_cpp", "af_grpc")  # slaves copy topics every 10 s

    sender = cpp_clients.start(cluster.namesrv_addr, "send", "af_cpp", "--count", SENDS, "--interval", INTERVAL_S,
                               "--keep-going", "--body", "cpp", "--timeout-ms", 3000)  # fmt: skip
    publisher.thread.start()
    grpc.thread.start()
    time.sleep(KILL_AFTER_S)
    killed_at = time.monotonic()
    old.kill()
    master = new_master(cluster, f"{GROUP}-n1")
    elected_after = time.monotonic() - killed_at
    wait_until(lambda: len(publisher.acked) > 0 and publisher.thread.is_alive(), 5, "publishing")
    before = len(publisher.acked)
    wait_until(lambda: len(publisher.acked) > before + 20, 30, "PUBACKs from the new master")
    publisher.stop.set()
    publisher.thread.join()
    grpc.stop.set()
    grpc.thread.join()
    lines = cpp_clients.finish(sender)

    now = record(etcd.address)
    assert now.master_epoch == 2 and now.master_id != 1, now
    assert elected_after < ELECTED_WITHIN_S
    address = remoting_address(master)
    sent_ok = {line["body"] for line in lines if line.get("status") == 0}
    assert len(sent_ok) >= 20, len(sent_ok)
    on_master = {m.body.decode() for q in range(4) for m in queue_messages(address, "af_cpp", q)}
    missing = sent_ok - on_master
    assert not missing, f"{len(missing)} SEND_OK messages are not on the new master, e.g. {sorted(missing)[:5]}"
    mqtt_on_master = {m.body for q in range(4) for m in queue_messages(address, "af", q)}
    missing_mqtt = set(publisher.acked) - mqtt_on_master
    assert not missing_mqtt, f"{len(missing_mqtt)} PUBACKed messages are not on the new master"
    assert len(grpc.acked) >= 20, len(grpc.acked)
    grpc_on_master = {m.body.decode() for q in range(4) for m in queue_messages(address, "af_grpc", q)}
    missing_grpc = set(grpc.acked) - grpc_on_master
    assert not missing_grpc, f"{len(missing_grpc)} gRPC SendReceipts are not on the new master"

    # The killed broker comes back as a slave of the new master, and copies its log.
    back = cluster.start_member(GROUP, 1, etcd.address)
    assert back.ready["role"] == "slave" and back.ready["master"] == str(now.master_id), back.line


ROUNDS = 10


def test_ten_kills_each_elect_a_new_master_and_lose_nothing_acknowledged(group):
    """Ten times: the C++ client sends, paho publishes at QoS 1, the master is killed; a member of the set is
    elected, the killed broker comes back as a slave (cutting what it held past the new master's log) and rejoins
    the set. At the end the last master holds every SEND_OK and every PUBACK of every round, and the C++ client's
    consumer reads the whole stream from it."""
    cluster, etcd = group
    cluster.admin("topic", "create", "af10", "--cluster", CLUSTER, "--queues", "4")
    for name in (f"{GROUP}-n2", f"{GROUP}-n3"):
        wait_until(lambda name=name: has_topics(cluster.brokers[name]), 30, f"{name} copies the topic")
    publisher = Publisher([serve.mqtt_port for serve in cluster.brokers.values()])  # type: ignore[attr-defined]
    publisher.thread.start()
    sent_ok: set[str] = set()
    masters = []
    try:
        for round_number in range(ROUNDS):
            current = wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3} and r,
                                 90, f"round {round_number}: the set of three")  # fmt: skip
            masters.append(current.master_id)
            sender = cpp_clients.start(cluster.namesrv_addr, "send", "af10", "--count", 100, "--interval", 0.01,
                                       "--keep-going", "--body", f"r{round_number}", "--timeout-ms", 3000)  # fmt: skip
            time.sleep(1.0)
            killed = f"{GROUP}-n{current.master_id}"
            cluster.brokers[killed].kill()
            lines = cpp_clients.finish(sender)
            sent_ok |= {line["body"] for line in lines if line.get("status") == 0}
            epoch = current.master_epoch
            after = wait_until(lambda epoch=epoch: (r := record(etcd.address)) and r.master_epoch > epoch and r,
                               ELECTED_WITHIN_S, f"round {round_number}: a new master")  # fmt: skip
            assert after.master_id != current.master_id and after.master_id in current.sync_state_set
            back = cluster.start_member(GROUP, current.master_id, etcd.address)
            assert back.ready["role"] == "slave", back.line
        final = wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3} and r, 90, "the end")
    finally:
        publisher.stop.set()
        publisher.thread.join()

    assert final.master_epoch == ROUNDS + 1
    assert len(set(masters)) > 1  # the role moved around the group
    master = cluster.brokers[f"{GROUP}-n{final.master_id}"]
    address = remoting_address(master)
    held = {m.body.decode() for q in range(4) for m in queue_messages(address, "af10", q)}
    assert len(sent_ok) >= ROUNDS * 20, len(sent_ok)
    missing = sent_ok - held
    assert not missing, f"{len(missing)} SEND_OK messages are not on the last master, e.g. {sorted(missing)[:5]}"
    assert len(publisher.acked) >= ROUNDS * 10, len(publisher.acked)
    mqtt_held = {m.body for q in range(4) for m in queue_messages(address, "af", q)}
    missing_mqtt = set(publisher.acked) - mqtt_held
    assert not missing_mqtt, f"{len(missing_mqtt)} PUBACKed messages are not on the last master"
    consumed = cpp_clients.run(cluster.namesrv_addr, "consume", "af10", "af10_cpp", "--seconds", 120,
                               "--expect", len(held))  # fmt: skip
    assert sent_ok <= {line["body"] for line in consumed}


def has_topics(serve: ServeProcess) -> bool:
    from tests.cluster.brokers import has_topic

    return has_topic(remoting_address(serve), "af10")


def test_an_elected_broker_whose_mqtt_port_is_taken_opens_it_once_it_is_free(group):
    """A door of a term that cannot start (its port taken by another process while the broker was a slave) is
    logged and tried again every 5 s, and opens once the port is free; the broker does not stop watching its role."""
    cluster, etcd = group
    holders = []
    try:
        for name in (f"{GROUP}-n2", f"{GROUP}-n3"):
            holder = socket.socket()
            holder.bind(("0.0.0.0", cluster.brokers[name].mqtt_port))  # type: ignore[attr-defined]
            holder.listen()
            holders.append(holder)
        epoch = record(etcd.address).master_epoch
        cluster.brokers[f"{GROUP}-n1"].kill()
        elected = wait_until(lambda: (r := record(etcd.address)) and r.master_epoch > epoch and r, ELECTED_WITHIN_S,
                             "a new master")  # fmt: skip
        master = cluster.brokers[f"{GROUP}-n{elected.master_id}"]
        wait_until(lambda: "could not start" in master.stderr(), 30, "the elected broker says its doors did not start")
    finally:
        for holder in holders:
            holder.close()
    wait_until(lambda: publishes(master.mqtt_port), 30, "MQTT opens once its port is free")  # type: ignore[attr-defined]
    # It still follows its role: killed in turn, the other member is elected and opens its doors.
    epoch = elected.master_epoch
    cluster.start_member(GROUP, 1, etcd.address)
    wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3}, 90, "the set of three")
    master.kill()
    after = wait_until(lambda: (r := record(etcd.address)) and r.master_epoch > epoch and r, ELECTED_WITHIN_S,
                       "a newer master")  # fmt: skip
    wait_until(lambda: publishes(cluster.brokers[f"{GROUP}-n{after.master_id}"].mqtt_port), 30, "its MQTT")  # type: ignore[attr-defined]


def publishes(port: int) -> bool:
    """Whether a QoS 1 publish to the MQTT listener on `port` is acknowledged."""
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"probe-{port}")
    try:
        client.connect("127.0.0.1", port, keepalive=10)
    except OSError:
        return False
    client.loop_start()
    try:
        info = client.publish("af/probe", b"x", qos=1)
        info.wait_for_publish(5)
        return info.is_published()
    except (RuntimeError, ValueError):
        return False
    finally:
        client.loop_stop()
        client.disconnect()
