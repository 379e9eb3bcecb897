"""The compiled MQTT front door (framing, codec, codec_v311, codec_v5) against its pure twin, the same .py files
interpreted (tests/compiled_modules.py): the same frames out of both frame buffers, the same bytes out of both
encoders, and the same packet or the same error (class, message, reason code) out of both decoders, for
well-formed packets and for packets with bytes changed. Each test also runs, interpreted against interpreted, when
the suite runs on the pure modules (MQGATE_PURE=1)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import mqtt5
from hypothesis import given, settings
from hypothesis import strategies as st

import mqtt_bridge.wire.codec as compiled_codec
import mqtt_bridge.wire.codec_v5 as compiled_v5
import mqtt_bridge.wire.codec_v311 as compiled_v311
import mqtt_bridge.wire.framing as compiled_framing
from tests.compiled_modules import pure_twin
from tests.mqtt_bridge.wire.packet_strategies import topic_names, v5_packets, v5_publishes, v311_packets

pure_framing = pure_twin("mqtt_bridge.wire.framing")
pure_codec = pure_twin("mqtt_bridge.wire.codec")
pure_v311 = pure_twin("mqtt_bridge.wire.codec_v311")
pure_v5 = pure_twin("mqtt_bridge.wire.codec_v5")

# Each codec as a client would have it, so that a 3.1.1 DISCONNECT encodes to a packet too.
V311_CODECS = (compiled_v311.V311Codec(client_side=True), pure_v311.V311Codec(client_side=True))
V5_CODECS = (compiled_v5.V5Codec(), pure_v5.V5Codec())


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What `call(*args)` gives: its result, or its error. The error classes are the same for both twins (the
    twins share mqtt_bridge/errors.py, which is not compiled), and so must be the messages and reason codes."""
    try:
        return ("result", call(*args))
    except Exception as exc:
        return ("error", type(exc), str(exc), getattr(exc, "reason_code", None))


def test_the_twins_are_apart():
    assert pure_v311.FieldReader is pure_codec.FieldReader is not compiled_codec.FieldReader
    assert pure_v5.decode_variable_byte_integer is pure_framing.decode_variable_byte_integer
    assert pure_v5.MalformedPacket is compiled_v5.MalformedPacket  # errors.py is shared


# --- framing -----------------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(st.integers(-2, 2**28 + 2), st.binary(max_size=6), st.integers(0, 3))
def test_variable_byte_integers_encode_and_decode_alike(value, data, offset):
    encoded = outcome(compiled_framing.encode_variable_byte_integer, value)
    assert encoded == outcome(pure_framing.encode_variable_byte_integer, value)
    if encoded[0] == "result":
        assert compiled_framing.decode_variable_byte_integer(encoded[1], 0) == (value, len(encoded[1]))
    for view in (data, bytearray(data), memoryview(data)):
        decoded = outcome(compiled_framing.decode_variable_byte_integer, view, offset)
        assert decoded == outcome(pure_framing.decode_variable_byte_integer, view, offset)


def split_stream(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted({cut % (len(data) + 1) for cut in cuts}), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]


def received(framing: Any, chunks: list[bytes], max_packet_size: int, by_bounds: bool) -> list[tuple[Any, ...]]:
    """What a connection's FrameBuffer hands out, chunk by chunk: frames, `buffered` counts, and the error that ends
    it (then asked once more: it must raise again)."""
    buffer = framing.FrameBuffer(max_packet_size)
    seen: list[tuple[Any, ...]] = []
    for chunk in chunks:
        buffer.feed(chunk)
        while True:
            if by_bounds:  # as MqttProtocol reads them: positions in the buffer, then advance
                got = outcome(buffer.next_bounds)
                if got[0] == "result" and got[1] is not None:
                    start, body, end = got[1]
                    got = ("result", bytes(buffer.data[start:end]), body - start)
                    buffer.advance(end)
            else:
                got = outcome(buffer.next_frame)
                if got[0] == "result" and got[1] is not None:
                    got = ("result", got[1].tobytes())
            seen.append(got)
            if got[0] == "error":
                seen.append(outcome(buffer.next_frame))
                return seen
            if got[1] is None:
                break
        seen.append(("buffered", buffer.buffered))
    return seen


frames = st.builds(
    lambda first, body: bytes((first,)) + compiled_framing.encode_remaining_length(len(body)) + body,
    st.integers(0, 255),
    st.binary(max_size=300),
)
# Well-formed frames, then anything: a broken length (five continuation bytes), a frame too large, garbage.
streams = st.builds(
    lambda packets, tail: b"".join(packets) + tail,
    st.lists(frames, max_size=8),
    st.one_of(st.just(b""), st.binary(max_size=12), st.just(b"\x30\xff\xff\xff\xff\x01")),
)


@settings(max_examples=200)
@given(
    streams,
    st.lists(st.integers(0, 4000), max_size=12),
    st.sampled_from([2, 5, 130, 300, compiled_framing.DEFAULT_MAX_PACKET_SIZE]),
    st.booleans(),
)
def test_frame_buffers_split_streams_alike(data, cuts, max_packet_size, by_bounds):
    chunks = split_stream(data, cuts)
    compiled = received(compiled_framing, chunks, max_packet_size, by_bounds)
    assert compiled == received(pure_framing, chunks, max_packet_size, by_bounds)
    assert compiled[-1][0] in ("buffered", "error")


@given(st.integers(-1, compiled_framing.PROTOCOL_MAX_PACKET_SIZE + 1))
def test_frame_buffer_limits_are_checked_alike(max_packet_size):
    compiled = outcome(lambda: compiled_framing.FrameBuffer(max_packet_size).max_packet_size)
    assert compiled == outcome(lambda: pure_framing.FrameBuffer(max_packet_size).max_packet_size)


