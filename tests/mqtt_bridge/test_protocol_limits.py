"""`MqttConnection` limits byte for byte, without a socket: Receive Maximum (MQTT 5 section 4.9)."""

from __future__ import annotations

import mqtt5
import pytest

from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.protocol import Limits, MqttConnection, Published, Released, State


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
