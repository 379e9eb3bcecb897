"""A SYNC_MASTER and its slave, separate processes: `kill -9` of the master under load from the C++ RocketMQ 4 client
and from paho at QoS 1, then every SEND_OK and every PUBACK is read back from the slave."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.broker_remoting import cpp_clients
from tests.cluster.brokers import find_by_id, queue_messages, wait_topics
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address, sync_master_with_slave
from tests.serve_process import mqtt_client

pytestmark = pytest.mark.slow

SENDS = 400
INTERVAL_S = 0.01
KILL_AFTER_S = 2.0


@pytest.fixture
def pair(tmp_path) -> Iterator[ClusterProcesses]:
    with sync_master_with_slave(tmp_path) as cluster:
        yield cluster


def test_every_send_ok_and_puback_is_on_the_slave_after_a_kill_9_of_the_master(pair: ClusterProcesses):
    master, slave = pair.brokers["broker-a"], pair.brokers["broker-a-s1"]
    pair.admin("topic", "create", "sm_cpp", "--cluster", CLUSTER, "--queues", "4")
    publisher = mqtt_client(master, "sm-device")
    acked: set[int] = set()
    publisher.on_publish = lambda client, userdata, mid, reason_code, properties: acked.add(mid)
    publisher.publish("sm/warm-up", b"w", qos=1).wait_for_publish(10)
    wait_topics(remoting_address(slave), "sm_cpp", "sm")  # the slave copies its master's topics every 10 s

    payloads: dict[int, bytes] = {}
    stop = threading.Event()

    def publish() -> None:
        n = 0
        while not stop.is_set():
            payload = f"mqtt-{n}".encode()
            info = publisher.publish("sm/data", payload, qos=1)
            payloads[info.mid] = payload
            n += 1
            time.sleep(INTERVAL_S)

    mqtt_thread = threading.Thread(target=publish)
    sender = cpp_clients.start(pair.namesrv_addr, "send", "sm_cpp", "--count", SENDS, "--interval", INTERVAL_S,
                               "--keep-going", "--body", "cpp", "--timeout-ms", 3000)  # fmt: skip
    mqtt_thread.start()
    time.sleep(KILL_AFTER_S)
    master.kill()
    stop.set()
    mqtt_thread.join()
    lines = cpp_clients.finish(sender)
    publisher.loop_stop()

    sent_ok = {line["body"] for line in lines if line.get("status") == 0}
    pubacked = {payloads[mid] for mid in acked if mid in payloads}
    assert len(sent_ok) >= 20 and len(pubacked) >= 20, (len(sent_ok), len(pubacked))
    address = remoting_address(slave)  # the master is dead: its slave serves every read
    on_slave = {m.body.decode() for q in range(4) for m in queue_messages(address, "sm_cpp", q)}
    missing = sent_ok - on_slave
    assert not missing, f"{len(missing)} SEND_OK messages are not on the slave, e.g. {sorted(missing)[:5]}"
    # And by id, as an operator looks one up: every SEND_OK's msgId (its UNIQ_KEY) is in the slave's index.
    for line in (line for line in lines if line.get("status") == 0):
        found = find_by_id(address, "sm_cpp", line["msg_id"])
        assert [m.body.decode() for m in found] == [line["body"]], line
    mqtt_on_slave = {m.body for q in range(4) for m in queue_messages(address, "sm", q)}
    missing_mqtt = pubacked - mqtt_on_slave
    assert not missing_mqtt, f"{len(missing_mqtt)} PUBACKed messages are not on the slave"
