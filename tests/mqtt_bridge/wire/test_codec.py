import itertools
import queue
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mqtt5
import paho.mqtt.client as paho
import pytest
from amqtt.mqtt.puback import PubackPacket as AmqttPuback
from amqtt.mqtt.pubcomp import PubcompPacket as AmqttPubcomp
from amqtt.mqtt.publish import PublishPacket as AmqttPublish
from amqtt.mqtt.pubrec import PubrecPacket as AmqttPubrec
from amqtt.mqtt.pubrel import PubrelPacket as AmqttPubrel
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from mqtt_bridge.errors import MalformedPacket, ProtocolError, UnsupportedProtocol
from mqtt_bridge.wire.codec import (
    body_offset,
    is_rust_panic,
    protocol_level,
    read_publish_header,
    read_publish_header_strictly,
)
from mqtt_bridge.wire.codec_v5 import V5Codec, publish_topic_bounds, with_topic_alias
from mqtt_bridge.wire.codec_v311 import SESSION_NEVER_EXPIRES, V311Codec, _run_amqtt, encode_publish
from mqtt_bridge.wire.framing import FrameBuffer, encode_remaining_length
from tests.mqtt_bridge.wire.packet_strategies import (
    v5_packets,
    v5_publishes,
    v311_packets,
    v311_publishes,
)

QoS = mqtt5.QoS
V311 = V311Codec(client_side=True)  # encodes a client's DISCONNECT too, so every packet type round-trips
V5 = V5Codec()


def s(value: str | bytes) -> bytes:
    """A two-byte-length-prefixed string or binary field."""
    raw = value.encode() if isinstance(value, str) else value
    return len(raw).to_bytes(2, "big") + raw


def frame(first_byte: int, *parts: bytes) -> memoryview:
    body = b"".join(parts)
    return memoryview(bytes((first_byte,)) + encode_remaining_length(len(body)) + body)


def connect4(flags: int = 0x02, payload: bytes = s("cid"), name: str = "MQTT", level: int = 4) -> memoryview:
    return frame(0x10, s(name), bytes((level, flags)), b"\x00\x1e", payload)


def connect5(flags: int = 0x02, payload: bytes = s("cid"), properties: bytes = b"\x00") -> memoryview:
    return frame(0x10, s("MQTT"), bytes((5, flags)), b"\x00\x1e", properties, payload)


def decode_stream(codec: V311Codec | V5Codec, data: bytes, cuts: list[int]) -> list[mqtt5.Packet]:
    buffer = FrameBuffer()
    packets = []
    edges = [0, *sorted({cut % (len(data) + 1) for cut in cuts}), len(data)]
    for start, end in itertools.pairwise(edges):
        buffer.feed(data[start:end])
        packets.extend(codec.decode(received) for received in buffer.frames())
    return packets


# --- protocol_level ----------------------------------------------------------------------------------------------


def test_protocol_level_of_3_1_1_and_5():
    assert protocol_level(connect4()) == 4
    assert protocol_level(connect5()) == 5


@pytest.mark.parametrize(
    ("name", "level"), [("MQIsdp", 3), ("MQTT", 3), ("MQTT", 6), ("MQTT", 0), ("mqtt", 4), ("HTTP", 4)]
)
def test_other_protocols_are_unsupported(name, level):
    with pytest.raises(UnsupportedProtocol, match=f"level {level}") as refused:
        protocol_level(connect4(name=name, level=level))
    assert refused.value.reason_code == 0x84


def test_first_packet_must_be_connect():
    with pytest.raises(ProtocolError, match="PUBLISH: a client must send CONNECT first") as refused:
        protocol_level(frame(0x30, s("a"), b"x"))
    assert type(refused.value) is ProtocolError


@pytest.mark.parametrize(
    "connect",
    [
        frame(0x10),
        frame(0x10, b"\x00\x04MQ"),
        frame(0x10, s("MQTT")),
        frame(0x11, s("MQTT"), b"\x04"),
        memoryview(b"\x10"),
    ],
)
def test_truncated_or_flagged_connect_is_malformed(connect):
    with pytest.raises(MalformedPacket):
        protocol_level(connect)


# --- round trips -------------------------------------------------------------------------------------------------


@given(st.lists(v311_packets, min_size=1, max_size=6), st.lists(st.integers(0, 5_000), max_size=8))
def test_v311_round_trip_through_framing(packets, cuts):
    data = b"".join(V311.encode(packet) for packet in packets)
    assert decode_stream(V311, data, cuts) == packets


@given(st.lists(v5_packets, min_size=1, max_size=6), st.lists(st.integers(0, 5_000), max_size=8))
def test_v5_round_trip_through_framing(packets, cuts):
    data = b"".join(V5.encode(packet) for packet in packets)
    assert decode_stream(V5, data, cuts) == packets


def test_v311_connect_fields_in_v5_terms():
    password = b"\xff\x00binary"  # 3.1.1 passwords are binary data; amqtt alone would decode them as text
    will_flags = 0x04 | 0x08 | 0x20  # will, QoS 1, retain
    packet = V311.decode(connect4(0xC0 | will_flags, s("") + s("dev/1/status") + s(b"gone") + s("alice") + s(password)))
    assert packet == mqtt5.ConnectPacket(
        "",  # an empty client id stays empty (amqtt invents one); the session layer decides (MQTT-3.1.3-8)
        username="alice",
        password=password,
        clean_start=False,
        will=mqtt5.Will("dev/1/status", payload=b"gone", qos=QoS.AT_LEAST_ONCE, retain=True),
        keep_alive=30,
        session_expiry_interval=SESSION_NEVER_EXPIRES,
    )
    clean = V311.decode(connect4(0x02))
    assert clean.clean_start and clean.session_expiry_interval == 0 and clean.client_id == "cid"


