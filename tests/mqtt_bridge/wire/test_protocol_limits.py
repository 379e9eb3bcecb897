"""`MqttConnection` limits byte for byte, without a socket: Receive Maximum (MQTT 5 section 4.9), topic aliases
toward the client (section 3.3.2.3.4) and max_keepalive (Server Keep Alive, section 3.2.2.3.14)."""

from __future__ import annotations

import mqtt5
import pytest

from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.wire.protocol import Limits, MqttConnection, Published, Released, State


def connected_v5(limits: Limits | None = None, **connect: object) -> MqttConnection:
    conn = MqttConnection(limits)
    conn.receive_data(mqtt5.ConnectPacket("c", **connect).write())  # type: ignore[arg-type]
    conn.accept(False)
    conn.data_to_send()
    return conn


def connect_v311(keep_alive: int = 60) -> bytes:
    body = b"\x00\x04MQTT\x04\x02" + keep_alive.to_bytes(2, "big") + b"\x00\x01c"  # clean session, client id "c"
    return bytes([0x10, len(body)]) + body


def publish(packet_id: int, qos: int = 1, topic: str = "rm/x") -> bytes:
    return mqtt5.PublishPacket(topic, b"x", qos=mqtt5.QoS(qos), packet_id=packet_id).write()


def packets(data: bytes) -> list[mqtt5.Packet]:
    found = []
    while data:
        packet, size = mqtt5.read(data)
        found.append(packet)
        data = data[size:]
    return found


# --- Receive Maximum ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("qos", [1, 2])
def test_one_publish_past_receive_maximum_in_one_read_ends_the_connection_with_0x93(qos):
    conn = connected_v5(Limits(receive_maximum=4))
    events = conn.receive_data(b"".join(publish(n, qos) for n in range(1, 6)))
    # The four within the quota are handed over (and stored) before the connection ends, as for any protocol error.
    assert [event.packet.packet_id for event in events if isinstance(event, Published)] == [1, 2, 3, 4]
    error = conn.pending_error
    assert error is not None and error.reason_code == 0x93
    conn.fail(error)
    [disconnect] = packets(conn.data_to_send())
    assert disconnect.reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED
    assert conn.state is State.CLOSED


def test_a_qos1_publish_gives_its_quota_back_with_its_puback():
    conn = connected_v5(Limits(receive_maximum=2))
    conn.receive_data(publish(1) + publish(2))
    conn.acknowledge_publish(1, 1)
    assert len(conn.receive_data(publish(3))) == 1  # one PUBACK went: room for one more
    with pytest.raises(ProtocolError) as raised:
        conn.receive_data(publish(4))
    assert raised.value.reason_code == 0x93


def test_a_qos2_publish_holds_its_quota_until_pubcomp_not_pubrec():
    conn = connected_v5(Limits(receive_maximum=2))
    conn.receive_data(publish(1, 2) + publish(2, 2))
    conn.acknowledge_publish(1, 2)
    conn.acknowledge_publish(2, 2)
    assert [type(packet) for packet in packets(conn.data_to_send())] == [mqtt5.PubRecPacket] * 2
    with pytest.raises(ProtocolError) as raised:  # PUBREC gives nothing back (MQTT 5 section 4.9)
        conn.receive_data(publish(3, 2))
    assert raised.value.reason_code == 0x93


def test_a_pubrel_answered_with_pubcomp_gives_the_qos2_quota_back():
    conn = connected_v5(Limits(receive_maximum=1))
    conn.receive_data(publish(1, 2))
    conn.acknowledge_publish(1, 2)
    assert conn.receive_data(mqtt5.PubRelPacket(1).write()) == [Released(1)]
    conn.complete(1, known=True)  # the session awaited it
    assert [type(packet) for packet in packets(conn.data_to_send())] == [mqtt5.PubRecPacket, mqtt5.PubCompPacket]
    assert len(conn.receive_data(publish(2, 2))) == 1


