"""MQTT 5 flow control and limits against `mqgate serve`: receive maximum both ways, maximum packet size both ways,
message expiry, retain handling, and the server's connection limit."""

from __future__ import annotations

import socket
import time

import mqtt5
import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from .conftest import Client, RawV5, configured, connect_properties


def test_the_client_receive_maximum_bounds_unacknowledged_sends(server):
    sub = Client(server, "narrow", paho.MQTTv5, properties=connect_properties(ReceiveMaximum=2))
    sub.paho.manual_ack_set(True)
    sub.subscribe("rm/#", 1)
    pub = Client(server, "pub")
    for n in range(6):
        pub.publish("rm/x", b"%d" % n, qos=1)
    first = sub.receive(2)
    assert sub.nothing_more(1.0)  # two in flight: no third until one is acknowledged
    sub.paho.ack(first[0].mid, first[0].qos)
    assert sub.receive(1)[0].payload == b"2"
    assert sub.nothing_more(0.5)
    sub.paho.ack(first[1].mid, first[1].qos)
    assert sub.receive(1)[0].payload == b"3"


@pytest.mark.parametrize("qos", [1, 2])
def test_a_client_past_the_server_receive_maximum_is_disconnected_with_0x93(server_factory, tmp_path, qos):
    server = configured(server_factory, tmp_path, "[mqtt]\nreceive_maximum = 4\n")
    sock = RawV5(server, f"greedy{qos}")
    assert sock.connack.receive_max == 4
    burst = b"".join(
        mqtt5.PublishPacket("rm/x", b"%d" % n, qos=mqtt5.QoS(qos), packet_id=n).write() for n in range(1, 6)
    )
    sock.sendall(burst)  # five without waiting: one past the quota
    got, closed = sock.read()
    assert closed
    assert [packet.packet_id for packet in got[:-1]] == [1, 2, 3, 4]  # stored and acknowledged before it ended
    assert got[-1].reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED


def test_qos2_publishes_hold_the_receive_quota_until_pubcomp(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, "[mqtt]\nreceive_maximum = 4\n")
    sock = RawV5(server, "no-pubrel")
    for n in range(1, 5):
        sock.sendall(mqtt5.PublishPacket("rm/x", b"x", qos=mqtt5.QoS.EXACTLY_ONCE, packet_id=n).write())
    got, _ = sock.read(count=4)
    assert [type(packet) for packet in got] == [mqtt5.PubRecPacket] * 4
    # Every PUBREC came, but no PUBREL went, so no PUBCOMP: the four still count (MQTT 5 section 4.9).
    sock.sendall(mqtt5.PublishPacket("rm/x", b"x", qos=mqtt5.QoS.EXACTLY_ONCE, packet_id=5).write())
    got, closed = sock.read()
    assert closed and got[-1].reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED
    # A client that completes its flows gets its quota back.
    sock = RawV5(server, "completes")
    for n in range(1, 21):
        sock.sendall(mqtt5.PublishPacket("rm/x", b"x", qos=mqtt5.QoS.EXACTLY_ONCE, packet_id=n).write())
        [pubrec], _ = sock.read(count=1)
        assert isinstance(pubrec, mqtt5.PubRecPacket)
        sock.sendall(mqtt5.PubRelPacket(n).write())
        [pubcomp], _ = sock.read(count=1)
        assert isinstance(pubcomp, mqtt5.PubCompPacket)


def test_a_long_burst_past_a_small_receive_maximum_is_not_hidden_by_batching(server_factory, tmp_path):
    """Two thousand QoS 1 publishes in one write, more than a read holds events for before it pauses
    (MAX_PENDING_EVENTS) and stored in runs: the client is still dropped for going past the quota."""
    server = configured(server_factory, tmp_path, "[mqtt]\nreceive_maximum = 4\n")
    sock = RawV5(server, "flood")
    sock.sendall(
        b"".join(mqtt5.PublishPacket("rm/x", b"x", qos=mqtt5.QoS(1), packet_id=n).write() for n in range(1, 2001))
    )
    got, closed = sock.read(timeout=30)
    assert closed and got[-1].reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED
    assert len(got) - 1 < 2000


def test_paho_within_a_small_receive_maximum_is_never_disconnected(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, "[mqtt]\nreceive_maximum = 4\n")
    sub = Client(server, "sub", paho.MQTTv5)
    sub.subscribe("rm/#", 2)
    # paho 2.2 does not read the server's Receive Maximum from the CONNACK: its own window (20 by default) has to
    # be set to it, as for any client that keeps within the limit.
    pub = Client(server, "pub", paho.MQTTv5, max_inflight=4)
    assert pub.connack_properties.ReceiveMaximum == 4  # type: ignore[attr-defined]
    infos = [pub.paho.publish("rm/x", b"%d" % n, qos=1 + n % 2) for n in range(60)]  # without waiting
    for info in infos:
        info.wait_for_publish(10)
    got = sub.receive(60, timeout=30)
    assert sorted(int(message.payload) for message in got) == list(range(60))
    assert pub.disconnects.empty()


def test_the_client_maximum_packet_size_is_respected(server):
    sub = Client(server, "small", paho.MQTTv5, properties=connect_properties(MaximumPacketSize=200))
    sub.subscribe("mps/#", 1)
    pub = Client(server, "pub")
    pub.publish("mps/x", b"x" * 500, qos=1)  # would not fit: not sent to this client (MQTT 5 3.1.2.25)
    pub.publish("mps/x", b"fits", qos=1)
    [got] = sub.receive(1)
    assert got.payload == b"fits"
    assert sub.nothing_more()
    assert sub.disconnects.empty()


