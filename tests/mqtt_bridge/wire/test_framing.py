import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.errors import MalformedPacket, PacketTooLarge, ProtocolError
from mqtt_bridge.wire.framing import (
    DEFAULT_MAX_PACKET_SIZE,
    MAX_VARIABLE_BYTE_INTEGER,
    PROTOCOL_MAX_PACKET_SIZE,
    FrameBuffer,
    decode_variable_byte_integer,
    encode_remaining_length,
)

# MQTT 3.1.1 section 2.2.3, Table 2.4 "Size of Remaining Length field": the boundaries of each encoded size.
SPEC_REMAINING_LENGTHS = [
    (0, "00"),
    (127, "7f"),
    (128, "80 01"),
    (16_383, "ff 7f"),
    (16_384, "80 80 01"),
    (2_097_151, "ff ff 7f"),
    (2_097_152, "80 80 80 01"),
    (268_435_455, "ff ff ff 7f"),
]


def frame(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_remaining_length(len(body)) + body


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]


@pytest.mark.parametrize(("value", "encoded"), SPEC_REMAINING_LENGTHS)
def test_remaining_length_matches_the_spec_table(value, encoded):
    assert encode_remaining_length(value) == bytes.fromhex(encoded)
    assert decode_variable_byte_integer(bytes.fromhex(encoded), 0) == (value, len(bytes.fromhex(encoded)))


@given(st.integers(0, MAX_VARIABLE_BYTE_INTEGER), st.binary(max_size=3))
def test_remaining_length_round_trips(value, tail):
    encoded = encode_remaining_length(value)
    assert decode_variable_byte_integer(b"\x30" + encoded + tail, 1) == (value, len(encoded))
    # Any strict prefix of the encoding is incomplete, not wrong.
    for size in range(len(encoded)):
        assert decode_variable_byte_integer(encoded[:size], 0) is None


@pytest.mark.parametrize("value", [-1, MAX_VARIABLE_BYTE_INTEGER + 1])
def test_remaining_length_out_of_range_is_refused(value):
    with pytest.raises(ValueError, match="variable byte integer"):
        encode_remaining_length(value)


packet_frames = st.lists(
    st.builds(frame, st.integers(0, 255), st.binary(max_size=300)),
    max_size=12,
)


@given(packet_frames, st.lists(st.integers(0, 10_000), max_size=20))
def test_frames_come_out_whole_whatever_the_split_points(frames, cuts):
    stream = b"".join(frames)
    buffer = FrameBuffer()
    received = []
    for chunk in split(stream, cuts):
        buffer.feed(chunk)
        received.extend(buffer.frames())
    assert received == frames
    assert buffer.buffered == 0
    assert buffer.next_frame() is None


def test_one_byte_at_a_time():
    frames = [frame(0x30, b"\x00\x01a" + b"x" * 200), frame(0xC0, b""), frame(0x82, b"y" * 20_000)]
    buffer = FrameBuffer()
    received = []
    for byte in b"".join(frames):
        buffer.feed(bytes((byte,)))
        received.extend(buffer.frames())
    assert received == frames


def test_a_frame_is_unchanged_by_later_feeds():
    first = frame(0x30, b"\x00\x01a" + b"1" * 100)
    buffer = FrameBuffer()
    buffer.feed(first + first[:10])
    kept = buffer.next_frame()
    assert kept is not None
    for _ in range(2_000):  # enough to make the buffer compact itself more than once
        buffer.feed(frame(0x30, b"\x00\x01b" + b"2" * 100))
        assert list(buffer.frames())
    assert kept == first


def test_consumed_bytes_do_not_accumulate():
    buffer = FrameBuffer()
    packet = frame(0x30, b"\x00\x01a" + b"x" * 1000)
    for _ in range(1_000):
        buffer.feed(packet + packet[:500])
        assert list(buffer.frames())
        buffer.feed(packet[500:])
        assert list(buffer.frames()) == [packet]
    assert buffer.buffered == 0
    assert len(buffer._buffer) < 2 * len(packet)


def test_incomplete_header_waits():
    buffer = FrameBuffer()
    buffer.feed(b"\x30\xff\xff")  # two continuation bytes: two more length bytes may follow
    assert buffer.next_frame() is None
    buffer.feed(b"\x01")
    assert buffer.next_frame() is None  # 32,767 bytes announced, none received
    assert buffer.buffered == 4


def test_a_fifth_length_byte_is_malformed():
    buffer = FrameBuffer()
    buffer.feed(b"\x30\xff\xff\xff\xff\x7f")
    with pytest.raises(MalformedPacket, match="longer than 4 bytes"):
        buffer.next_frame()
    with pytest.raises(MalformedPacket):  # the connection stays broken
        buffer.next_frame()


def test_four_continuation_bytes_are_malformed_before_a_fifth_arrives():
    buffer = FrameBuffer()
    buffer.feed(b"\x30\x80\x80\x80\x80")
    with pytest.raises(MalformedPacket, match="remaining length"):
        buffer.next_frame()


def test_oversize_packet_is_refused_from_its_header_alone():
    buffer = FrameBuffer(max_packet_size=1000)
    buffer.feed(b"\x30" + encode_remaining_length(5_000_000))  # the header only: no body buffered yet
    with pytest.raises(PacketTooLarge) as refused:
        buffer.next_frame()
    message = str(refused.value)
    assert "PUBLISH" in message and "5000005 bytes" in message and "1000 bytes" in message
    assert refused.value.reason_code == 0x95


def test_max_packet_size_counts_the_fixed_header():
    largest = frame(0x30, b"\x00\x01a" + b"x" * 994)
    assert len(largest) == 1000
    buffer = FrameBuffer(max_packet_size=1000)
    buffer.feed(largest)
    assert buffer.next_frame() == largest
    buffer.feed(frame(0x30, b"\x00\x01a" + b"x" * 995))
    with pytest.raises(PacketTooLarge, match="1001 bytes"):
        buffer.next_frame()


def test_default_limit():
    assert DEFAULT_MAX_PACKET_SIZE == 1024 * 1024
    assert FrameBuffer().max_packet_size == DEFAULT_MAX_PACKET_SIZE


@pytest.mark.parametrize("size", [0, 1, PROTOCOL_MAX_PACKET_SIZE + 1])
def test_unusable_limits_are_refused(size):
    with pytest.raises(ValueError, match="max_packet_size"):
        FrameBuffer(max_packet_size=size)


@given(st.lists(st.binary(max_size=64), max_size=20))
def test_garbage_raises_only_protocol_errors(chunks):
    buffer = FrameBuffer(max_packet_size=4096)
    try:
        for chunk in chunks:
            buffer.feed(chunk)
            for received in buffer.frames():
                assert 2 <= len(received) <= 4096
    except ProtocolError:
        pass