def test_a_failed_pubrec_gives_the_qos2_quota_back_at_once():
    conn = connected_v5(Limits(receive_maximum=1))
    conn.receive_data(publish(1, 2))
    conn.acknowledge_publish(1, 2, 0x87, "not authorized")
    assert len(conn.receive_data(publish(2, 2))) == 1


def test_a_pubrel_for_a_flow_of_an_earlier_connection_gives_nothing_back():
    # After a reconnect the client releases a publish the last connection received: this one never counted it.
    conn = connected_v5(Limits(receive_maximum=1))
    conn.receive_data(publish(1, 2))
    conn.receive_data(mqtt5.PubRelPacket(9).write())
    conn.complete(9, known=True)
    assert conn.inbound_unacked == 1
    with pytest.raises(ProtocolError):
        conn.receive_data(publish(2, 2))


def test_a_qos2_publish_repeated_before_its_pubrel_counts_once():
    conn = connected_v5(Limits(receive_maximum=1))
    conn.receive_data(publish(1, 2))
    conn.acknowledge_publish(1, 2)
    assert len(conn.receive_data(publish(1, 2))) == 1  # the gateway answers it with PUBREC again
    conn.acknowledge_publish(1, 2)
    conn.receive_data(mqtt5.PubRelPacket(1).write())
    conn.complete(1, known=True)
    assert conn.inbound_unacked == 0


def test_qos0_publishes_never_count():
    conn = connected_v5(Limits(receive_maximum=1))
    assert len(conn.receive_data(b"".join(mqtt5.PublishPacket("a", b"x").write() for _ in range(10)))) == 10
    assert conn.inbound_unacked == 0


def test_receive_maximum_is_not_enforced_on_mqtt_3_1_1_which_has_none():
    conn = MqttConnection(Limits(receive_maximum=1))
    conn.receive_data(connect_v311())
    conn.accept(False)
    assert len(conn.receive_data(b"\x32\x06\x00\x01a\x00\x01x" * 3)) == 3


# --- topic aliases toward the client -----------------------------------------------------------------------


def sent(conn: MqttConnection) -> list[mqtt5.PublishPacket]:
    return packets(conn.data_to_send())  # type: ignore[return-value]


def test_the_first_publish_on_a_topic_sets_an_alias_and_later_ones_send_only_the_alias():
    conn = connected_v5(topic_alias_max=5)
    assert conn.outbound_alias_limit == 5
    conn.publish(mqtt5.PublishPacket("sensors/dev1/temp", b"1"))
    conn.publish(mqtt5.PublishPacket("sensors/dev1/temp", b"2"))
    conn.publish(mqtt5.PublishPacket("sensors/dev2/temp", b"3"))
    data = conn.data_to_send()
    # Byte for byte what an MQTT 5 encoder makes of the same packets with the alias set by hand.
    assert data == b"".join(
        [
            mqtt5.PublishPacket("sensors/dev1/temp", b"1", topic_alias=1).write(),
            mqtt5.PublishPacket("", b"2", topic_alias=1).write(),  # empty topic name: the alias stands for it
            mqtt5.PublishPacket("sensors/dev2/temp", b"3", topic_alias=2).write(),
        ]
    )


def test_aliases_keep_the_other_fields_of_a_publish():
    conn = connected_v5(topic_alias_max=5)
    for n in (1, 2):
        conn.publish(
            mqtt5.PublishPacket(
                "sensors/dev1/temp",
                b"x" * 300,  # a remaining length of two bytes
                qos=mqtt5.QoS.AT_LEAST_ONCE,
                packet_id=n,
                retain=True,
                user_properties=[("unit", "C")],
                message_expiry_interval=60,
                subscription_ids=[7],
            )
        )
    first, second = sent(conn)
    assert (first.topic, first.topic_alias, second.topic, second.topic_alias) == ("sensors/dev1/temp", 1, "", 1)
    for n, packet in enumerate((first, second), 1):
        assert (packet.packet_id, int(packet.qos), packet.retain, packet.payload) == (n, 1, True, b"x" * 300)
        assert (packet.user_properties, packet.message_expiry_interval, packet.subscription_ids) == (
            [("unit", "C")],
            60,
            [7],
        )


