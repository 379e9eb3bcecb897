"""MQTT on a cluster of separate processes (a NameServer and two broker groups, each `mqgate serve` with its MQTT
door): paho clients on different nodes, as devices would connect to any node of a load-balanced address."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.cluster.processes import ClusterProcesses

pytestmark = pytest.mark.slow

MESSAGES = 1000
RECEIVED_WITHIN_S = 60.0


def mqtt_port(cluster: ClusterProcesses, group: str) -> int:
    return int(cluster.brokers[group].ready["mqtt"].rpartition(":")[2])


class Subscriber:
    """paho subscribed at QoS 1 to `topic_filter`: what it received, in order."""

    def __init__(self, port: int, client_id: str, topic_filter: str, clean: bool = True) -> None:
        self.received: list[tuple[str, bytes]] = []
        self.subscribed = threading.Event()
        self.lock = threading.Lock()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *args: self.subscribed.set()
        self.client.on_connect = lambda client, *args: client.subscribe(topic_filter, qos=1)
        self.client.connect("127.0.0.1", port, keepalive=30)
        self.client.loop_start()
        assert self.subscribed.wait(30), "no SUBACK"

    def _on_message(self, client: paho.Client, userdata: object, message: paho.MQTTMessage) -> None:
        with self.lock:
            self.received.append((message.topic, message.payload))

    def wait_for(self, count: int, timeout_s: float = RECEIVED_WITHIN_S) -> list[tuple[str, bytes]]:
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        with self.lock:
            return list(self.received)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def publish(port: int, client_id: str, topic: str, payloads: list[bytes]) -> None:
    """Publish at QoS 1, each PUBACKed before the call returns."""
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
    client.connect("127.0.0.1", port, keepalive=30)
    client.loop_start()
    try:
        infos = [client.publish(topic, payload, qos=1) for payload in payloads]
        for info in infos:
            info.wait_for_publish(30)
            assert info.is_published()
    finally:
        client.disconnect()
        client.loop_stop()


def test_qos1_messages_published_on_one_node_reach_a_subscriber_on_the_other_in_order(cluster: ClusterProcesses):
    subscriber = Subscriber(mqtt_port(cluster, "broker-a"), "cx-sub", "cx/+/data")
    try:
        payloads = [f"m-{n}".encode() for n in range(MESSAGES)]
        publish(mqtt_port(cluster, "broker-b"), "cx-pub", "cx/dev1/data", payloads)
        received = subscriber.wait_for(MESSAGES)
        assert [payload for _, payload in received] == payloads
        assert {topic for topic, _ in received} == {"cx/dev1/data"}
        time.sleep(1.0)  # nothing more comes (once each)
        assert len(subscriber.received) == MESSAGES
    finally:
        subscriber.close()


def test_a_subscriber_gets_what_both_nodes_publish_and_a_local_one_too(cluster: ClusterProcesses):
    on_a = Subscriber(mqtt_port(cluster, "broker-a"), "both-a", "both/#")
    on_b = Subscriber(mqtt_port(cluster, "broker-b"), "both-b", "both/#")
    try:
        from_a = [f"a-{n}".encode() for n in range(100)]
        from_b = [f"b-{n}".encode() for n in range(100)]
        publish(mqtt_port(cluster, "broker-a"), "both-pa", "both/x", from_a)
        publish(mqtt_port(cluster, "broker-b"), "both-pb", "both/y", from_b)
        for subscriber in (on_a, on_b):
            received = subscriber.wait_for(200)
            assert [p for t, p in received if t == "both/x"] == from_a
            assert [p for t, p in received if t == "both/y"] == from_b
    finally:
        on_a.close()
        on_b.close()


def connect(port: int, client_id: str, clean: bool, **options) -> tuple[paho.Client, dict]:
    """A paho client connected (3.1.1); `state` holds its CONNACK flags, what it received and how it ended."""
    state: dict = {"received": [], "present": None, "disconnected": threading.Event(), "connected": threading.Event()}
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)

    def on_connect(client, userdata, flags, reason, properties):
        state["present"] = flags.session_present
        state["connected"].set()

    client.on_connect = on_connect
    client.on_message = lambda client, userdata, message: state["received"].append((message.topic, message.payload))
    client.on_disconnect = lambda *args: state["disconnected"].set()
    if "will" in options:
        client.will_set(*options["will"], qos=1)
    client.connect("127.0.0.1", port, keepalive=30)
    client.loop_start()
    assert state["connected"].wait(30), "no CONNACK"
    return client, state


def subscribe(client: paho.Client, topic_filter: str) -> None:
    done = threading.Event()
    client.on_subscribe = lambda *args: done.set()
    client.subscribe(topic_filter, qos=1)
    assert done.wait(30), "no SUBACK"


def wait_until(condition, timeout_s: float = RECEIVED_WITHIN_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_persistent_session_moves_to_the_other_node_with_what_was_queued_for_it(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    client, state = connect(port_a, "mover", clean=False)
    subscribe(client, "mv/#")
    client.disconnect()
    client.loop_stop()
    # Queued while it is away: on both groups.
    on_b = [f"b-{n}".encode() for n in range(200)]
    on_a = [f"a-{n}".encode() for n in range(100)]
    publish(port_b, "mv-pub-b", "mv/b", on_b)
    publish(port_a, "mv-pub-a", "mv/a", on_a)
    client, state = connect(port_b, "mover", clean=False)
    try:
        assert state["present"] is True
        wait_until(lambda: len(state["received"]) >= 300)
        received = list(state["received"])
        assert [p for t, p in received if t == "mv/b"] == on_b
        assert [p for t, p in received if t == "mv/a"] == on_a
        # And what is published now, on either node, reaches it on its new node.
        publish(port_a, "mv-pub-a2", "mv/a", [b"after"])
        wait_until(lambda: b"after" in [p for _, p in state["received"]], 30)
        assert [p for _, p in state["received"]].count(b"after") == 1
    finally:
        client.disconnect()
        client.loop_stop()


def test_a_client_that_connects_to_the_other_node_takes_its_session_over(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    first, first_state = connect(port_a, "taken", clean=False)
    subscribe(first, "tk/#")
    second, second_state = connect(port_b, "taken", clean=False)
    try:
        assert first_state["disconnected"].wait(10), "the first connection was not closed"
        assert second_state["present"] is True
        publish(port_a, "tk-pub", "tk/x", [b"one", b"two"])
        wait_until(lambda: len(second_state["received"]) >= 2, 30)
        assert [p for _, p in second_state["received"]] == [b"one", b"two"]
        assert first_state["received"] == []
    finally:
        first.loop_stop()
        second.disconnect()
        second.loop_stop()


def test_a_will_published_on_one_node_reaches_a_subscriber_on_the_other_once(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    watcher = Subscriber(port_b, "will-watcher", "will/#")
    device, _ = connect(port_a, "will-device", clean=True, will=("will/device", b"gone"))
    try:
        device.loop_stop()
        device.socket().close()  # the connection drops without a DISCONNECT
        received = watcher.wait_for(1, 30)
        time.sleep(2.0)
        assert watcher.received == [("will/device", b"gone")] == received
    finally:
        watcher.close()


def test_a_retained_message_set_on_one_node_is_what_a_new_subscriber_on_the_other_gets(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    setter, _ = connect(port_b, "rt-setter", clean=True)
    try:
        setter.publish("rt/state", b"on", qos=1, retain=True).wait_for_publish(30)
        late, state = connect(port_a, "rt-late", clean=True)
        subscribe(late, "rt/#")
        wait_until(lambda: len(state["received"]) >= 1, 30)
        assert state["received"] == [("rt/state", b"on")]
        late.disconnect()
        late.loop_stop()
        # Cleared on the other node: a new subscriber on the first gets nothing.
        cleaner, _ = connect(port_a, "rt-cleaner", clean=True)
        cleaner.publish("rt/state", b"", qos=1, retain=True).wait_for_publish(30)
        cleaner.disconnect()
        cleaner.loop_stop()
        later, state = connect(port_b, "rt-later", clean=True)
        subscribe(later, "rt/#")
        time.sleep(1.0)
        assert state["received"] == []
        later.disconnect()
        later.loop_stop()
    finally:
        setter.disconnect()
        setter.loop_stop()


def test_the_admin_api_and_metrics_show_where_sessions_and_filters_are(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    held, _ = connect(port_a, "view-held", clean=False)
    subscribe(held, "view/a/#")
    other, _ = connect(port_b, "view-other", clean=True)
    subscribe(other, "view/b/+")
    try:
        node_a = cluster.brokers["broker-a"]
        with urllib.request.urlopen(f"{node_a.http_url}/admin/mqtt/cluster", timeout=30) as response:
            view = json.loads(response.read())
        assert view["clustered"] is True and view["group"] == "broker-a"
        assert view["groups"] == ["broker-a", "broker-b"]
        assert view["sessions"]["view-held"] == "broker-a"
        filters = {f["topic_filter"]: f["groups"] for f in view["filters"]}
        assert filters["view/a/#"] == ["broker-a"] and filters["view/b/+"] == ["broker-b"]
        with urllib.request.urlopen(f"{node_a.http_url}/admin/clients", timeout=30) as response:
            clients = {entry["client_id"]: entry for entry in json.loads(response.read())["mqtt"]}
        assert clients["view-held"]["node"] == "broker-a" and "view-other" not in clients
        with urllib.request.urlopen(f"{node_a.http_url}/metrics", timeout=30) as response:
            metrics = response.read().decode()
        assert "mqgate_mqtt_cluster_groups 2.0" in metrics
    finally:
        for client in (held, other):
            client.disconnect()
            client.loop_stop()


def test_shared_subscription_members_on_both_nodes_take_each_message_once(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    members = [Subscriber(port, f"sh-{n}", "$share/workers/sh/#") for n, port in enumerate((port_a, port_b))]
    try:
        on_a = [f"a-{n}".encode() for n in range(500)]
        on_b = [f"b-{n}".encode() for n in range(500)]
        publish(port_a, "sh-pub-a", "sh/a", on_a)
        publish(port_b, "sh-pub-b", "sh/b", on_b)
        wait_until(lambda: sum(len(member.received) for member in members) >= 1000)
        time.sleep(1.0)
        received = [payload for member in members for _, payload in member.received]
        assert sorted(received) == sorted(on_a + on_b)  # each once: none twice, none lost
        assert all(member.received for member in members)  # both took some
    finally:
        for member in members:
            member.close()


def test_a_stream_published_on_one_node_is_split_over_shared_members_on_both(cluster: ClusterProcesses):
    port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
    members = [Subscriber(port, f"split-{n}", "$share/split/sp/#") for n, port in enumerate((port_a, port_b))]
    try:
        payloads = [f"s-{n}".encode() for n in range(1000)]
        publish(port_b, "split-pub", "sp/b", payloads)
        wait_until(lambda: sum(len(member.received) for member in members) >= 1000)
        time.sleep(1.0)
        received = [payload for member in members for _, payload in member.received]
        assert sorted(received) == sorted(payloads)  # each once: none twice, none lost
        shares = [len(member.received) for member in members]
        assert min(shares) >= 300, shares  # spread over both nodes' members (in turn: about half each)
        # The member on broker-a goes: what broker-b stores from then on goes to the member left, on broker-b.
        members[0].close()
        time.sleep(1.0)
        more = [f"t-{n}".encode() for n in range(200)]
        publish(port_b, "split-pub", "sp/b", more)
        wait_until(lambda: sum(1 for _, p in members[1].received if p.startswith(b"t-")) >= 200)
        assert sorted(p for _, p in members[1].received if p.startswith(b"t-")) == sorted(more)
    finally:
        for member in members:
            member.close()


def test_a_shared_group_with_members_on_one_node_gets_what_the_other_node_stores(cluster: ClusterProcesses):
    member = Subscriber(mqtt_port(cluster, "broker-a"), "sh-only", "$share/lonely/shx/#")
    try:
        payloads = [f"x-{n}".encode() for n in range(300)]
        publish(mqtt_port(cluster, "broker-b"), "shx-pub", "shx/b", payloads)
        received = member.wait_for(300)
        assert [payload for _, payload in received] == payloads
    finally:
        member.close()


def test_when_a_node_with_shared_members_dies_the_members_left_get_the_whole_stream(tmp_path):
    cluster = ClusterProcesses(tmp_path)
    survivor = None
    try:
        port_a, port_b = mqtt_port(cluster, "broker-a"), mqtt_port(cluster, "broker-b")
        doomed = Subscriber(port_a, "dies-a", "$share/dies/dd/#")
        survivor = Subscriber(port_b, "dies-b", "$share/dies/dd/#")
        cluster.brokers["broker-a"].kill()  # its member's connection dies with it; its group leaves the routes
        doomed.client.loop_stop()
        time.sleep(3.0)  # the live groups are asked every second
        payloads = [f"d-{n}".encode() for n in range(300)]
        publish(port_b, "dies-pub", "dd/b", payloads)
        received = survivor.wait_for(300)
        assert sorted(payload for _, payload in received) == sorted(payloads)
    finally:
        if survivor is not None:
            survivor.close()
        cluster.stop()
