"""The codecs' fast paths against the slow ones they stand in for: the 3.1.1 PUBLISH and acknowledgement fast
paths against amqtt, PUBLISH encoding from fields, the in-place PUBLISH decoder, and topic aliases spliced into
encoded PUBLISHes."""

import mqtt5
import pytest
from amqtt.mqtt.puback import PubackPacket as AmqttPuback
from amqtt.mqtt.pubcomp import PubcompPacket as AmqttPubcomp
from amqtt.mqtt.publish import PublishPacket as AmqttPublish
from amqtt.mqtt.pubrec import PubrecPacket as AmqttPubrec
from amqtt.mqtt.pubrel import PubrelPacket as AmqttPubrel
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.wire.codec import (
    read_publish_header,
    read_publish_header_strictly,
)
from mqtt_bridge.wire.codec_v5 import publish_topic_bounds, with_topic_alias
from mqtt_bridge.wire.codec_v311 import V311Codec, _run_amqtt, encode_publish
from tests.mqtt_bridge.wire.frames import V5, V311, frame
from tests.mqtt_bridge.wire.packet_strategies import (
    v5_publishes,
    v311_publishes,
)

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