def test_v311_subscribe_gets_3_1_1_subscription_options():
    packet = V311.decode(frame(0x82, b"\x00\x0a", s("a/+"), b"\x01"))
    assert packet == mqtt5.SubscribePacket(
        10,
        [
            mqtt5.TopicFilter(
                "a/+",
                max_qos=QoS.AT_LEAST_ONCE,
                no_local=False,
                retain_as_published=False,
                retain_handling=mqtt5.RetainHandling.SEND_ALWAYS,
            )
        ],
    )


# --- 3.1.1 bytes, checked against the spec --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("packet", "expected"),
    [
        # 3.1.1 section 3.2: 0x20, remaining length 2, acknowledge flags (session present), return code.
        (mqtt5.ConnAckPacket(), "20 02 00 00"),
        (mqtt5.ConnAckPacket(session_present=True), "20 02 01 00"),
        (mqtt5.ConnAckPacket(reason_code=mqtt5.ConnAckReasonCode.NOT_AUTHORIZED), "20 02 00 05"),
        # MQTT-3.2.2-4: a refused connection has no session present, whatever the caller said.
        (mqtt5.ConnAckPacket(session_present=True, reason_code=mqtt5.ConnAckReasonCode.SERVER_BUSY), "20 02 00 03"),
        # Sections 3.4 to 3.7: type and flags, remaining length 2, packet identifier; PUBREL's flags are 0b0010.
        (mqtt5.PubAckPacket(10), "40 02 00 0a"),
        (mqtt5.PubAckPacket(0x1234, reason_code=mqtt5.PubAckReasonCode.NOT_AUTHORIZED, reason_str="x"), "40 02 12 34"),
        (mqtt5.PubRecPacket(10), "50 02 00 0a"),
        (mqtt5.PubRelPacket(10), "62 02 00 0a"),
        (mqtt5.PubCompPacket(10), "70 02 00 0a"),
        # Section 3.9.3, figure 3.26: return codes "success max QoS 0, 1, 2" and "failure" are 00 01 02 80.
        (
            mqtt5.SubAckPacket(
                10,
                [
                    mqtt5.SubAckReasonCode.GRANTED_QOS_AT_MOST_ONCE,
                    mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE,
                    mqtt5.SubAckReasonCode.GRANTED_QOS_EXACTLY_ONCE,
                    mqtt5.SubAckReasonCode.NOT_AUTHORIZED,
                ],
            ),
            "90 06 00 0a 00 01 02 80",
        ),
        (mqtt5.UnsubAckPacket(10, [mqtt5.UnsubAckReasonCode.SUCCESS]), "b0 02 00 0a"),
        (mqtt5.PingRespPacket(), "d0 00"),
        # Section 3.3.2, figure 3.11: topic "a/b", packet identifier 10.
        (mqtt5.PublishPacket("a/b", b"hi", qos=QoS.AT_LEAST_ONCE, packet_id=10), "32 09 00 03 61 2f 62 00 0a 68 69"),
        (mqtt5.PublishPacket("a/b", b"", retain=True), "31 05 00 03 61 2f 62"),
        # Section 3.8.3, figure 3.22: "a/b" at QoS 1 and "c/d" at QoS 2.
        (
            mqtt5.SubscribePacket(10, [mqtt5.TopicFilter("a/b", max_qos=QoS.AT_LEAST_ONCE), mqtt5.TopicFilter("c/d")]),
            "82 0e 00 0a 00 03 61 2f 62 01 00 03 63 2f 64 02",
        ),
        # Section 3.10.3, figure 3.30.
        (mqtt5.UnsubscribePacket(10, ["a/b", "c/d"]), "a2 0c 00 0a 00 03 61 2f 62 00 03 63 2f 64"),
        (mqtt5.PingReqPacket(), "c0 00"),
    ],
)
def test_v311_encoding_matches_the_spec(packet, expected):
    assert V311.encode(packet) == bytes.fromhex(expected)


def test_v311_connect_variable_header_matches_the_spec_example():
    # 3.1.1 section 3.1.2.10, figure 3.6: name "MQTT", level 4, flags 0xCE (user name, password, will QoS 1,
    # will flag, clean session), keep alive 10.
    packet = mqtt5.ConnectPacket(
        "c",
        username="u",
        password=b"p",
        clean_start=True,
        will=mqtt5.Will("w", payload=b"m", qos=QoS.AT_LEAST_ONCE),
        keep_alive=10,
    )
    encoded = V311.encode(packet)
    assert encoded[2:12] == bytes.fromhex("00 04 4d 51 54 54 04 ce 00 0a")
    assert encoded[12:] == s("c") + s("w") + s(b"m") + s("u") + s(b"p")


@pytest.mark.parametrize(
    ("reason", "return_code"),
    [
        ("SUCCESS", 0),
        ("UNSUPPORTED_PROTOCOL_VERSION", 1),
        ("CLIENT_ID_NOT_VALID", 2),
        ("SERVER_UNAVAILABLE", 3),
        ("SERVER_BUSY", 3),
        ("QUOTA_EXCEEDED", 3),
        ("UNSPECIFIED_ERROR", 3),
        ("BAD_AUTHENTICATION_METHOD", 3),
        ("BAD_USER_NAME_OR_PASSWORD", 4),
        ("NOT_AUTHORIZED", 5),
        ("BANNED", 5),
    ],
)
def test_connack_reason_codes_become_3_1_1_return_codes(reason, return_code):
    encoded = V311.encode(mqtt5.ConnAckPacket(reason_code=getattr(mqtt5.ConnAckReasonCode, reason)))
    assert encoded == bytes((0x20, 0x02, 0x00, return_code))


