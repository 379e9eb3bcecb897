"""The MQTT gateway end to end: `mqgate serve` on a free port, paho and mosquitto clients."""

from __future__ import annotations

import socket
import subprocess
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from .conftest import Client


@pytest.mark.parametrize("version", [paho.MQTTv311, paho.MQTTv5])
def test_qos_0_1_2_through_wildcards(server, version):
    sub = Client(server, "sub", version)
    assert sub.subscribe([("sensors/+/temp", 2), ("sensors/#", 1)])
    pub = Client(server, "pub", version)
    for qos in (0, 1, 2):
        pub.publish(f"sensors/dev{qos}/temp", b"t%d" % qos, qos=qos)
    got = sub.receive(3)
    assert [(m.topic, m.payload, m.qos) for m in got] == [
        ("sensors/dev0/temp", b"t0", 0),
        ("sensors/dev1/temp", b"t1", 1),
        ("sensors/dev2/temp", b"t2", 2),  # overlapping filters: once, at the highest granted QoS
    ]
    pub.publish("sensors/other", b"o", qos=2)
    [other] = sub.receive(1)
    assert (other.topic, other.qos) == ("sensors/other", 1)  # downgraded to the granted QoS
    assert sub.nothing_more()
    sub.disconnect()
    pub.disconnect()


def test_order_is_kept_per_topic_under_load(server):
    sub = Client(server, "sub")
    sub.subscribe("load/#", 1)
    pub = Client(server, "pub")
    for n in range(500):
        pub.paho.publish(f"load/t{n % 3}", b"%d" % n, qos=1)
    got = sub.receive(500, timeout=30)
    for topic in ("load/t0", "load/t1", "load/t2"):
        numbers = [int(m.payload) for m in got if m.topic == topic]
        assert numbers == sorted(numbers) and len(numbers) in (166, 167)


def test_retained_messages_are_kept_replaced_cleared_and_survive_restart(server_factory):
    server = server_factory()
    pub = Client(server, "pub")
    pub.publish("state/a", b"old", qos=1, retain=True)
    pub.publish("state/a", b"new", qos=1, retain=True)
    pub.publish("state/b", b"gone", qos=1, retain=True)
    pub.publish("state/b", b"", qos=1, retain=True)  # an empty retained payload clears
    pub.disconnect()
    sub = Client(server, "sub")
    sub.subscribe("state/#", 1)
    [kept] = sub.receive(1)
    assert (kept.topic, kept.payload, kept.retain) == ("state/a", b"new", True)
    assert sub.nothing_more()
    sub.disconnect()
    server.stop()
    server = server_factory(data_dir=server.data_dir)
    late = Client(server, "late")
    late.subscribe("state/+", 0)
    [again] = late.receive(1)
    assert (again.topic, again.payload, again.retain) == ("state/a", b"new", True)
    late.disconnect()
    server.stop()


def test_live_messages_do_not_carry_the_retain_flag_unless_retain_as_published(server):
    v3 = Client(server, "v3")
    v3.subscribe("live/#", 0)
    v5 = Client(server, "v5", paho.MQTTv5)
    v5.subscribe("live/#", options=SubscribeOptions(qos=0, retainAsPublished=True))
    pub = Client(server, "pub")
    pub.publish("live/x", b"r", qos=1, retain=True)
    assert v3.receive(1)[0].retain is False
    assert v5.receive(1)[0].retain is True


def test_will_on_abnormal_disconnect_not_on_clean_disconnect(server):
    watcher = Client(server, "watcher")
    watcher.subscribe("wills/#", 1)
    polite = Client(server, "polite", will=("wills/polite", b"bye", 1, False))
    polite.disconnect()
    rude = Client(server, "rude", will=("wills/rude", b"gone", 1, False))
    rude.drop()
    [will] = watcher.receive(1)
    assert (will.topic, will.payload) == ("wills/rude", b"gone")
    assert watcher.nothing_more()


def test_persistent_session_gets_what_it_missed_across_a_restart(server_factory):
    server = server_factory()
    device = Client(server, "device-1", clean=False)
    device.subscribe("cmd/device-1/#", 1)
    device.disconnect()
    pub = Client(server, "pub")
    for n in range(20):
        pub.publish(f"cmd/device-1/n{n}", b"%d" % n, qos=1)
    pub.disconnect()
    server.stop()
    server = server_factory(data_dir=server.data_dir)
    again = Client(server, "device-1", clean=False)
    assert again.flags.session_present is True
    got = again.receive(20)
    assert [int(m.payload) for m in got] == list(range(20))
    again.disconnect()
    # A clean session discards it: nothing is delivered and no session is present.
    fresh = Client(server, "device-1", clean=True)
    assert fresh.flags.session_present is False
    fresh.disconnect()
    server.stop()


