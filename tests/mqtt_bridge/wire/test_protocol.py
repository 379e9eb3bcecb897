"""`MqttConnection` byte for byte, without a socket: the rules the end-to-end robustness tests found missing."""

from __future__ import annotations

import mqtt5
import pytest

from mqtt_bridge.errors import MalformedPacket, ProtocolError
from mqtt_bridge.wire.protocol import MqttConnection, MqttTraffic, State


def connected_v5(**connect: object) -> MqttConnection:
    conn = MqttConnection()
    conn.receive_data(mqtt5.ConnectPacket("c", **connect).write())  # type: ignore[arg-type]
    conn.accept(False)
    conn.data_to_send()
    return conn


@pytest.mark.parametrize("first", [b"G", b"\x16", b"\x30", b"\x11", b"\xc0"])
def test_a_first_byte_that_cannot_start_a_connect_is_refused_at_once(first):
    conn = MqttConnection()
    with pytest.raises(ProtocolError, match=r"CONNECT first|fixed header flags"):
        conn.receive_data(first)  # one byte: no frame is complete yet
    assert conn.state is State.CLOSED


def test_a_connect_arriving_byte_by_byte_is_not_refused_early():
    conn = MqttConnection()
    data = mqtt5.ConnectPacket("c").write()
    events = [event for byte in data for event in conn.receive_data(bytes([byte]))]
    assert len(events) == 1


def test_a_disconnect_reason_string_is_left_out_past_the_clients_maximum_packet_size():
    conn = connected_v5(max_packet_size=20)
    with pytest.raises(MalformedPacket):
        conn.receive_data(b"\x30\x03\x00\x01\xff")  # a topic that is not UTF-8
    out = conn.data_to_send()
    packet, size = mqtt5.read(out)
    assert size == len(out) <= 20
    assert packet.reason_code == mqtt5.DisconnectReasonCode.MALFORMED_PACKET and packet.reason_str is None


def test_a_disconnect_reason_string_is_sent_when_it_fits():
    conn = connected_v5()
    with pytest.raises(MalformedPacket):
        conn.receive_data(b"\x30\x03\x00\x01\xff")
    packet, _ = mqtt5.read(conn.data_to_send())
    assert "UTF-8" in packet.reason_str


def test_a_puback_reason_string_is_left_out_past_the_clients_maximum_packet_size():
    conn = connected_v5(max_packet_size=16)
    conn.acknowledge_publish(7, 1, 0x97, "quota exceeded for this client, try again later")
    packet, size = mqtt5.read(conn.data_to_send())
    assert size <= 16 and packet.reason_str is None and int(packet.reason_code) == 0x97


def test_a_client_publish_with_a_subscription_identifier_is_a_protocol_error():
    conn = connected_v5()
    publish = mqtt5.PublishPacket("a", b"x", subscription_ids=[5]).write()
    with pytest.raises(ProtocolError, match="Subscription Identifier") as raised:
        conn.receive_data(publish)
    assert raised.value.reason_code == 0x82


def test_topic_alias_0_is_topic_alias_invalid():
    conn = connected_v5()
    body = b"\x00\x01a" + b"\x03\x23\x00\x00" + b"x"
    with pytest.raises(ProtocolError, match="aliases start at 1") as raised:
        conn.receive_data(bytes([0x30, len(body)]) + body)
    assert raised.value.reason_code == 0x94
    packet, _ = mqtt5.read(conn.data_to_send())
    assert packet.reason_code == mqtt5.DisconnectReasonCode.TOPIC_ALIAS_INVALID


def test_events_before_a_malformed_packet_in_the_same_data_are_returned_and_the_error_kept():
    conn = connected_v5()
    good = mqtt5.PublishPacket("a/b", b"1").write() + mqtt5.PublishPacket("a/c", b"2").write()
    events = conn.receive_data(good + b"\x30\x03\x00\x01\xff" + mqtt5.PublishPacket("a/d", b"3").write())
    assert [event.topic for event in events] == ["a/b", "a/c"]  # type: ignore[union-attr]
    assert isinstance(conn.pending_error, MalformedPacket)
    assert conn.data_to_send() == b""  # the DISCONNECT waits for the caller's fail(), after acting on the events
    assert conn.receive_data(mqtt5.PublishPacket("a/e", b"4").write()) == []  # nothing is read after the error
    conn.fail(conn.pending_error)
    packet, _ = mqtt5.read(conn.data_to_send())
    assert packet.reason_code == mqtt5.DisconnectReasonCode.MALFORMED_PACKET
    assert conn.state is State.CLOSED


def test_a_plain_3_1_1_qos0_publish_keeps_its_own_bytes_for_3_1_1_subscribers():
    from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish

    conn = MqttConnection()
    conn.receive_data(V311Codec(client_side=True).encode(mqtt5.ConnectPacket("c")))
    conn.accept(False)
    plain = encode_publish("a/b", b"1", 0, False, None)
    retained = encode_publish("a/b", b"2", 0, True, None)
    qos1 = encode_publish("a/b", b"3", 1, False, 5)
    events = conn.receive_data(plain + retained + qos1)
    assert [(event.packet.payload, event.wire) for event in events] == [  # type: ignore[union-attr]
        (b"1", plain),
        (b"2", None),
        (b"3", None),
    ]


def test_traffic_counts_every_packet_and_byte_both_ways_into_the_shared_counters():
    traffic = MqttTraffic()
    conn = MqttConnection(traffic=traffic)
    connect = mqtt5.ConnectPacket("c").write()
    publishes = [mqtt5.PublishPacket("t/x", b"p" * n, qos=mqtt5.QoS.AT_MOST_ONCE).write() for n in range(3)]
    ping = mqtt5.PingReqPacket().write()
    data = connect + b"".join(publishes) + ping
    conn.receive_data(data[:5])  # a packet cut in two is counted once, when whole
    conn.receive_data(data[5:])
    assert (traffic.bytes_received, traffic.packets_received, traffic.publishes_received) == (len(data), 5, 3)
    conn.accept(False)  # CONNACK (the PINGRESP is queued already)
    conn.publish(mqtt5.PublishPacket("t/y", b"out", qos=mqtt5.QoS.AT_MOST_ONCE))
    out = conn.data_to_send()
    assert (traffic.packets_sent, traffic.publishes_sent, traffic.bytes_sent) == (3, 1, len(out))
    other = MqttConnection(traffic=traffic)  # a second connection adds to the same counters
    other.receive_data(connect)
    assert traffic.packets_received == 6


def test_a_plain_publish_stays_plain_when_logged():
    from mqtt_bridge.wire.protocol import Published

    event = Published("a/b", 1, 7, payload=b"xyz", retain=True)
    assert "payload=3 bytes" in repr(event) and event.plain  # a log line makes no packet
    assert event.packet.payload == b"xyz" and event.packet.retain and not event.plain
    assert "packet=" in repr(event)
