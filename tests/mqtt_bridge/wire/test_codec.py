"""The MQTT codecs (mqtt_bridge/wire/codec.py, codec_v311.py, codec_v5.py): protocol levels, round trips through
framing, 3.1.1 bytes checked against the specification, strictness, and garbage that never escapes as anything but
ProtocolError. Their fast paths: test_codec_fast_paths.py; against paho-mqtt: test_codec_with_paho.py."""

import mqtt5
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.errors import MalformedPacket, ProtocolError, UnsupportedProtocol
from mqtt_bridge.wire.codec import (
    body_offset,
    is_rust_panic,
    protocol_level,
)
from mqtt_bridge.wire.codec_v5 import V5Codec
from mqtt_bridge.wire.codec_v311 import SESSION_NEVER_EXPIRES, V311Codec
from mqtt_bridge.wire.framing import FrameBuffer
from tests.mqtt_bridge.wire.frames import V5, V311, QoS, connect4, connect5, decode_stream, frame, s
from tests.mqtt_bridge.wire.packet_strategies import (
    v5_packets,
    v311_packets,
)

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