def test_server_side_disconnect_is_nothing_to_send():
    assert V311Codec().encode(mqtt5.DisconnectPacket()) == b""
    assert V311Codec(client_side=True).encode(mqtt5.DisconnectPacket()) == b"\xe0\x00"


def test_v5_acknowledgement_without_reason_is_the_short_form():
    # MQTT 5.0 section 3.4.2.1: reason code 0 and no properties may be left out; mqtt5 does.
    assert V5.encode(mqtt5.PubAckPacket(10)) == bytes.fromhex("40 02 00 0a")
    assert V5.decode(frame(0x40, b"\x00\x0a\x10")) == mqtt5.PubAckPacket(
        10, reason_code=mqtt5.PubAckReasonCode.NO_MATCHING_SUBSCRIBERS
    )


def test_what_3_1_1_cannot_carry_is_refused():
    with pytest.raises(TypeError, match="AuthPacket"):
        V311.encode(mqtt5.AuthPacket())
    with pytest.raises(ValueError, match="topic alias"):
        V311.encode(mqtt5.PublishPacket("", b"x", topic_alias=3))
    with pytest.raises(ValueError, match="password without a user name"):
        V311.encode(mqtt5.ConnectPacket("c", password=b"p"))


# --- strictness --------------------------------------------------------------------------------------------------

V311_VIOLATIONS = [
    # fixed header flags (MQTT-2.2.2-1)
    ("puback flags", frame(0x41, b"\x00\x01"), MalformedPacket, "PUBACK: fixed header flags are 0b0001"),
    ("pubrel flags", frame(0x60, b"\x00\x01"), MalformedPacket, "must be 0b0010"),
    ("subscribe flags", frame(0x80, b"\x00\x01", s("a"), b"\x00"), MalformedPacket, "SUBSCRIBE: fixed header flags"),
    ("unsubscribe flags", frame(0xA0, b"\x00\x01", s("a")), MalformedPacket, "UNSUBSCRIBE: fixed header flags"),
    ("connect flags", frame(0x12, s("MQTT"), b"\x04\x02\x00\x1e", s("c")), MalformedPacket, "CONNECT: fixed header"),
    ("pingreq flags", frame(0xC1), MalformedPacket, "PINGREQ: fixed header flags"),
    ("disconnect flags", frame(0xE8), MalformedPacket, "DISCONNECT: fixed header flags"),
    # PUBLISH
    ("qos 3", frame(0x36, s("a"), b"\x00\x01"), MalformedPacket, "QoS 3"),
    ("dup at qos 0", frame(0x38, s("a")), MalformedPacket, "DUP"),
    ("topic not utf-8", frame(0x30, s(b"a\xff")), MalformedPacket, "topic name is not well-formed UTF-8"),
    ("topic surrogate", frame(0x30, s(b"\xed\xa0\x80")), MalformedPacket, "UTF-8"),
    ("topic overlong", frame(0x30, s(b"\xc0\xaf")), MalformedPacket, "UTF-8"),
    ("topic nul", frame(0x30, s(b"a\x00b")), MalformedPacket, "U+0000"),
    ("topic wildcard", frame(0x30, s("a/+")), ProtocolError, "wildcard"),
    ("topic empty", frame(0x30, s("")), ProtocolError, "empty topic name"),
    ("packet id 0", frame(0x32, s("a"), b"\x00\x00"), ProtocolError, "packet identifier 0"),
    ("topic cut short", frame(0x30, b"\x00\x09ab"), MalformedPacket, "topic name needs 9 bytes"),
    ("packet id cut short", frame(0x32, s("a"), b"\x00"), MalformedPacket, "packet identifier"),
    # acknowledgements and bodiless packets
    ("puback too long", frame(0x40, b"\x00\x01\x00"), MalformedPacket, "remaining length 3, must be 2"),
    ("puback too short", frame(0x40, b"\x00"), MalformedPacket, "remaining length 1, must be 2"),
    ("pingreq body", frame(0xC0, b"\x00"), MalformedPacket, "must be 0"),
    ("disconnect body", frame(0xE0, b"\x00"), MalformedPacket, "must be 0"),
    # SUBSCRIBE and UNSUBSCRIBE
    ("subscribe nothing", frame(0x82, b"\x00\x01"), ProtocolError, "no topic filter"),
    ("subscribe qos 3", frame(0x82, b"\x00\x01", s("a"), b"\x03"), MalformedPacket, "requested QoS byte 0x03"),
    ("subscribe reserved bits", frame(0x82, b"\x00\x01", s("a"), b"\x41"), MalformedPacket, "bits 7-2 are reserved"),
    (
        "subscribe filter not utf-8",
        frame(0x82, b"\x00\x01", s(b"\xfe"), b"\x00"),
        MalformedPacket,
        "topic filter is not",
    ),
    ("subscribe filter nul", frame(0x82, b"\x00\x01", s(b"a\x00"), b"\x00"), MalformedPacket, "U+0000"),
    ("subscribe empty filter", frame(0x82, b"\x00\x01", s(""), b"\x00"), MalformedPacket, "empty topic filter"),
    ("subscribe no qos", frame(0x82, b"\x00\x01", s("a")), MalformedPacket, "requested QoS of 'a' needs 1 bytes"),
    (
        "subscribe bad filter",
        frame(0x82, b"\x00\x01", s("a/#/b"), b"\x00"),
        ProtocolError,
        "filter 'a/#/b' breaks the wildcard",
    ),
    ("subscribe packet id 0", frame(0x82, b"\x00\x00", s("a"), b"\x00"), ProtocolError, "packet identifier 0"),
    ("unsubscribe nothing", frame(0xA2, b"\x00\x01"), ProtocolError, "no topic filter"),
    ("unsubscribe filter cut", frame(0xA2, b"\x00\x01", b"\x00\x05ab"), MalformedPacket, "topic filter needs 5"),
    # CONNECT
    ("connect reserved flag", connect4(0x03), MalformedPacket, "reserved bit 0"),
    ("will qos without will", connect4(0x0A), MalformedPacket, "without the will flag"),
    ("will retain without will", connect4(0x22), MalformedPacket, "without the will flag"),
    ("will qos 3", connect4(0x1E, s("c") + s("w") + s(b"m")), MalformedPacket, "will QoS 3"),
    ("password without user", connect4(0x42, s("c") + s(b"p")), MalformedPacket, "password without a user name"),
    ("user name missing", connect4(0x82), MalformedPacket, "user name length needs 2 bytes"),
    ("will message missing", connect4(0x06, s("c") + s("w")), MalformedPacket, "will message length"),
    ("connect trailing bytes", connect4(0x02, s("c") + b"zz"), MalformedPacket, "2 bytes left over"),
    ("client id not utf-8", connect4(0x02, s(b"\xff")), MalformedPacket, "client identifier is not well-formed"),
    ("user name not utf-8", connect4(0x82, s("c") + s(b"\xc3")), MalformedPacket, "user name is not well-formed"),
    ("will topic wildcard", connect4(0x06, s("c") + s("a/#") + s(b"m")), ProtocolError, "wildcard"),
    ("will topic empty", connect4(0x06, s("c") + s("") + s(b"m")), MalformedPacket, "empty will topic"),
    ("connect level 5", connect4(level=5), UnsupportedProtocol, "level 5 reached the MQTT 3.1.1 codec"),
    ("connect MQIsdp", connect4(name="MQIsdp", level=3), UnsupportedProtocol, "'MQIsdp' level 3"),
    # packet types and lengths
    ("reserved type 0", frame(0x00), MalformedPacket, "no such packet type in MQTT 3.1.1"),
    ("auth", frame(0xF0), MalformedPacket, "AUTH: no such packet type"),
    ("length disagrees", memoryview(b"\x40\x02\x00\x01\x00"), MalformedPacket, "announces 2 bytes after it"),
    ("length cut", memoryview(b"\x30\xff"), MalformedPacket, "ends inside its remaining length"),
    # packets a server sends, decoded on the client side
    ("connack reserved flags", frame(0x20, b"\x02\x00"), MalformedPacket, "reserved bits 7-1"),
    ("connack return code 6", frame(0x20, b"\x00\x06"), MalformedPacket, "return code 6 is reserved"),
    ("connack refused with session", frame(0x20, b"\x01\x05"), ProtocolError, "session present with return code 5"),
    ("suback reserved code", frame(0x90, b"\x00\x01\x03"), MalformedPacket, "return code 0x03 is reserved"),
    ("suback no code", frame(0x90, b"\x00\x01"), ProtocolError, "no return code"),
    ("unsuback too long", frame(0xB0, b"\x00\x01\x00"), MalformedPacket, "1 bytes left over"),
]