def test_v5_properties_travel_end_to_end(server):
    sub = Client(server, "sub5", paho.MQTTv5)
    sub_props = Properties(PacketTypes.SUBSCRIBE)
    sub_props.SubscriptionIdentifier = 7
    sub.subscribe("rpc/#", options=SubscribeOptions(qos=1), properties=sub_props)
    pub = Client(server, "pub5", paho.MQTTv5)
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("a", "1"), ("a", "2")]
    props.ContentType = "application/json"
    props.ResponseTopic = "rpc/reply"
    props.CorrelationData = b"\x00\x01"
    props.MessageExpiryInterval = 60
    pub.publish("rpc/call", b"{}", qos=1, properties=props)
    [got] = sub.receive(1)
    p = got.properties
    assert p.UserProperty == [("a", "1"), ("a", "2")]
    assert (p.ContentType, p.ResponseTopic, p.CorrelationData) == ("application/json", "rpc/reply", b"\x00\x01")
    assert 55 <= p.MessageExpiryInterval <= 60
    assert p.SubscriptionIdentifier == [7]


def test_v5_no_local(server):
    me = Client(server, "me", paho.MQTTv5)
    me.subscribe("chat/#", options=SubscribeOptions(qos=1, noLocal=True))
    other = Client(server, "other", paho.MQTTv5)
    me.publish("chat/room", b"mine", qos=1)
    other.publish("chat/room", b"theirs", qos=1)
    [got] = me.receive(1)
    assert got.payload == b"theirs"
    assert me.nothing_more()