def test_a_packet_over_the_server_maximum_disconnects_that_client(server_factory, tmp_path):
    config = tmp_path / "mqgate.toml"
    config.write_text("[mqtt]\nmax_packet_size = 1024\n")
    server = server_factory("--config", str(config))
    other = Client(server, "other", paho.MQTTv5)
    other.subscribe("big/#", 1)
    big = Client(server, "big", paho.MQTTv5)
    assert big.connack_properties.MaximumPacketSize == 1024  # type: ignore[attr-defined]
    big.paho.publish("big/x", b"x" * 2000, qos=1)
    assert big.disconnects.get(timeout=10) == 0x95  # Packet too large
    pub = Client(server, "pub", paho.MQTTv5)
    pub.publish("big/y", b"small", qos=1)
    assert other.receive(1)[0].payload == b"small"  # the others carry on


def test_expired_messages_are_not_delivered(server):
    sub = Client(server, "late", paho.MQTTv5, clean=False, properties=connect_properties(SessionExpiryInterval=60))
    sub.subscribe("exp/#", 1)
    sub.disconnect()
    pub = Client(server, "pub", paho.MQTTv5)
    short, long = Properties(PacketTypes.PUBLISH), Properties(PacketTypes.PUBLISH)
    short.MessageExpiryInterval = 1
    long.MessageExpiryInterval = 100
    pub.publish("exp/x", b"short-lived", qos=1, properties=short)
    pub.publish("exp/x", b"long-lived", qos=1, properties=long)
    time.sleep(2.2)
    again = Client(server, "late", paho.MQTTv5, clean=False)
    [got] = again.receive(1)
    assert got.payload == b"long-lived"
    assert got.properties.MessageExpiryInterval <= 98  # type: ignore[attr-defined]  # the time it waited is taken off
    assert again.nothing_more()


def test_retain_handling_options(server):
    pub = Client(server, "pub", paho.MQTTv5)
    pub.publish("rh/x", b"kept", qos=1, retain=True)
    sub = Client(server, "sub", paho.MQTTv5)
    sub.subscribe("rh/#", options=SubscribeOptions(qos=1, retainHandling=1))
    assert sub.receive(1)[0].payload == b"kept"  # a new subscription: sent
    sub.subscribe("rh/#", options=SubscribeOptions(qos=1, retainHandling=1))
    assert sub.nothing_more()  # it existed: not sent again
    sub.subscribe("rh/#", options=SubscribeOptions(qos=1, retainHandling=0))
    assert sub.receive(1)[0].payload == b"kept"  # 0: sent on every subscribe
    other = Client(server, "other", paho.MQTTv5)
    other.subscribe("rh/#", options=SubscribeOptions(qos=1, retainHandling=2))
    assert other.nothing_more()  # 2: never


def test_connections_past_max_connections_are_refused(server_factory, tmp_path):
    config = tmp_path / "mqgate.toml"
    config.write_text("[mqtt]\nmax_connections = 2\n")
    server = server_factory("--config", str(config))
    first = Client(server, "one")
    second = Client(server, "two")
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.settimeout(5)
        try:
            refused = sock.recv(16) == b""
        except ConnectionResetError:
            refused = True
    assert refused
    second.disconnect()
    time.sleep(0.3)  # the server sees the close
    third = Client(server, "three")  # room again
    assert third.reason == 0
    first.publish("limit/x", b"still works", qos=1)


def read_until_closed(sock: socket.socket) -> bytes:
    """Every byte the server sends up to its FIN, as a client busy elsewhere finds them when it gets round to
    reading. Fails on a reset: the server must not throw away what it sent."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def split_packets(data: bytes) -> list:
    packets = []
    while data:
        packet, size = mqtt5.read(data)
        packets.append(packet)
        data = data[size:]
    return packets


def test_a_client_that_keeps_sending_past_receive_maximum_still_reads_its_disconnect_0x93(server_factory, tmp_path):
    """Eclipse Paho's MQTT 5 interoperability test test_flow_control2: a client publishes QoS 2 past the server's
    Receive Maximum and answers each PUBREC with a PUBREL as it reads it, giving up when a send fails. The server
    has sent its DISCONNECT 0x93 and ended the connection by then; the PUBRELs (and a publish after them) must
    neither be refused with a reset, which would cost the client the reason, nor be acted upon."""
    server = configured(server_factory, tmp_path, "[mqtt]\nreceive_maximum = 4\n")
    watcher = Client(server, "watcher", paho.MQTTv5)
    watcher.subscribe("fc/#", 1)
    client = RawV5(server, "pushy")
    client.sendall(
        b"".join(
            mqtt5.PublishPacket("fc/x", b"%d" % n, qos=mqtt5.QoS.EXACTLY_ONCE, packet_id=n).write() for n in range(1, 6)
        )
    )
    packets = split_packets(read_until_closed(client.sock))
    read = []
    for packet in packets:  # in order, as paho's receive loop handles them
        read.append(packet)
        if isinstance(packet, mqtt5.PubRecPacket):
            client.sendall(mqtt5.PubRelPacket(packet.packet_id).write())  # raises EPIPE if the server reset
    client.sendall(mqtt5.PublishPacket("fc/late", b"after", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=9).write())
    assert [type(packet) for packet in read] == [mqtt5.PubRecPacket] * 4 + [mqtt5.DisconnectPacket]
    assert read[-1].reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED
    client.close()
    got = watcher.receive(4)
    assert sorted(message.payload for message in got) == [b"1", b"2", b"3", b"4"]  # stored before the DISCONNECT
    assert watcher.nothing_more()  # nothing read after it was acted upon