V5_VIOLATIONS = [
    # strings: mqtt5 itself panics on ill-formed UTF-8
    ("topic not utf-8", frame(0x30, s(b"a\xff"), b"\x00"), MalformedPacket, "topic name is not well-formed UTF-8"),
    ("topic nul", frame(0x30, s(b"a\x00"), b"\x00"), MalformedPacket, "U+0000"),
    ("content type not utf-8", frame(0x30, s("a"), b"\x04\x03", s(b"\xff")), MalformedPacket, "content type (0x03)"),
    ("user property nul", frame(0x30, s("a"), b"\x07\x26", s("k"), s(b"\x00")), MalformedPacket, "U+0000"),
    ("reason string not utf-8", frame(0xE0, b"\x80\x04\x1f", s(b"\xff")), MalformedPacket, "reason string"),
    ("filter not utf-8", frame(0x82, b"\x00\x01\x00", s(b"\xff"), b"\x00"), MalformedPacket, "topic filter is not"),
    ("client id not utf-8", connect5(payload=s(b"\xff")), MalformedPacket, "client identifier is not well-formed"),
    # property blocks that mqtt5 would let overrun
    ("topic alias overruns", frame(0x30, s("a"), b"\x02\x23\x00", b"x"), MalformedPacket, "topic alias (0x23) needs"),
    ("reason string overruns", frame(0x40, b"\x00\x05\x80\x01\x1f", s("no")), MalformedPacket, "reason string"),
    (
        "subscription id overruns",
        frame(0x82, b"\x00\x03\x01\x0b", b"\x05", s("a"), b"\x01"),
        MalformedPacket,
        "ends inside",
    ),
    (
        "session expiry overruns",
        connect5(properties=b"\x02\x11\x00", payload=b"\x00\x00\x0a" + s("c")),
        MalformedPacket,
        "needs 4",
    ),
    (
        "will property not utf-8",
        connect5(0x06, s("c") + b"\x04\x03" + s(b"\xff") + s("w") + s(b"m")),
        MalformedPacket,
        "will property",
    ),
    ("unknown property", frame(0x30, s("a"), b"\x02\x05\x00"), MalformedPacket, "unknown property identifier 0x05"),
    ("payload format 2", frame(0x30, s("a"), b"\x02\x01\x02"), MalformedPacket, "must be 0 or 1"),
    (
        "property of another packet",
        frame(0x30, s("a"), b"\x05\x11\x00\x00\x00\x01"),
        MalformedPacket,
        "SessionExpiryInterval",
    ),
    # PUBLISH
    ("dup at qos 0", frame(0x38, s("a"), b"\x00"), MalformedPacket, "DUP"),
    ("qos 3", frame(0x36, s("a"), b"\x00\x01\x00"), MalformedPacket, "QoS 3"),
    ("packet id 0", frame(0x32, s("a"), b"\x00\x00\x00"), ProtocolError, "packet identifier 0"),
    ("topic wildcard", frame(0x30, s("a/#"), b"\x00"), ProtocolError, "wildcard"),
    ("no topic, no alias", frame(0x30, s(""), b"\x00"), MalformedPacket, "Topic alias must be set"),
    ("no property length", frame(0x30, s("a")), MalformedPacket, "property length"),
    # acknowledgements
    ("puback flags", frame(0x42, b"\x00\x01"), MalformedPacket, "PUBACK: fixed header flags"),
    ("puback reason 5", frame(0x40, b"\x00\x01\x05"), MalformedPacket, "PUBACK: Invalid PubAckReasonCode value: 5"),
    ("puback trailing", frame(0x40, b"\x00\x01\x00\x00\x07"), MalformedPacket, "PUBACK"),
    # SUBSCRIBE and UNSUBSCRIBE
    ("subscribe nothing", frame(0x82, b"\x00\x01\x00"), ProtocolError, "no topic filter"),
    ("subscribe reserved bits", frame(0x82, b"\x00\x01\x00", s("a"), b"\xc1"), MalformedPacket, "reserved bits 7-6"),
    ("no local shared", frame(0x82, b"\x00\x01\x00", s("$share/g/a"), b"\x05"), ProtocolError, "No Local"),
    ("subscribe packet id 0", frame(0x82, b"\x00\x00\x00", s("a"), b"\x01"), ProtocolError, "packet identifier 0"),
    ("subscribe empty filter", frame(0x82, b"\x00\x01\x00", s(""), b"\x01"), MalformedPacket, "empty topic filter"),
    ("retain handling 3", frame(0x82, b"\x00\x01\x00", s("a"), b"\x31"), MalformedPacket, "RetainHandling"),
    ("unsubscribe nothing", frame(0xA2, b"\x00\x01\x00"), ProtocolError, "no topic filter"),
    ("unsubscribe packet id 0", frame(0xA2, b"\x00\x00\x00", s("a")), ProtocolError, "packet identifier 0"),
    # CONNECT
    ("connect reserved flag", connect5(0x03), MalformedPacket, "reserved bit 0"),
    ("will qos without will", connect5(0x0A), MalformedPacket, "without the will flag"),
    ("will retain without will", connect5(0x22), MalformedPacket, "without the will flag"),
    ("connect trailing bytes", connect5(payload=s("c") + b"z"), MalformedPacket, "1 bytes left over"),
    ("connect level 4", connect4(), UnsupportedProtocol, "level 4 reached the MQTT 5.0 codec"),
    ("receive maximum 0", connect5(properties=b"\x03\x21\x00\x00"), MalformedPacket, "Receive maximum must be != 0"),
    # others
    ("reserved type 0", frame(0x00), MalformedPacket, "packet type 0 is reserved"),
    ("auth flags", frame(0xF1), MalformedPacket, "AUTH: fixed header flags"),
    ("length disagrees", memoryview(b"\xc0\x01"), MalformedPacket, "announces 1 bytes after it"),
]


