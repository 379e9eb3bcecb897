"""MQTT packets for the robustness tests, written independently of our codecs (MQTT 5 with `mqtt5`'s encoder,
3.1.1 by hand from the specification), and the hypothesis strategies that mutate and cut them."""

from __future__ import annotations

import struct

import mqtt5
from hypothesis import strategies as st

# Keep alive of every CONNECT built here: an accepted connection that goes quiet is closed after 1.5 times this.
KEEP_ALIVE_S = 1

# --- bytes on the wire ------------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        value, low = divmod(value, 128)
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + varint(len(body)) + body


def u16(value: int) -> bytes:
    return struct.pack(">H", value)


def text(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return u16(len(raw)) + raw


def split(data: bytes) -> tuple[list[bytes], bytes]:
    """Cut a byte stream into whole packets; return them and the incomplete or undecodable rest."""
    frames = []
    position = 0
    while position + 2 <= len(data):
        length = shift = 0
        for size in range(1, 5):
            if position + size >= len(data):
                return frames, data[position:]
            byte = data[position + size]
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        else:
            return frames, data[position:]
        end = position + 1 + size + length
        if end > len(data):
            break
        frames.append(data[position:end])
        position = end
    return frames, data[position:]


def v311_connect(
    client_id: str = "fuzz", keep_alive: int = KEEP_ALIVE_S, flags: int = 0x02, rest: bytes = b""
) -> bytes:
    return packet(0x10, text("MQTT") + bytes([4, flags]) + u16(keep_alive) + text(client_id) + rest)


def v5_connect(client_id: str = "fuzz", max_packet_size: int | None = None) -> bytes:
    return mqtt5.ConnectPacket(
        client_id, keep_alive=KEEP_ALIVE_S, clean_start=True, max_packet_size=max_packet_size
    ).write()


V311_PACKETS = {
    "publish0": packet(0x30, text("fuzz/a") + b"payload"),
    "publish1": packet(0x32, text("fuzz/b") + u16(1) + b"payload"),
    "publish2": packet(0x34, text("fuzz/c") + u16(2) + b"payload"),
    "puback": packet(0x40, u16(1)),
    "pubrec": packet(0x50, u16(1)),
    "pubrel": packet(0x62, u16(2)),
    "pubcomp": packet(0x70, u16(1)),
    "subscribe": packet(0x82, u16(3) + text("fuzz/#") + b"\x01" + text("fuzz/+/x") + b"\x02"),
    "unsubscribe": packet(0xA2, u16(4) + text("fuzz/#")),
    "pingreq": b"\xc0\x00",
    "disconnect": b"\xe0\x00",
}

QOS = (mqtt5.QoS.AT_MOST_ONCE, mqtt5.QoS.AT_LEAST_ONCE, mqtt5.QoS.EXACTLY_ONCE)
V5_PACKETS = {
    "publish0": mqtt5.PublishPacket("fuzz/a", b"payload").write(),
    "publish1": mqtt5.PublishPacket(
        "fuzz/b",
        b"payload",
        qos=QOS[1],
        packet_id=1,
        payload_format_indicator=1,
        message_expiry_interval=60,
        content_type="text/plain",
        response_topic="fuzz/reply",
        correlation_data=b"\x00\x01",
        user_properties=[("k", "v")],
    ).write(),
    "publish2_alias": mqtt5.PublishPacket("fuzz/c", b"payload", qos=QOS[2], packet_id=2, topic_alias=1).write(),
    "puback": mqtt5.PubAckPacket(1).write(),
    "pubrec": mqtt5.PubRecPacket(1).write(),
    "pubrel": mqtt5.PubRelPacket(2).write(),
    "pubcomp": mqtt5.PubCompPacket(1, reason_str="done").write(),
    "subscribe": mqtt5.SubscribePacket(
        3, [mqtt5.TopicFilter("fuzz/#", max_qos=QOS[1], no_local=True)], subscription_id=5
    ).write(),
    "unsubscribe": mqtt5.UnsubscribePacket(4, ["fuzz/#"], user_properties=[("k", "v")]).write(),
    "pingreq": mqtt5.PingReqPacket().write(),
    "disconnect": mqtt5.DisconnectPacket(reason_str="bye").write(),
    "auth": mqtt5.AuthPacket(authentication_method="x").write(),
}


# --- strategies -------------------------------------------------------------------------------------------

client_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12).map(
    lambda tail: f"fuzz-{tail}"
)


@st.composite
def connects(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from([4, 5]))
    client_id = draw(client_ids)
    if version == 4:
        return version, v311_connect(client_id)
    return version, v5_connect(client_id, draw(st.none() | st.integers(64, 1 << 20)))


@st.composite
def mutated_sessions(draw: st.DrawFn) -> tuple[int, bytes]:
    """A valid CONNECT and valid packets of one protocol level, one packet mutated."""
    version, connect = draw(connects())
    table = V311_PACKETS if version == 4 else V5_PACKETS
    names = draw(st.lists(st.sampled_from(sorted(table)), min_size=0, max_size=4))
    packets = [connect, *(table[name] for name in names)]
    target = draw(st.integers(0, len(packets) - 1))
    packets[target] = draw(mutations(packets[target]))
    return version, b"".join(packets)


@st.composite
def mutations(draw: st.DrawFn, frame: bytes) -> bytes:
    header_size = _header_size(frame)
    body = bytearray(frame[header_size:])
    # (Truncation has its own test: each truncated packet waits for a timeout.)
    operation = draw(st.sampled_from(["replace", "flip", "insert", "delete", "first_byte", "length"]))
    if operation == "first_byte":
        return bytes([draw(st.integers(0, 255))]) + frame[1:]
    if operation == "length":  # keep the body, announce another remaining length
        return frame[:1] + varint(draw(st.integers(0, 300))) + bytes(body)
    if not body:
        body = bytearray(b"\x00")
    index = draw(st.integers(0, len(body) - 1))
    if operation == "replace":
        body[index] = draw(st.integers(0, 255))
    elif operation == "flip":
        body[index] ^= 1 << draw(st.integers(0, 7))
    elif operation == "insert":
        body[index:index] = draw(st.binary(min_size=1, max_size=4))
    else:
        del body[index]
    return packet(frame[0], bytes(body))  # the remaining length follows the new body


def _header_size(frame: bytes) -> int:
    size = 1
    while frame[size] & 0x80:
        size += 1
    return size + 1