def test_aliases_never_exceed_the_clients_maximum_and_go_first_come_first_served():
    conn = connected_v5(topic_alias_max=2)
    topics = ["room/a/t", "room/b/t", "room/c/t", "room/a/t", "room/c/t", "room/b/t"]
    for topic in topics:
        conn.publish(mqtt5.PublishPacket(topic, b"x"))
    got = [(packet.topic, packet.topic_alias) for packet in sent(conn)]
    assert got == [
        ("room/a/t", 1),
        ("room/b/t", 2),
        ("room/c/t", None),  # both aliases in use: the third topic goes in full, and keeps doing so
        ("", 1),
        ("room/c/t", None),
        ("", 2),
    ]


def test_the_server_maximum_caps_the_aliases_and_0_turns_them_off():
    assert connected_v5(Limits(server_topic_alias_maximum=3), topic_alias_max=100).outbound_alias_limit == 3
    conn = connected_v5(Limits(server_topic_alias_maximum=0), topic_alias_max=100)
    conn.publish(mqtt5.PublishPacket("room/a/t", b"x"))
    conn.publish(mqtt5.PublishPacket("room/a/t", b"x"))
    assert [packet.topic_alias for packet in sent(conn)] == [None, None]


def test_no_alias_for_a_client_without_topic_alias_maximum():
    conn = connected_v5()
    assert conn.outbound_alias_limit == 0
    data = mqtt5.PublishPacket("room/a/t", b"x").write()
    conn.publish_encoded(data)
    conn.publish_encoded(data)
    assert conn.data_to_send() == data + data


def test_no_alias_for_topics_too_short_to_gain_from_one():
    conn = connected_v5(topic_alias_max=5)
    for _ in range(2):
        conn.publish(mqtt5.PublishPacket("a/b", b"x"))
    assert [(packet.topic, packet.topic_alias) for packet in sent(conn)] == [("a/b", None), ("a/b", None)]


def test_a_resend_after_reconnect_carries_the_full_topic_and_no_alias():
    conn = connected_v5(topic_alias_max=5)
    conn.publish(mqtt5.PublishPacket("room/a/t", b"1", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=1, duplicate=True))
    conn.publish(mqtt5.PublishPacket("room/a/t", b"2", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=2))
    conn.publish(mqtt5.PublishPacket("room/a/t", b"3", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=3, duplicate=True))
    got = [(packet.topic, packet.topic_alias, packet.duplicate) for packet in sent(conn)]
    assert got == [("room/a/t", None, True), ("room/a/t", 1, False), ("room/a/t", None, True)]
    # A new connection (the reconnect) starts without aliases: its first PUBLISH names the topic again.
    again = connected_v5(topic_alias_max=5)
    again.publish(mqtt5.PublishPacket("room/a/t", b"4"))
    assert [(packet.topic, packet.topic_alias) for packet in sent(again)] == [("room/a/t", 1)]


def test_an_alias_is_not_set_by_a_publish_it_would_make_too_large():
    plain = mqtt5.PublishPacket("room/a/t", b"x" * 20).write()
    conn = connected_v5(topic_alias_max=5, max_packet_size=len(plain))  # fits, but not with 3 bytes more
    assert conn.publish(mqtt5.PublishPacket("room/a/t", b"x" * 20))
    assert conn.publish(mqtt5.PublishPacket("room/a/t", b"x" * 20))
    assert conn.data_to_send() == plain + plain  # sent without: the client never learnt an alias
    assert not conn.publish(mqtt5.PublishPacket("room/a/t", b"x" * 21))  # too large either way: dropped


def test_a_reused_alias_lets_a_publish_fit_that_would_not_with_its_topic():
    topic = "building/7/floor/3/room/12/temperature"
    conn = connected_v5(topic_alias_max=5, max_packet_size=60)
    assert conn.publish(mqtt5.PublishPacket(topic, b"1"))
    assert conn.publish(mqtt5.PublishPacket(topic, b"y" * 40))  # 84 bytes with its topic, 49 with the alias
    assert [(packet.topic, packet.payload) for packet in sent(conn)] == [(topic, b"1"), ("", b"y" * 40)]