@pytest.mark.parametrize(("case", "data", "error", "fragment"), V311_VIOLATIONS, ids=[v[0] for v in V311_VIOLATIONS])
def test_v311_violations(case, data, error, fragment):
    with pytest.raises(ProtocolError) as refused:
        V311.decode(data)
    assert type(refused.value) is error
    assert fragment in str(refused.value)


@pytest.mark.parametrize(("case", "data", "error", "fragment"), V5_VIOLATIONS, ids=[v[0] for v in V5_VIOLATIONS])
def test_v5_violations(case, data, error, fragment):
    with pytest.raises(ProtocolError) as refused:
        V5.decode(data)
    assert type(refused.value) is error
    assert fragment in str(refused.value)


def test_wildcard_topic_names_carry_reason_topic_name_invalid():
    for codec, data in ((V311, frame(0x30, s("a/#"))), (V5, frame(0x30, s("a/#"), b"\x00"))):
        with pytest.raises(ProtocolError) as refused:
            codec.decode(data)
        assert refused.value.reason_code == 0x90


# mqtt5 reports the UnicodeDecodeError behind its panic as unraisable; pytest would warn about it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_mqtt5_panics_on_ill_formed_utf8_and_the_codec_does_not():
    bad_topic = frame(0x30, s(b"a\xff"), b"\x00")
    # The reason the v5 codec walks strings first: mqtt5 raises a BaseException (and prints a Rust panic).
    with pytest.raises(BaseException) as panic:  # not an Exception: that is the point
        mqtt5.read(bad_topic)
    assert is_rust_panic(panic.value) and not isinstance(panic.value, Exception)
    with pytest.raises(MalformedPacket):
        V5.decode(bad_topic)


# --- garbage never escapes as anything but ProtocolError ---------------------------------------------------------


