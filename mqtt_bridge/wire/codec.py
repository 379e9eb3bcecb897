"""What the MQTT 3.1.1 and 5.0 codecs share: the `Codec` interface, `protocol_level`, and the strict field reader.

The gateway's session layer works on the packet classes of `mqtt5` at both protocol levels. A connection reads
its first frame's protocol level with `protocol_level`, then decodes every frame with the codec of that level:
`codec_v311.V311Codec` (level 4) or `codec_v5.V5Codec` (level 5). Both check, before a library decoder sees a
frame, the rules the libraries leave out; a frame that breaks one raises a `ProtocolError` subclass naming the
packet type, the field and the rule (MQTT-x.y.z-n are the spec's normative statement numbers), and nothing else:
a malformed packet closes one connection, never the server.

`FieldReader` reads a frame's fields in order and checks each against the end of the frame (or of a property
block), every string for well-formed UTF-8 without U+0000 (MQTT 3.1.1 section 1.5.3, MQTT 5.0 section 1.5.4).
`read_publish_header` is the hot path both codecs share: the PUBLISH flags, topic name and packet identifier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import mqtt5

from mqtt_bridge.errors import MalformedPacket, ProtocolError, UnsupportedProtocol
from mqtt_bridge.wire.framing import decode_variable_byte_integer, packet_type_name

MQTT_3_1_1 = 4
MQTT_5 = 5
SUPPORTED_PROTOCOL_LEVELS = (MQTT_3_1_1, MQTT_5)
_PROTOCOL_NAME = "MQTT"

CONNECT = 1
PUBLISH = 3
PUBREL = 6
SUBSCRIBE = 8
UNSUBSCRIBE = 10

# MQTT-2.2.2-1 (3.1.1 section 2.2.2, 5.0 section 2.1.3): the flags every packet type but PUBLISH must carry.
# PUBREL, SUBSCRIBE and UNSUBSCRIBE carry 0b0010 (a relic of MQTT 3.1's "QoS 1" flag), the others 0.
_REQUIRED_FLAGS = tuple(0b0010 if packet_type in (PUBREL, SUBSCRIBE, UNSUBSCRIBE) else 0 for packet_type in range(16))

# CONNECT flags (3.1.1 section 3.1.2.3, 5.0 section 3.1.2.3).
USERNAME_FLAG = 0x80
PASSWORD_FLAG = 0x40
WILL_RETAIN_FLAG = 0x20
WILL_QOS_SHIFT = 3
WILL_FLAG = 0x04
CLEAN_START_FLAG = 0x02
_RESERVED_CONNECT_FLAG = 0x01

# PUBLISH fixed header flags (section 3.3.1 at both levels).
DUP_FLAG = 0x08
QOS_SHIFT = 1
RETAIN_FLAG = 0x01
QOS_LEVELS = (mqtt5.QoS.AT_MOST_ONCE, mqtt5.QoS.AT_LEAST_ONCE, mqtt5.QoS.EXACTLY_ONCE)

WILDCARDS = ("+", "#")
SHARED_SUBSCRIPTION_PREFIX = "$share/"
# v5 reason code 0x90 "Topic Name invalid", the code a v5 server sends for a PUBLISH topic name it refuses.
TOPIC_NAME_INVALID = 0x90


class Codec(Protocol):
    """Turns frames into `mqtt5` packets and packets into bytes, for one protocol level."""

    protocol_level: int

    def decode(self, frame: memoryview) -> mqtt5.Packet:
        """Decode one complete packet (a frame from `FrameBuffer`); raise a ProtocolError subclass if it is bad."""
        ...

    def encode(self, packet: mqtt5.Packet) -> bytes:
        """Encode one packet for the wire; raise ValueError or TypeError if this level cannot express it."""
        ...


def protocol_level(connect_frame: memoryview) -> int:
    """Return the protocol level (4 or 5) that a connection's first frame, its CONNECT, asks for.

    Raises ProtocolError if the frame is not a CONNECT (MQTT-3.1.0-1), MalformedPacket if it is too short to
    hold a protocol name and level, and UnsupportedProtocol for any name and level other than MQTT/4 and MQTT/5
    (MQTT 3.1's MQIsdp/3 among them).
    """
    if len(connect_frame) < 2:
        raise MalformedPacket(f"first packet: {len(connect_frame)} bytes cannot hold a fixed header")
    first = connect_frame[0]
    check_first_byte(first)
    reader = FieldReader(connect_frame, body_offset(connect_frame), "CONNECT")
    name_bytes = reader.binary("protocol name")
    level = reader.u8("protocol level")
    name = name_bytes.decode("utf-8", "backslashreplace")
    if name != _PROTOCOL_NAME or level not in SUPPORTED_PROTOCOL_LEVELS:
        raise UnsupportedProtocol(
            f"CONNECT: protocol {name!r} level {level} is not supported; this server speaks MQTT 3.1.1 "
            f"('MQTT' level 4) and MQTT 5.0 ('MQTT' level 5)"
        )
    return level


def check_first_byte(first: int) -> None:
    """Raise unless `first`, the first byte a connection sends, starts a CONNECT: type 1 and flags 0.

    One byte is enough to tell that a peer does not speak MQTT (an HTTP request, a TLS hello on the plain port),
    so a connection can be refused before its first packet is complete.
    """
    if first >> 4 != CONNECT:
        raise ProtocolError(
            f"first packet is a {packet_type_name(first)}: a client must send CONNECT first (MQTT-3.1.0-1)"
        )
    check_fixed_header_flags(first)


def body_offset(frame: memoryview) -> int:
    """Return where the body of `frame` starts, after checking that its fixed header announces its exact length."""
    if len(frame) < 2:
        raise MalformedPacket(f"a frame of {len(frame)} bytes cannot hold a fixed header")
    if frame[1] < 0x80:
        remaining_length, length_size = frame[1], 1
    else:
        header = decode_variable_byte_integer(frame, 1)
        if header is None:
            raise MalformedPacket(f"{packet_type_name(frame[0])}: the frame ends inside its remaining length")
        remaining_length, length_size = header
    if 1 + length_size + remaining_length != len(frame):
        raise MalformedPacket(
            f"{packet_type_name(frame[0])}: the fixed header announces {remaining_length} bytes after it, "
            f"the frame holds {len(frame) - 1 - length_size}"
        )
    return 1 + length_size


def check_fixed_header_flags(first_byte: int) -> None:
    """Raise MalformedPacket unless a non-PUBLISH packet's fixed header flags are the ones its type requires."""
    flags = first_byte & 0x0F
    required = _REQUIRED_FLAGS[first_byte >> 4]
    if flags != required:
        raise MalformedPacket(
            f"{packet_type_name(first_byte)}: fixed header flags are {flags:#06b}, must be {required:#06b} "
            "(MQTT-2.2.2-1)"
        )


def check_publish_flags(first_byte: int) -> int:
    """Return the QoS of a PUBLISH fixed header; raise MalformedPacket for QoS 3 or DUP set at QoS 0."""
    qos = (first_byte >> QOS_SHIFT) & 0x03
    if qos == 3:
        raise MalformedPacket("PUBLISH: QoS 3 in the fixed header is reserved (MQTT-3.3.1-4)")
    if qos == 0 and first_byte & DUP_FLAG:
        raise MalformedPacket("PUBLISH: the DUP flag is set on a QoS 0 message (MQTT-3.3.1-2)")
    return qos


def read_publish_header(frame: memoryview, offset: int, first: int) -> tuple[int, str, int | None, int]:
    """Read a PUBLISH's flags and variable header up to its properties (v5) or payload (3.1.1), strictly.

    Returns (QoS, topic name, packet identifier or None at QoS 0, offset after the packet identifier). This is the
    hot path of both codecs: well-formed headers are read inline, anything else goes to
    `read_publish_header_strictly`, which raises the error that names the broken rule.
    """
    qos = (first >> QOS_SHIFT) & 0x03
    size = len(frame)
    if qos != 3 and (qos or not first & DUP_FLAG) and offset + 2 <= size:
        topic_end = offset + 2 + ((frame[offset] << 8) | frame[offset + 1])
        position = topic_end + 2 if qos else topic_end
        if position <= size:
            try:
                topic = str(frame[offset + 2 : topic_end], "utf-8")
            except UnicodeDecodeError:
                pass
            else:
                packet_id = (frame[topic_end] << 8) | frame[topic_end + 1] if qos else None
                if packet_id != 0 and "\x00" not in topic and "+" not in topic and "#" not in topic:
                    return qos, topic, packet_id, position
    return read_publish_header_strictly(frame, offset, first)


def read_publish_header_strictly(frame: memoryview, offset: int, first: int) -> tuple[int, str, int | None, int]:
    """`read_publish_header`, field by field, raising a ProtocolError subclass that names what is wrong."""
    qos = check_publish_flags(first)
    reader = FieldReader(frame, offset, "PUBLISH")
    topic = reader.text("topic name")
    check_topic_name(topic, "PUBLISH")
    packet_id = None
    if qos:
        packet_id = reader.u16("packet identifier")
        if not packet_id:
            raise ProtocolError(
                f"PUBLISH: packet identifier 0 at QoS {qos}; it must be non-zero "
                "(3.1.1: MQTT-2.3.1-1, 5.0: MQTT-2.2.1-3)"
            )
    return qos, topic, packet_id, reader.position


def check_topic_name(topic: str, packet: str) -> None:
    """Raise ProtocolError (reason 0x90) if a topic name holds a wildcard (MQTT-3.3.2-2)."""
    for wildcard in WILDCARDS:
        if wildcard in topic:
            raise ProtocolError(
                f"{packet}: topic name {topic[:60]!r} contains the wildcard {wildcard!r}; wildcards belong in "
                "topic filters only (MQTT-3.3.2-2)",
                reason_code=TOPIC_NAME_INVALID,
            )


def check_will_topic(topic: str) -> None:
    """Raise unless a CONNECT's will topic is a usable topic name: not empty (MQTT-4.7.3-1), no wildcard."""
    if not topic:
        raise MalformedPacket("CONNECT: empty will topic; topic names have at least one character (MQTT-4.7.3-1)")
    check_topic_name(topic, "CONNECT will")


def check_connect_flags(flags: int, level: int) -> None:
    """Raise MalformedPacket if the CONNECT flags byte breaks a rule of protocol `level` (4 or 5)."""
    if flags & _RESERVED_CONNECT_FLAG:
        raise MalformedPacket("CONNECT: the reserved bit 0 of the connect flags is set (MQTT-3.1.2-3)")
    will_qos = (flags >> WILL_QOS_SHIFT) & 0x03
    if will_qos == 3:
        raise MalformedPacket("CONNECT: will QoS 3 in the connect flags is reserved (MQTT-3.1.2-14)")
    if not flags & WILL_FLAG and (will_qos or flags & WILL_RETAIN_FLAG):
        raise MalformedPacket(
            f"CONNECT: will QoS {will_qos} and will retain {bool(flags & WILL_RETAIN_FLAG)} without the will flag; "
            "both must be 0 when there is no will (MQTT-3.1.2-13, MQTT-3.1.2-15)"
        )
    if level == MQTT_3_1_1 and flags & PASSWORD_FLAG and not flags & USERNAME_FLAG:
        raise MalformedPacket("CONNECT: a password without a user name is not allowed in MQTT 3.1.1 (MQTT-3.1.2-22)")


def read_connect_header(frame: memoryview, offset: int, level: int) -> tuple[FieldReader, int]:
    """Check a CONNECT's protocol name, level, flags and keep alive; return a reader past them and the flags."""
    found = protocol_level(frame)
    if found != level:
        name = "MQTT 3.1.1" if level == MQTT_3_1_1 else "MQTT 5.0"
        raise UnsupportedProtocol(f"CONNECT: protocol level {found} reached the {name} codec")
    reader = FieldReader(frame, offset, "CONNECT")
    reader.skip(len(b"\x00\x04MQTT") + 1, "protocol name and level")
    flags = reader.u8("connect flags")
    check_connect_flags(flags, level)
    reader.skip(2, "keep alive")
    return reader, flags


def read_connect_payload(
    reader: FieldReader, flags: int, will_properties: Callable[[FieldReader], None] | None = None
) -> bytes | None:
    """Check a CONNECT's payload after the client identifier (will, user name, password) to its end; return the
    password as bytes. `will_properties` reads the MQTT 5 will properties."""
    if flags & WILL_FLAG:
        if will_properties is not None:
            will_properties(reader)
        check_will_topic(reader.text("will topic"))
        # The two specifications name the field differently: 3.1.1 "Will Message", 5.0 "Will Payload".
        reader.binary("will message" if will_properties is None else "will payload")
    if flags & USERNAME_FLAG:
        reader.text("user name")
    password = reader.binary("password") if flags & PASSWORD_FLAG else None
    reader.expect_end()
    return password


def is_rust_panic(exc: BaseException) -> bool:
    """True for pyo3's PanicException: a panic inside `mqtt5`'s Rust code, raised as a BaseException."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


class FieldReader:
    """Reads the fields of one packet from a frame in order, checking each against `end`.

    Every read raises MalformedPacket naming the packet, the field and the offset if the field does not fit.
    """

    __slots__ = ("data", "end", "packet", "position")

    def __init__(self, data: memoryview, position: int, packet: str, end: int | None = None) -> None:
        self.data = data
        self.position = position
        self.packet = packet
        self.end = len(data) if end is None else end

    def at_end(self) -> bool:
        return self.position >= self.end

    def expect_end(self) -> None:
        if self.position != self.end:
            raise MalformedPacket(
                f"{self.packet}: {self.end - self.position} bytes left over after the last field at offset "
                f"{self.position}"
            )

    def skip(self, size: int, field: str) -> int:
        """Step over `size` bytes and return where they start."""
        start = self.position
        if start + size > self.end:
            raise MalformedPacket(
                f"{self.packet}: {field} needs {size} bytes at offset {start}, only {max(self.end - start, 0)} are left"
            )
        self.position = start + size
        return start

    def u8(self, field: str) -> int:
        return self.data[self.skip(1, field)]

    def u16(self, field: str) -> int:
        start = self.skip(2, field)
        return (self.data[start] << 8) | self.data[start + 1]

    def varint(self, field: str) -> int:
        decoded = decode_variable_byte_integer(self.data[: self.end], self.position, f"{self.packet}: {field}")
        if decoded is None:
            raise MalformedPacket(f"{self.packet}: the packet ends inside {field} at offset {self.position}")
        value, size = decoded
        self.position += size
        return value

    def binary(self, field: str) -> bytes:
        """Read two-byte-length-prefixed binary data (MQTT 5.0 section 1.5.6)."""
        size = self.u16(f"{field} length")
        start = self.skip(size, field)
        return self.data[start : start + size].tobytes()

    def text(self, field: str) -> str:
        """Read a UTF-8 encoded string: well-formed UTF-8 (MQTT-1.5.3-1, MQTT-1.5.4-1), no U+0000 (-2)."""
        size = self.u16(f"{field} length")
        start = self.skip(size, field)
        try:
            value = str(self.data[start : start + size], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedPacket(
                f"{self.packet}: {field} is not well-formed UTF-8 ({exc.reason} at byte {exc.start}) (MQTT-1.5.3-1)"
            ) from exc
        if "\x00" in value:
            raise MalformedPacket(f"{self.packet}: {field} contains U+0000, which MQTT strings must not (MQTT-1.5.3-2)")
        return value
