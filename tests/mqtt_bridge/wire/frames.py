"""MQTT frames built by hand for the codec tests: length-prefixed fields, fixed headers, CONNECTs, and a
decoder that reads a byte stream cut at given places."""

from __future__ import annotations

import itertools

import mqtt5

from mqtt_bridge.wire.codec_v5 import V5Codec
from mqtt_bridge.wire.codec_v311 import V311Codec
from mqtt_bridge.wire.framing import FrameBuffer, encode_remaining_length

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