@given(st.sampled_from([V311, V5]), st.integers(0, 255), st.binary(max_size=120))
def test_random_bodies_raise_only_protocol_errors(codec, first_byte, body):
    try:
        packet = codec.decode(frame(first_byte, body))
    except ProtocolError:
        return
    # Whatever is accepted can be written again and reads back the same.
    assert codec.decode(memoryview(codec.encode(packet))) == packet


@given(st.data())
def test_mutated_packets_raise_only_protocol_errors(data):
    codec = data.draw(st.sampled_from([V311, V5]))
    packet = data.draw(v311_packets if codec is V311 else v5_packets)
    encoded = bytearray(codec.encode(packet))
    body = encoded[body_offset(memoryview(bytes(encoded))) :]
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["replace", "insert", "delete", "flags"]))
        position = data.draw(st.integers(0, max(len(body) - 1, 0)))
        if action == "replace" and body:
            body[position] = data.draw(st.integers(0, 255))
        elif action == "insert":
            body.insert(position, data.draw(st.integers(0, 255)))
        elif action == "delete" and body:
            del body[position]
        else:
            encoded[0] = (encoded[0] & 0xF0) | data.draw(st.integers(0, 15))
    mutated = frame(encoded[0], bytes(body))
    try:
        decoded = codec.decode(mutated)
    except ProtocolError:
        return
    assert codec.decode(memoryview(codec.encode(decoded))) == decoded


@given(st.binary(max_size=200))
def test_random_streams_through_the_whole_pipeline(stream):
    buffer = FrameBuffer(max_packet_size=256)
    codec: V311Codec | V5Codec | None = None
    try:
        buffer.feed(stream)
        for received in buffer.frames():
            if codec is None:
                codec = V5Codec() if protocol_level(received) == 5 else V311Codec()
            codec.decode(received)
    except ProtocolError:
        pass


# --- the 3.1.1 fast path agrees with amqtt -----------------------------------------------------------------------


@given(v311_publishes())
def test_publish_fast_path_agrees_with_amqtt(packet):
    qos = int(packet.qos)
    reference = AmqttPublish.build(packet.topic, packet.payload, packet.packet_id, packet.duplicate, qos, packet.retain)
    encoded = reference.to_bytes()
    assert V311.encode(packet) == encoded
    decoded_by_amqtt = _run_amqtt(
        AmqttPublish, memoryview(encoded), len(encoded) - reference.fixed_header.remaining_length
    )
    decoded = V311.decode(memoryview(encoded))
    assert (decoded.topic, decoded.payload, int(decoded.qos), decoded.retain, decoded.duplicate, decoded.packet_id) == (
        decoded_by_amqtt.topic_name,
        decoded_by_amqtt.data,
        decoded_by_amqtt.qos,
        decoded_by_amqtt.retain_flag,
        decoded_by_amqtt.dup_flag,
        decoded_by_amqtt.packet_id,
    )


@given(
    st.sampled_from(
        [
            (mqtt5.PubAckPacket, AmqttPuback),
            (mqtt5.PubRecPacket, AmqttPubrec),
            (mqtt5.PubRelPacket, AmqttPubrel),
            (mqtt5.PubCompPacket, AmqttPubcomp),
        ]
    ),
    st.integers(0, 65_535),
)
def test_acknowledgement_fast_path_agrees_with_amqtt(classes, packet_id):
    ours, theirs = classes
    encoded = theirs.build(packet_id).to_bytes()
    assert V311.encode(ours(packet_id)) == encoded
    assert V311.decode(memoryview(encoded)) == ours(packet_id)
    assert _run_amqtt(theirs, memoryview(encoded), 2).packet_id == packet_id


@given(st.integers(0, 255), st.binary(max_size=40))
def test_publish_header_fast_path_agrees_with_the_strict_reader(first_low_bits, body):
    first = 0x30 | (first_low_bits & 0x0F)
    data = frame(first, body)
    outcomes = []
    for read in (read_publish_header, read_publish_header_strictly):
        try:
            outcomes.append(read(data, len(data) - len(body), first))
        except ProtocolError as exc:
            outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


# --- against paho-mqtt's own encoder and decoder -----------------------------------------------------------------