def test_shared_qos0_bytes_are_copied_for_a_connection_with_aliases_and_left_alone():
    shared = mqtt5.PublishPacket("room/a/t", b"x").write()
    original = bytes(shared)
    plain = connected_v5()
    aliased = connected_v5(topic_alias_max=5)
    for _ in range(2):
        plain.publish_encoded(shared)
        aliased.publish_encoded(shared)
    assert plain.data_to_send() == shared + shared
    assert [(packet.topic, packet.topic_alias) for packet in sent(aliased)] == [("room/a/t", 1), ("", 1)]
    assert shared == original


def test_mqtt_3_1_1_connections_never_get_aliases():
    conn = MqttConnection()
    conn.receive_data(connect_v311())
    conn.accept(False)
    conn.data_to_send()
    assert conn.outbound_alias_limit == 0


# --- max_keepalive -------------------------------------------------------------------------------------------


def connack_of(conn: MqttConnection) -> mqtt5.ConnAckPacket:
    conn.accept(False)
    [connack] = packets(conn.data_to_send())
    assert isinstance(connack, mqtt5.ConnAckPacket)
    return connack


@pytest.mark.parametrize(
    ("maximum", "asked", "in_force", "server_keep_alive"),
    [
        (2, 600, 2, 2),  # more than the maximum: told the maximum
        (2, 0, 2, 2),  # no keep alive at all: the maximum too (Mosquitto does the same for v5)
        (2, 2, 2, None),
        (2, 1, 1, None),  # within it: the client's own, and no Server Keep Alive
        (0, 600, 600, None),  # no maximum
        (0, 0, 0, None),
    ],
)
def test_a_v5_client_past_max_keepalive_is_told_the_maximum_in_connack(maximum, asked, in_force, server_keep_alive):
    conn = MqttConnection(Limits(max_keepalive=maximum))
    conn.receive_data(mqtt5.ConnectPacket("c", keep_alive=asked).write())
    assert conn.keep_alive == in_force
    assert connack_of(conn).server_keep_alive == server_keep_alive


@pytest.mark.parametrize("asked", [600, 3, 0])
def test_a_3_1_1_client_past_max_keepalive_is_refused_with_identifier_rejected(asked):
    conn = MqttConnection(Limits(max_keepalive=2))
    with pytest.raises(ProtocolError, match=r"keep alive .* max_keepalive is 2 s"):
        conn.receive_data(connect_v311(keep_alive=asked))
    assert conn.data_to_send() == b"\x20\x02\x00\x02"  # CONNACK return code 2: identifier rejected
    assert conn.state is State.CLOSED


@pytest.mark.parametrize(("maximum", "asked"), [(2, 2), (2, 1), (0, 600), (0, 0)])
def test_a_3_1_1_client_within_max_keepalive_keeps_its_own(maximum, asked):
    conn = MqttConnection(Limits(max_keepalive=maximum))
    assert len(conn.receive_data(connect_v311(keep_alive=asked))) == 1  # Connected
    assert conn.keep_alive == asked
    conn.accept(False)
    assert conn.data_to_send() == b"\x20\x02\x00\x00"


def test_a_pubrel_the_session_did_not_await_gets_pubcomp_0x92_in_v5():
    # A QoS 2 publish refused at PUBREC (reason >= 0x80) ended there; a client that sends PUBREL anyway (paho does)
    # must not get a PUBCOMP that reads as success.
    conn = connected_v5(Limits(receive_maximum=4))
    conn.receive_data(publish(1, 2))
    conn.acknowledge_publish(1, 2, 0x97, "quota exceeded")
    assert conn.receive_data(mqtt5.PubRelPacket(1).write()) == [Released(1)]
    conn.complete(1, known=False)
    sent = packets(conn.data_to_send())
    assert [type(packet) for packet in sent] == [mqtt5.PubRecPacket, mqtt5.PubCompPacket]
    assert int(sent[0].reason_code) == 0x97 and int(sent[1].reason_code) == 0x92
    assert conn.inbound_unacked == 0