def test_mosquitto_clients(server):
    port = str(server.port)
    sub = subprocess.Popen(
        ["mosquitto_sub", "-p", port, "-t", "mq/#", "-C", "2", "-q", "1", "-v", "-V", "mqttv311", "-W", "10"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    for payload, version in (("one", "mqttv311"), ("two", "mqttv5")):
        subprocess.run(["mosquitto_pub", "-p", port, "-t", "mq/x", "-m", payload, "-q", "2", "-V", version], check=True)
    out, _ = sub.communicate(timeout=15)
    assert out.splitlines() == ["mq/x one", "mq/x two"]


def test_garbage_drops_one_client_and_the_others_carry_on(server):
    good = Client(server, "good")
    good.subscribe("ok/#", 1)
    for garbage in (b"\xff\xff\xff\xff\xff", b"\x10\x02\x00\x04", b"\x30\x03\x00\xff\xff", b"GET / HTTP/1.1\r\n\r\n"):
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(garbage)
            sock.settimeout(5)
            try:
                while sock.recv(1024):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
    good.publish("ok/still", b"alive", qos=1)
    assert good.receive(1)[0].payload == b"alive"


def test_unsupported_protocol_level_gets_connack_1(server):
    connect = bytes([0x10, 0x0C, 0x00, 0x04]) + b"MQTT" + bytes([0x03, 0x02, 0x00, 0x3C, 0x00, 0x00])
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(connect)
        assert sock.recv(4) == b"\x20\x02\x00\x01"


def test_keepalive_timeout_closes_and_publishes_the_will(server):
    watcher = Client(server, "watcher")
    watcher.subscribe("wills/#", 0)
    will_topic, will_payload = b"wills/silent", b"timeout"
    body = (
        b"\x00\x04MQTT\x04"
        + bytes([0x06])  # clean session + will flag, will QoS 0
        + (1).to_bytes(2, "big")  # keepalive 1 s
        + (6).to_bytes(2, "big")
        + b"silent"
        + len(will_topic).to_bytes(2, "big")
        + will_topic
        + len(will_payload).to_bytes(2, "big")
        + will_payload
    )
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        assert sock.recv(4) == b"\x20\x02\x00\x00"
        started = time.monotonic()
        assert sock.recv(16) == b""  # closed by the server after 1.5 keepalive periods
        assert 1.0 <= time.monotonic() - started < 5
    [will] = watcher.receive(1)
    assert will.payload == b"timeout"


def test_v5_topic_alias_from_the_client(server):
    sub = Client(server, "sub")
    sub.subscribe("alias/#", 0)
    pub = Client(server, "pub", paho.MQTTv5)
    first = Properties(PacketTypes.PUBLISH)
    first.TopicAlias = 3
    pub.publish("alias/long/topic", b"1", qos=1, properties=first)
    pub.publish("", b"2", qos=1, properties=first)
    got = sub.receive(2)
    assert [(m.topic, m.payload) for m in got] == [("alias/long/topic", b"1"), ("alias/long/topic", b"2")]


def test_many_qos0_publishes_from_a_v5_client_do_not_count_against_receive_maximum(server):
    sub = Client(server, "sub", paho.MQTTv5)
    sub.subscribe("flood/#", 0)
    pub = Client(server, "pub", paho.MQTTv5)
    for n in range(1500):  # more than the Receive Maximum (1024) we announce
        pub.paho.publish("flood/x", b"%d" % n, qos=0)
    got = sub.receive(1500, timeout=30)
    assert int(got[-1].payload) == 1499
    assert pub.disconnects.empty()


def test_publish_sent_with_the_connect_before_the_connack_is_stored(server):
    sub = Client(server, "sub")
    sub.subscribe("early/#", 1)
    connect = bytes([0x10, 0x0D, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x01]) + b"e"
    topic = b"early/x"
    publish = bytes([0x32, 2 + len(topic) + 2 + 3]) + len(topic).to_bytes(2, "big") + topic + b"\x00\x07" + b"hey"
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(connect + publish)  # in one write: the PUBLISH arrives before the CONNACK goes out
        assert sock.recv(4) == b"\x20\x02\x00\x00"
        assert sock.recv(4) == b"\x40\x02\x00\x07"  # PUBACK
    assert sub.receive(1)[0].payload == b"hey"


def test_a_v5_protocol_error_gets_a_disconnect_with_its_reason(server):
    pub = Client(server, "bad5", paho.MQTTv5)
    props = Properties(PacketTypes.PUBLISH)
    props.TopicAlias = 1000  # over the Topic Alias Maximum we announce (64)
    pub.paho.publish("alias/x", b"1", qos=0, properties=props)
    assert pub.disconnects.get(timeout=10) == 0x94  # Topic Alias invalid


def _connect_311(client_id: bytes) -> bytes:
    body = b"\x00\x04MQTT\x04\x02\x00\x3c" + len(client_id).to_bytes(2, "big") + client_id
    return bytes([0x10, len(body)]) + body


def _publish_311(topic: str, payload: bytes, qos: int = 0, retain: bool = False, packet_id: int = 1) -> bytes:
    name = topic.encode()
    body = len(name).to_bytes(2, "big") + name + (packet_id.to_bytes(2, "big") if qos else b"") + payload
    return bytes([0x30 | qos << 1 | retain, len(body)]) + body


def test_a_burst_of_qos0_publishes_in_one_write_keeps_its_order_across_topics(server):
    """Many QoS 0 PUBLISHes arriving in one read are stored in runs (one store call per run of one core topic and
    queue); a subscriber of every topic involved still gets them in the order they were sent, with the QoS 1
    publish, the retained one and one whose first level is stored in an escaped core topic in their places."""
    sub = Client(server, "sub")
    sub.subscribe("#", 1)  # one filter: the order of one light queue (several are merged by windows of entries)
    sent = []
    for n in range(300):
        topic = ["burst/a", "burst/b", "other/c"][(n // 7) % 3]  # runs of 7 on one topic, then the next
        sent.append((topic, b"%d" % n))
    stream = _connect_311(b"burster")
    for index, (topic, payload) in enumerate(sent):
        stream += _publish_311(topic, payload)
        if index == 100:
            stream += _publish_311("burst/q1", b"qos1", qos=1, packet_id=9)
        if index == 150:
            stream += _publish_311("odd level/x", b"escaped")
        if index == 200:
            stream += _publish_311("burst/kept", b"retained", retain=True)
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(stream)
        assert sock.recv(4) == b"\x20\x02\x00\x00"
        assert sock.recv(4) == b"\x40\x02\x00\x09"  # the PUBACK of the QoS 1 publish
        expected = [*sent[:101], ("burst/q1", b"qos1"), *sent[101:151], ("odd level/x", b"escaped"),
                    *sent[151:201], ("burst/kept", b"retained"), *sent[201:]]  # fmt: skip
        got = sub.receive(len(expected), timeout=30)
    assert [(m.topic, m.payload) for m in got] == expected
    assert sub.nothing_more()
    late = Client(server, "late")
    late.subscribe("burst/kept", 0)
    assert late.receive(1)[0].payload == b"retained"


def test_qos0_publishes_before_a_malformed_packet_in_the_same_read_are_stored(server):
    sub = Client(server, "sub")
    sub.subscribe("before/#", 0)
    stream = _connect_311(b"breaker") + b"".join(_publish_311("before/x", b"%d" % n) for n in range(20))
    stream += b"\x30\x05\x00\x09abc"  # a PUBLISH whose topic length runs past the packet
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(stream)
        assert sock.recv(4) == b"\x20\x02\x00\x00"
        assert sock.recv(10) == b""  # closed
    got = sub.receive(20)
    assert [m.payload for m in got] == [b"%d" % n for n in range(20)]


def test_qos0_runs_of_one_topic_keep_each_messages_own_properties_and_retain_flag(server):
    """Within a run of one topic the gateway builds the core properties once for plain messages: one with MQTT 5
    properties or a retain flag in the middle of the run keeps its own."""
    sub = Client(server, "sub5", paho.MQTTv5)
    sub.subscribe("run/#", options=SubscribeOptions(qos=0, retainAsPublished=True))
    pub = Client(server, "pub5", paho.MQTTv5)
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [("k", "v")]
    props.ContentType = "text/plain"
    pub.paho.publish("run/t", b"1", qos=0)
    pub.paho.publish("run/t", b"2", qos=0, properties=props)
    pub.paho.publish("run/t", b"3", qos=0, retain=True)
    pub.paho.publish("run/t", b"4", qos=0)
    got = sub.receive(4)
    assert [m.payload for m in got] == [b"1", b"2", b"3", b"4"]
    assert [m.retain for m in got] == [False, False, True, False]
    assert [getattr(m.properties, "UserProperty", None) for m in got] == [None, [("k", "v")], None, None]
    assert [getattr(m.properties, "ContentType", None) for m in got] == [None, "text/plain", None, None]