class OneClientServer:
    """A listening socket on port 0 that speaks to one client through a codec, packet by packet."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.connection: socket.socket | None = None
        self.frames = FrameBuffer()
        self.codec: V311Codec | V5Codec | None = None
        self.pings = 0

    def accept(self) -> mqtt5.ConnectPacket:
        self.connection, _ = self.listener.accept()
        self.connection.settimeout(10)
        first = self._next_frame()
        self.codec = V5Codec() if protocol_level(first) == 5 else V311Codec()
        packet = self.codec.decode(first)
        assert isinstance(packet, mqtt5.ConnectPacket)
        return packet

    def expect(self, kind: type) -> Any:
        """The next packet, which must be a `kind`; PINGREQs in between are answered and counted."""
        assert self.codec is not None
        while True:
            packet = self.codec.decode(self._next_frame())
            if isinstance(packet, mqtt5.PingReqPacket) and kind is not mqtt5.PingReqPacket:
                self.pings += 1
                self.send(mqtt5.PingRespPacket())
                continue
            assert isinstance(packet, kind), packet
            return packet

    def send(self, packet: mqtt5.Packet) -> None:
        assert self.codec is not None and self.connection is not None
        self.connection.sendall(self.codec.encode(packet))

    def _next_frame(self) -> memoryview:
        assert self.connection is not None
        while (received := self.frames.next_frame()) is None:
            data = self.connection.recv(65_536)
            assert data, "the client closed the connection"
            self.frames.feed(data)
        return received

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.listener.close()


@contextmanager
def paho_session(protocol: int, **connect: Any) -> Iterator[tuple[paho.Client, OneClientServer, Callable[[], Any]]]:
    server = OneClientServer()
    events: queue.Queue[Any] = queue.Queue()
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="dev-1", protocol=protocol)
    client.on_connect = lambda c, u, flags, rc, props: events.put(("connect", flags.session_present, rc.value))
    client.on_subscribe = lambda c, u, mid, codes, props: events.put(("subscribe", mid, [code.value for code in codes]))
    client.on_unsubscribe = lambda c, u, mid, codes, props: events.put(("unsubscribe", mid))
    client.on_publish = lambda c, u, mid, rc, props: events.put(("publish", mid))
    client.on_message = lambda c, u, message: events.put(
        ("message", message.topic, message.payload, message.qos, message.retain)
    )
    client.username_pw_set("alice", "s3cret")
    client.will_set("dev/1/status", b"offline", qos=1, retain=True)
    try:
        # The listener's backlog completes the TCP handshake, so connect() returns before the server accepts.
        client.connect("127.0.0.1", server.port, **connect)
        yield client, server, lambda: events.get(timeout=10)
    finally:
        client.loop_stop()
        server.close()


@pytest.mark.parametrize("protocol", [paho.MQTTv311, paho.MQTTv5], ids=["v311", "v5"])
def test_a_paho_client_session(protocol):
    v5 = protocol == paho.MQTTv5
    with paho_session(protocol, keepalive=1) as (client, server, event):
        connect = server.accept()
        assert server.codec is not None and server.codec.protocol_level == (5 if v5 else 4)
        assert (connect.client_id, connect.username, connect.password, connect.keep_alive) == (
            "dev-1",
            "alice",
            b"s3cret",
            1,
        )
        assert connect.will == mqtt5.Will("dev/1/status", payload=b"offline", qos=QoS.AT_LEAST_ONCE, retain=True)
        client.loop_start()
        server.send(mqtt5.ConnAckPacket())
        assert event() == ("connect", False, 0)

        refused = mqtt5.SubAckReasonCode.NOT_AUTHORIZED
        _, mid = client.subscribe([("a/+", 1), ("b/#", 2)])
        subscribe = server.expect(mqtt5.SubscribePacket)
        assert [(f.pattern, int(f.max_qos)) for f in subscribe.topic_filters] == [("a/+", 1), ("b/#", 2)]
        server.send(
            mqtt5.SubAckPacket(subscribe.packet_id, [mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE, refused])
        )
        assert event() == ("subscribe", mid, [1, 0x87 if v5 else 0x80])

        properties = None
        if v5:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = [("unit", "C")]
            properties.ContentType = "text/plain"
        client.publish("a/b", b"21.5", qos=1, properties=properties)
        publish = server.expect(mqtt5.PublishPacket)
        assert (publish.topic, publish.payload, int(publish.qos), publish.packet_id is not None) == (
            "a/b",
            b"21.5",
            1,
            True,
        )
        if v5:
            assert (publish.user_properties, publish.content_type) == ([("unit", "C")], "text/plain")
        server.send(mqtt5.PubAckPacket(publish.packet_id))
        assert event()[0] == "publish"

        client.publish("a/c", b"", qos=2, retain=True)
        publish = server.expect(mqtt5.PublishPacket)
        assert (int(publish.qos), publish.retain, publish.payload) == (2, True, b"")
        server.send(mqtt5.PubRecPacket(publish.packet_id))
        assert server.expect(mqtt5.PubRelPacket).packet_id == publish.packet_id
        server.send(mqtt5.PubCompPacket(publish.packet_id))
        assert event()[0] == "publish"

        server.send(mqtt5.PublishPacket("a/x", b"to you", qos=QoS.AT_LEAST_ONCE, packet_id=5))
        assert event() == ("message", "a/x", b"to you", 1, False)
        assert server.expect(mqtt5.PubAckPacket).packet_id == 5
        server.send(mqtt5.PublishPacket("b/y", b"twice", qos=QoS.EXACTLY_ONCE, packet_id=6, retain=True))
        assert server.expect(mqtt5.PubRecPacket).packet_id == 6
        server.send(mqtt5.PubRelPacket(6))
        assert server.expect(mqtt5.PubCompPacket).packet_id == 6
        assert event() == ("message", "b/y", b"twice", 2, True)

        _, mid = client.unsubscribe("a/+")
        unsubscribe = server.expect(mqtt5.UnsubscribePacket)
        assert unsubscribe.patterns == ["a/+"]
        server.send(mqtt5.UnsubAckPacket(unsubscribe.packet_id, [mqtt5.UnsubAckReasonCode.SUCCESS]))
        assert event() == ("unsubscribe", mid)

        if not server.pings:  # keep alive 1 s: paho pings when idle
            server.expect(mqtt5.PingReqPacket)
            server.send(mqtt5.PingRespPacket())
        client.disconnect()
        assert isinstance(server.expect(mqtt5.DisconnectPacket), mqtt5.DisconnectPacket)


@given(
    topic=st.text(st.characters(blacklist_characters="\x00+#", blacklist_categories=("Cs",)), min_size=1, max_size=40),
    payload=st.binary(max_size=300),
    qos=st.integers(0, 2),
    retain=st.booleans(),
    duplicate=st.booleans(),
    packet_id=st.integers(1, 0xFFFF),
)
def test_encode_publish_from_fields_decodes_back(topic, payload, qos, retain, duplicate, packet_id):
    duplicate = duplicate and qos > 0  # DUP at QoS 0 is malformed (MQTT-3.3.1-2)
    data = encode_publish(topic, payload, qos, retain, packet_id if qos else None, duplicate)
    packet = V311Codec().decode(memoryview(data))
    assert isinstance(packet, mqtt5.PublishPacket)
    assert (packet.topic, packet.payload, int(packet.qos), packet.retain, packet.duplicate) == (
        topic,
        payload,
        qos,
        retain,
        duplicate,
    )
    assert packet.packet_id == (packet_id if qos else None)


def test_encode_publish_refuses_what_3_1_1_cannot_carry():
    with pytest.raises(ValueError, match="no topic aliases"):
        encode_publish("", b"", 0, False, None)
    with pytest.raises(ValueError, match="cannot encode"):
        encode_publish("t" * 70_000, b"", 0, False, None)


@given(
    st.sampled_from([0x30, 0x31, 0x32, 0x33, 0x34, 0x38, 0x39, 0x3A, 0x3B, 0x3F]),
    st.one_of(
        st.text(max_size=12).map(lambda topic: len(topic.encode()).to_bytes(2, "big") + topic.encode()),
        st.binary(max_size=14),
    ),
    st.binary(max_size=20),
)
def test_the_in_place_publish_decoder_agrees_with_the_codec(first, head, payload):
    """decode_short_publish either declines (None) or gives exactly what V311Codec.decode gives for the frame."""
    from mqtt_bridge.errors import ProtocolError as CodecError
    from mqtt_bridge.wire.codec_v311 import decode_short_publish

    body = head + payload
    frame = bytes([first, len(body)]) + body
    buffer = bytearray(b"junk") + frame + b"more"
    fast = decode_short_publish(buffer, 6, 6 + len(body))
    if fast is None:
        return
    try:
        slow = V311Codec().decode(memoryview(frame))
    except CodecError as exc:
        raise AssertionError(f"the fast path accepted a packet the codec refuses: {exc}") from exc
    assert isinstance(slow, mqtt5.PublishPacket)
    assert (fast.topic, fast.payload, int(fast.qos), fast.retain, fast.packet_id, fast.duplicate) == (
        slow.topic,
        slow.payload,
        int(slow.qos),
        slow.retain,
        slow.packet_id,
        slow.duplicate,
    )
    assert type(fast.payload) is bytes


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b"\x30\x05\x00\x01ahi", ("a", b"hi", 0, False, None, False)),
        (b"\x31\x05\x00\x01ahi", ("a", b"hi", 0, True, None, False)),
        (b"\x32\x07\x00\x01a\x12\x34hi", ("a", b"hi", 1, False, 0x1234, False)),
        (b"\x3b\x05\x00\x01a\x00\x07", ("a", b"", 1, True, 7, True)),
    ],
)
def test_the_in_place_publish_decoder_takes_ordinary_qos0_and_qos1_publishes(frame, expected):
    from mqtt_bridge.wire.codec_v311 import decode_short_publish

    buffer = bytearray(frame)
    packet = decode_short_publish(buffer, 2, len(frame))
    assert packet is not None
    got = (packet.topic, packet.payload, int(packet.qos), packet.retain, packet.packet_id, packet.duplicate)
    assert got == expected


@pytest.mark.parametrize(
    "frame",
    [
        b"\x32\x05\x00\x01a\x00\x00",  # packet id 0
        b"\x32\x03\x00\x01a",  # no room for the packet id
        b"\x38\x03\x00\x01a",  # DUP on QoS 0
        b"\x34\x05\x00\x01a\x00\x01",  # QoS 2: its own path
    ],
)
def test_the_in_place_publish_decoder_leaves_the_rest_to_the_codec(frame):
    from mqtt_bridge.wire.codec_v311 import decode_short_publish

    assert decode_short_publish(bytearray(frame), 2, len(frame)) is None


@given(
    v5_publishes().filter(lambda packet: packet.topic_alias is None and packet.topic),
    st.integers(0, 17_000),  # payload padding: remaining and property lengths of one, two and three bytes
    st.integers(1, 65_535),
    st.booleans(),
)
def test_a_topic_alias_spliced_into_an_encoded_publish_decodes_as_the_encoder_would_have_it(
    packet, padding, alias, keep_topic
):
    packet = mqtt5.PublishPacket(
        packet.topic,
        packet.payload + b"p" * padding,
        qos=packet.qos,
        retain=packet.retain,
        packet_id=packet.packet_id,
        duplicate=packet.duplicate,
        payload_format_indicator=packet.payload_format_indicator,
        message_expiry_interval=packet.message_expiry_interval,
        content_type=packet.content_type,
        response_topic=packet.response_topic,
        correlation_data=packet.correlation_data,
        subscription_ids=packet.subscription_ids,
        user_properties=packet.user_properties,
    )
    data = packet.write()
    start, end = publish_topic_bounds(data)
    assert data[start:end] == packet.topic.encode()
    spliced = with_topic_alias(data, start, end, alias, keep_topic)
    decoded = V5.decode(memoryview(spliced))  # the strict codec: every length must add up
    assert isinstance(decoded, mqtt5.PublishPacket)
    assert decoded.topic_alias == alias
    assert decoded.topic == (packet.topic if keep_topic else "")
    for field in (
        "payload", "qos", "retain", "packet_id", "duplicate", "payload_format_indicator", "message_expiry_interval",
        "content_type", "response_topic", "correlation_data", "subscription_ids", "user_properties",
    ):  # fmt: skip
        assert getattr(decoded, field) == getattr(packet, field), field
