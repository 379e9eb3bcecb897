"""The MQTT 5.0 codec (protocol level 5): `V5Codec`, over the `mqtt5` package's `read` and `write`.

mqtt5 decodes and encodes every v5 packet type and checks most rules (fixed header flags, QoS 3, duplicate or
misplaced properties, reason codes, zero Receive Maximum ...). Before it sees a frame, `V5Codec` walks the fields
it leaves unchecked:

- every string (topic name, client identifier, will topic, user name, topic filters, string properties): mqtt5
  panics on ill-formed UTF-8 (pyo3's PanicException, a BaseException, plus a message on stderr) and accepts U+0000;
- every property block: mqtt5 lets the last property run past the declared property length into the payload or
  the next field ("properties length 2: topic alias 0x23 00 | payload 78" decodes as alias 0x0078 and no
  payload), so each block must be tiled exactly by its properties; a Payload Format Indicator other than 0 or 1;
- PUBLISH: DUP at QoS 0, packet identifier 0, wildcards in the topic name, topic alias 0 (mqtt5 refuses it, but
  as malformed rather than with reason 0x94 "Topic Alias invalid");
- CONNECT: the reserved flag, will QoS or will retain without the will flag, an empty will topic or one with
  wildcards;
- SUBSCRIBE and UNSUBSCRIBE: packet identifier 0, no topic filter, an empty filter, reserved subscription option
  bits, No Local on a shared subscription.

Topic filter syntax and topic aliases are left to the session layer, which answers them with reason codes
(SUBACK 0x8F, DISCONNECT 0x94): mqtt5.read hands over a filter such as 'a/#/b' although its TopicFilter
constructor refuses it. (3.1.1 has no such answer, so `V311Codec` refuses the SUBSCRIBE itself.)

Outbound, `with_topic_alias` gives an encoded PUBLISH a Topic Alias (and, on reuse, an empty topic name) without
decoding it: a QoS 0 PUBLISH is encoded once for all its receivers, and each connection's aliases are its own.
The layout it edits (MQTT 5.0 section 3.3):

    byte 0          packet type 3, DUP, QoS (bits 2-1), RETAIN
    1 to 4 bytes    remaining length (variable byte integer)
    2 + n bytes     topic name (length, UTF-8)
    2 bytes         packet identifier, at QoS 1 and 2 only
    1 to 4 bytes    property length (variable byte integer)
    ...             properties, in any order; Topic Alias is 0x23 and a two-byte integer
    ...             payload, to the end
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import mqtt5

from mqtt_bridge.errors import MalformedPacket, ProtocolError
from mqtt_bridge.wire.codec import (
    MQTT_5,
    PUBLISH,
    SHARED_SUBSCRIPTION_PREFIX,
    FieldReader,
    body_offset,
    check_fixed_header_flags,
    is_rust_panic,
    read_connect_header,
    read_connect_payload,
    read_publish_header,
)
from mqtt_bridge.wire.framing import decode_variable_byte_integer, encode_variable_byte_integer, packet_type_name

# Value types of properties (MQTT 5.0 section 2.2.2.2).
_BYTE, _TWO_BYTES, _FOUR_BYTES, _VARINT, _TEXT, _BINARY, _TEXT_PAIR = range(7)
_PROPERTIES: dict[int, tuple[str, int]] = {
    0x01: ("payload format indicator", _BYTE),
    0x02: ("message expiry interval", _FOUR_BYTES),
    0x03: ("content type", _TEXT),
    0x08: ("response topic", _TEXT),
    0x09: ("correlation data", _BINARY),
    0x0B: ("subscription identifier", _VARINT),
    0x11: ("session expiry interval", _FOUR_BYTES),
    0x12: ("assigned client identifier", _TEXT),
    0x13: ("server keep alive", _TWO_BYTES),
    0x15: ("authentication method", _TEXT),
    0x16: ("authentication data", _BINARY),
    0x17: ("request problem information", _BYTE),
    0x18: ("will delay interval", _FOUR_BYTES),
    0x19: ("request response information", _BYTE),
    0x1A: ("response information", _TEXT),
    0x1C: ("server reference", _TEXT),
    0x1F: ("reason string", _TEXT),
    0x21: ("receive maximum", _TWO_BYTES),
    0x22: ("topic alias maximum", _TWO_BYTES),
    0x23: ("topic alias", _TWO_BYTES),
    0x24: ("maximum QoS", _BYTE),
    0x25: ("retain available", _BYTE),
    0x26: ("user property", _TEXT_PAIR),
    0x27: ("maximum packet size", _FOUR_BYTES),
    0x28: ("wildcard subscription available", _BYTE),
    0x29: ("subscription identifier available", _BYTE),
    0x2A: ("shared subscription available", _BYTE),
}
_PAYLOAD_FORMAT_INDICATOR = 0x01
_TOPIC_ALIAS = 0x23
_ALIAS_INVALID = 0x94  # DISCONNECT reason code "Topic Alias invalid"
_FIXED_SIZES = {_BYTE: 1, _TWO_BYTES: 2, _FOUR_BYTES: 4}
_TOPIC_ALIAS_PROPERTY = struct.Struct(">BH")  # identifier 0x23, alias
_EMPTY_TOPIC = b"\x00\x00"
_QOS_BITS = 0x06
_CONTINUATION_BIT = 0x80

# Subscription options byte (MQTT 5.0 section 3.8.3.1).
_RESERVED_OPTION_BITS = 0xC0
_NO_LOCAL = 0x04


def _check_properties(reader: FieldReader, where: str = "") -> None:
    """Step `reader` over a property block, checking that its properties fill exactly the declared length.

    `where` prefixes field names in messages: "" for the packet's own properties, "will " for the will's.
    """
    position = reader.position
    if position < reader.end and reader.data[position] == 0:  # no properties: the usual case
        reader.position = position + 1
        return
    length = reader.varint(f"{where}property length")
    start = reader.skip(length, f"{where}properties")
    block = FieldReader(reader.data, start, reader.packet, end=start + length)
    while not block.at_end():
        identifier = block.u8(f"{where}property identifier")
        known = _PROPERTIES.get(identifier)
        if known is None:
            raise MalformedPacket(
                f"{reader.packet}: unknown property identifier {identifier:#04x} in the {where}properties"
            )
        name, value_type = known
        field = f"{where}property {name} ({identifier:#04x})"
        if value_type == _TEXT:
            block.text(field)
        elif value_type == _TEXT_PAIR:
            block.text(f"{field} name")
            block.text(f"{field} value")
        elif value_type == _BINARY:
            block.binary(field)
        elif value_type == _VARINT:
            block.varint(field)
        elif identifier == _TOPIC_ALIAS:
            if not block.u16(field):
                # mqtt5 refuses it as malformed; MQTT 5 names the reason (and Mosquitto sends it): Topic Alias invalid.
                raise ProtocolError(f"{reader.packet}: {field} is 0; aliases start at 1 (MQTT-3.3.2-8)", _ALIAS_INVALID)
        elif identifier == _PAYLOAD_FORMAT_INDICATOR:
            indicator = block.u8(field)
            if indicator > 1:
                raise MalformedPacket(f"{reader.packet}: {field} is {indicator}, must be 0 or 1 (section 3.3.2.3.2)")
        else:
            block.skip(_FIXED_SIZES[value_type], field)


def _check_connect(frame: memoryview, offset: int, first: int) -> None:
    reader, flags = read_connect_header(frame, offset, MQTT_5)
    _check_properties(reader)
    reader.text("client identifier")
    read_connect_payload(reader, flags, lambda will: _check_properties(will, "will "))


def _check_publish(frame: memoryview, offset: int, first: int) -> None:
    position = read_publish_header(frame, offset, first)[3]
    if position < len(frame) and frame[position] == 0:  # no properties: the usual case
        return
    _check_properties(FieldReader(frame, position, "PUBLISH"))


def _check_subscribe(frame: memoryview, offset: int, first: int) -> None:
    reader = FieldReader(frame, offset, "SUBSCRIBE")
    if not reader.u16("packet identifier"):
        raise ProtocolError("SUBSCRIBE: packet identifier 0; it must be non-zero (MQTT-2.2.1-3)")
    _check_properties(reader)
    if reader.at_end():
        raise ProtocolError("SUBSCRIBE: no topic filter; at least one is required (MQTT-3.8.3-2)")
    while not reader.at_end():
        pattern = reader.text("topic filter")
        if not pattern:
            raise MalformedPacket("SUBSCRIBE: empty topic filter; filters have at least one character (MQTT-4.7.3-1)")
        options = reader.u8(f"subscription options of {pattern[:60]!r}")
        if options & _RESERVED_OPTION_BITS:
            raise MalformedPacket(
                f"SUBSCRIBE: subscription options {options:#04x} of {pattern[:60]!r} set reserved bits 7-6 "
                "(MQTT-3.8.3-5)"
            )
        if options & _NO_LOCAL and pattern.startswith(SHARED_SUBSCRIPTION_PREFIX):
            raise ProtocolError(f"SUBSCRIBE: No Local on the shared subscription {pattern[:60]!r} (MQTT-3.8.3-4)")


def _check_unsubscribe(frame: memoryview, offset: int, first: int) -> None:
    reader = FieldReader(frame, offset, "UNSUBSCRIBE")
    if not reader.u16("packet identifier"):
        raise ProtocolError("UNSUBSCRIBE: packet identifier 0; it must be non-zero (MQTT-2.2.1-3)")
    _check_properties(reader)
    if reader.at_end():
        raise ProtocolError("UNSUBSCRIBE: no topic filter; at least one is required (MQTT-3.10.3-2)")
    while not reader.at_end():
        if not reader.text("topic filter"):
            raise MalformedPacket("UNSUBSCRIBE: empty topic filter (MQTT-4.7.3-1)")


def _properties_after(fixed_fields: int) -> Callable[[memoryview, int, int], None]:
    """A check for packets whose properties, when present, follow `fixed_fields` bytes and end the variable header."""

    def check(frame: memoryview, offset: int, first: int) -> None:
        if len(frame) - offset > fixed_fields:
            _check_properties(FieldReader(frame, offset + fixed_fields, packet_type_name(first)))

    return check


def _reserved_type(frame: memoryview, offset: int, first: int) -> None:
    raise MalformedPacket("packet type 0 is reserved (MQTT 5.0 section 2.1.2)")


_Check = Callable[[memoryview, int, int], None]
# Indexed by packet type. Acknowledgements carry packet id and reason code before their properties; SUBACK
# and UNSUBACK the packet id only, with the reason codes after; CONNACK flags and reason code; DISCONNECT and
# AUTH the reason code. PINGREQ and PINGRESP have no body.
_CHECKS: tuple[_Check | None, ...] = (
    _reserved_type,
    _check_connect,
    _properties_after(2),  # CONNACK
    _check_publish,
    _properties_after(3),  # PUBACK
    _properties_after(3),  # PUBREC
    _properties_after(3),  # PUBREL
    _properties_after(3),  # PUBCOMP
    _check_subscribe,
    _properties_after(2),  # SUBACK
    _check_unsubscribe,
    _properties_after(2),  # UNSUBACK
    None,  # PINGREQ
    None,  # PINGRESP
    _properties_after(1),  # DISCONNECT
    _properties_after(1),  # AUTH
)


class V5Codec:
    """Decodes MQTT 5.0 frames into `mqtt5` packets and encodes `mqtt5` packets, strictly (see the module doc)."""

    protocol_level = MQTT_5

    def decode(self, frame: memoryview) -> mqtt5.Packet:
        """Decode one complete packet; raise a ProtocolError subclass naming the packet type if it is bad."""
        offset = body_offset(frame)
        first = frame[0]
        packet_type = first >> 4
        if packet_type != PUBLISH:
            check_fixed_header_flags(first)
        check = _CHECKS[packet_type]
        if check is not None:
            check(frame, offset, first)
        try:
            packet, consumed = mqtt5.read(frame)
        except (ValueError, IndexError, OverflowError) as exc:
            raise MalformedPacket(f"{packet_type_name(first)}: {exc}") from exc
        except BaseException as exc:
            if not is_rust_panic(exc):
                raise
            raise MalformedPacket(f"{packet_type_name(first)}: the mqtt5 decoder failed: {exc}") from exc
        if consumed != len(frame):
            raise MalformedPacket(
                f"{packet_type_name(first)}: the packet's fields end after {consumed} of its {len(frame)} bytes"
            )
        return packet

    def encode(self, packet: mqtt5.Packet) -> bytes:
        """Encode one packet; raise ValueError if a field is out of range (a packet id of 70000, 300 MB)."""
        try:
            return packet.write()
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"cannot encode {type(packet).__name__}: {exc}") from exc
        except BaseException as exc:
            if not is_rust_panic(exc):
                raise
            raise ValueError(f"cannot encode {type(packet).__name__}: the mqtt5 encoder failed: {exc}") from exc


def publish_topic_bounds(data: bytes) -> tuple[int, int]:
    """Where the topic name of the encoded PUBLISH `data` lies: (start, end) of its UTF-8 bytes, after the length."""
    length_end = 2
    while data[length_end - 1] & _CONTINUATION_BIT:  # the remaining length's last byte is below 0x80
        length_end += 1
    start = length_end + 2
    return start, start + ((data[length_end] << 8) | data[length_end + 1])


def with_topic_alias(data: bytes, topic_start: int, topic_end: int, alias: int, keep_topic: bool) -> bytes:
    """The encoded PUBLISH `data` (well formed, without a Topic Alias: as we encode them) with Topic Alias `alias`
    added, and its topic name emptied unless `keep_topic` (the PUBLISH that sets the alias carries both).

    `topic_start`/`topic_end` are `publish_topic_bounds(data)`. The alias goes first in the property block; the
    property length and the remaining length are written anew, as either may change size.
    """
    after_topic = topic_end + 2 if data[0] & _QOS_BITS else topic_end  # the packet identifier stays as it is
    decoded = decode_variable_byte_integer(data, after_topic, "property length")
    assert decoded is not None, "with_topic_alias takes a complete PUBLISH"
    property_length, size = decoded
    view = memoryview(data)
    # The topic name with its length (and the packet identifier after it), or an empty one.
    topic = (
        view[topic_start - 2 : after_topic] if keep_topic else memoryview(_EMPTY_TOPIC + data[topic_end:after_topic])
    )
    properties = encode_variable_byte_integer(property_length + _TOPIC_ALIAS_PROPERTY.size)
    rest = view[after_topic + size :]  # the old properties, then the payload
    remaining = len(topic) + len(properties) + _TOPIC_ALIAS_PROPERTY.size + len(rest)
    return b"".join(
        (
            data[:1],
            encode_variable_byte_integer(remaining),
            topic,
            properties,
            _TOPIC_ALIAS_PROPERTY.pack(_TOPIC_ALIAS, alias),
            rest,
        )
    )