# --- codecs ------------------------------------------------------------------------------------------------------


def decoded(codec: Any, data: bytes) -> tuple[Any, ...]:
    return outcome(codec.decode, memoryview(data))


@settings(max_examples=200)
@given(v311_packets)
def test_v311_packets_encode_and_decode_alike(packet):
    compiled, pure = V311_CODECS
    data = compiled.encode(packet)
    assert pure.encode(packet) == data
    assert decoded(compiled, data) == decoded(pure, data) == ("result", packet)


@settings(max_examples=200)
@given(v5_packets)
def test_v5_packets_encode_and_decode_alike(packet):
    compiled, pure = V5_CODECS
    data = compiled.encode(packet)
    assert pure.encode(packet) == data
    assert decoded(compiled, data) == decoded(pure, data) == ("result", packet)


@st.composite
def changed_packets(draw: st.DrawFn, packets: st.SearchStrategy[mqtt5.Packet], codec: Any) -> bytes:
    """An encoded packet with its body changed (bytes replaced, cut or added) and its remaining length written anew,
    so that the decoders read past the fixed header into the broken fields; sometimes other fixed header flags."""
    data = codec.encode(draw(packets))
    if not data:  # a 3.1.1 server's DISCONNECT
        return data
    body_start = 2
    while data[body_start - 1] & 0x80:
        body_start += 1
    body = bytearray(data[body_start:])
    for _ in range(draw(st.integers(1, 3))):
        change = draw(st.sampled_from(["replace", "cut", "add"]))
        at = draw(st.integers(0, len(body)))
        if change == "replace" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif change == "cut":
            del body[at:]
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=3))
    first = data[0] if draw(st.booleans()) else (data[0] & 0xF0) | draw(st.integers(0, 15))
    return bytes((first,)) + compiled_framing.encode_remaining_length(len(body)) + bytes(body)


@settings(max_examples=200)
@given(changed_packets(v311_packets, V311_CODECS[0]))
def test_changed_v311_packets_decode_or_fail_alike(data):
    assert decoded(V311_CODECS[0], data) == decoded(V311_CODECS[1], data)


@settings(max_examples=200)
@given(changed_packets(v5_packets, V5_CODECS[0]))
def test_changed_v5_packets_decode_or_fail_alike(data):
    assert decoded(V5_CODECS[0], data) == decoded(V5_CODECS[1], data)


@settings(max_examples=200)
@given(st.one_of(changed_packets(v5_packets, V5_CODECS[0]), changed_packets(v311_packets, V311_CODECS[0])))
def test_first_packets_are_read_alike(data):
    """What a connection does with its first bytes: the first byte alone, then the protocol level of the CONNECT."""
    if data:
        first = outcome(compiled_codec.check_first_byte, data[0])
        assert first == outcome(pure_codec.check_first_byte, data[0])
    level = outcome(compiled_codec.protocol_level, memoryview(data))
    assert level == outcome(pure_codec.protocol_level, memoryview(data))


@settings(max_examples=200)
@given(
    st.one_of(v311_packets, changed_packets(v311_packets, V311_CODECS[0])),
    st.binary(max_size=3),
    st.binary(max_size=3),
)
def test_publishes_read_in_place_alike(packet, before, after):
    """`decode_short_publish` and `read_short_publish` read a frame from a connection's receive buffer, with other
    bytes around it."""
    data = packet if isinstance(packet, bytes) else V311_CODECS[0].encode(packet)
    if len(data) < 2 or data[1] & 0x80:
        return  # the in-place reader takes frames with a one-byte remaining length only
    buffer = bytearray(before + data + after)
    body, end = len(before) + 2, len(before) + len(data)
    compiled = outcome(compiled_v311.decode_short_publish, buffer, body, end)
    assert compiled == outcome(pure_v311.decode_short_publish, buffer, body, end)
    fields = outcome(compiled_v311.read_short_publish, buffer, body, end)
    assert fields == outcome(pure_v311.read_short_publish, buffer, body, end)
    assert (fields[1] is None) == (compiled[1] is None)
    if compiled[0] == "result" and compiled[1] is not None:
        assert compiled == decoded(V311_CODECS[1], data)


@settings(max_examples=200)
@given(
    st.one_of(topic_names, st.just("")),
    st.binary(max_size=200),
    st.integers(0, 2),
    st.booleans(),
    st.integers(0, 65_536),
    st.booleans(),
)
def test_publishes_encoded_from_fields_alike(topic, payload, qos, retain, packet_id, duplicate):
    packet_id = packet_id if qos else None
    compiled = outcome(compiled_v311.encode_publish, topic, payload, qos, retain, packet_id, duplicate)
    assert compiled == outcome(pure_v311.encode_publish, topic, payload, qos, retain, packet_id, duplicate)


@settings(max_examples=200)
@given(
    v5_publishes().filter(lambda packet: packet.topic_alias is None),
    st.integers(1, 65_535),
    st.booleans(),
)
def test_topic_aliases_are_spliced_alike(packet, alias, keep_topic):
    data = V5_CODECS[0].encode(packet)
    bounds = compiled_v5.publish_topic_bounds(data)
    assert bounds == pure_v5.publish_topic_bounds(data)
    aliased = compiled_v5.with_topic_alias(data, *bounds, alias, keep_topic)
    assert aliased == pure_v5.with_topic_alias(data, *bounds, alias, keep_topic)
    assert decoded(V5_CODECS[1], aliased)[1].topic_alias == alias
