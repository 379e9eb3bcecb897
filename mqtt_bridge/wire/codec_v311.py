"""The MQTT 3.1.1 codec (protocol level 4): `V311Codec`, between 3.1.1 bytes and `mqtt5` packet classes.

Decoding: PUBLISH and the 2-byte acknowledgements (PUBACK, PUBREC, PUBREL, PUBCOMP) are parsed here, with
`codec.read_publish_header` and `struct`: they are most of the traffic, and through amqtt a 64-byte PUBLISH took
9 us to decode, convert and encode again against 2 us here, a PUBACK 4 us against 0.6. The
bodiless PINGREQ, PINGRESP and DISCONNECT need no parsing; CONNECT, CONNACK, SUBSCRIBE, SUBACK, UNSUBSCRIBE and
UNSUBACK are decoded by amqtt's packet classes, after a strict walk over their fields. amqtt checks almost
nothing and decodes some bad input silently wrong, which the walk prevents:

- it turns ill-formed UTF-8 into the repr of the bytes ("b'\\xff'") and decodes the binary CONNECT password as
  text, so the password is taken from the walk, as bytes;
- it swallows a truncated CONNECT, SUBSCRIBE or UNSUBSCRIBE (missing fields become None, filters are dropped),
  ignores trailing bytes, and replaces an empty client identifier with a random one;
- it checks no fixed header flags, no CONNECT flag rule (reserved bit, will QoS and retain without will, will
  QoS 3, password without user name), no requested QoS, no empty SUBSCRIBE, no U+0000, no packet id 0.

Conversion to the v5 classes: CONNECT's clean session becomes clean start with a session expiry interval of 0
(clean) or 0xFFFFFFFF (the session outlives the connection, as in 3.1.1); topic filters get 3.1.1 semantics
(no_local False, retain_as_published False, retain_handling SEND_ALWAYS); UNSUBACK has no reason codes.
Encoding drops what 3.1.1 cannot carry (properties, reason codes of acknowledgements, subscription options other
than QoS) and maps CONNACK and SUBACK reason codes to 3.1.1 return codes. 3.1.1 has no server DISCONNECT: a
server-side codec encodes it as b"" and the caller closes the connection.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import mqtt5
from amqtt.adapters import BufferReader
from amqtt.codecs_amqtt import encode_data_with_length
from amqtt.errors import AMQTTError, CodecError, MQTTError, NoDataError
from amqtt.mqtt.connack import ConnackPacket
from amqtt.mqtt.connect import ConnectPacket, ConnectPayload, ConnectVariableHeader
from amqtt.mqtt.disconnect import DisconnectPacket
from amqtt.mqtt.packet import MQTTFixedHeader
from amqtt.mqtt.pingreq import PingReqPacket
from amqtt.mqtt.pingresp import PingRespPacket
from amqtt.mqtt.suback import SubackPacket
from amqtt.mqtt.subscribe import SubscribePacket
from amqtt.mqtt.unsuback import UnsubackPacket
from amqtt.mqtt.unsubscribe import UnsubscribePacket

from mqtt_bridge.errors import MalformedPacket, ProtocolError
from mqtt_bridge.wire.codec import (
    CLEAN_START_FLAG,
    CONNECT,
    DUP_FLAG,
    MQTT_3_1_1,
    PASSWORD_FLAG,
    PUBLISH,
    QOS_LEVELS,
    QOS_SHIFT,
    RETAIN_FLAG,
    TOPIC_NAME_INVALID,
    USERNAME_FLAG,
    WILL_FLAG,
    WILL_QOS_SHIFT,
    WILL_RETAIN_FLAG,
    FieldReader,
    body_offset,
    check_fixed_header_flags,
    read_connect_header,
    read_connect_payload,
    read_publish_header,
)
from mqtt_bridge.wire.framing import encode_remaining_length, packet_type_name

# 3.1.1 keeps a session that is not clean until the client connects again with clean session set; the nearest
# v5 session expiry interval is "never" (MQTT 5.0 section 3.1.2.11.2).
SESSION_NEVER_EXPIRES = 0xFFFF_FFFF

_U16 = struct.Struct(">H")
_ACK = struct.Struct(">BBH")  # fixed header byte, remaining length 2, packet identifier
_ACK_BODY_SIZE = 2
_ACK_CLASSES: dict[int, type[mqtt5.PubAckPacket | mqtt5.PubRecPacket | mqtt5.PubRelPacket | mqtt5.PubCompPacket]] = {
    4: mqtt5.PubAckPacket,
    5: mqtt5.PubRecPacket,
    6: mqtt5.PubRelPacket,
    7: mqtt5.PubCompPacket,
}
# The fixed header byte of each acknowledgement: type and flags (PUBREL's are 0b0010, MQTT-3.6.1-1).
_ACK_FIRST_BYTES = {
    mqtt5.PubAckPacket: 0x40,
    mqtt5.PubRecPacket: 0x50,
    mqtt5.PubRelPacket: 0x62,
    mqtt5.PubCompPacket: 0x70,
}
_BODILESS: dict[int, Callable[[], mqtt5.Packet]] = {
    12: mqtt5.PingReqPacket,
    13: mqtt5.PingRespPacket,
    14: mqtt5.DisconnectPacket,
}

# CONNACK: v5 reason code -> 3.1.1 return code (3.1.1 section 3.2.2.3). Any other failure is reported as 3,
# "server unavailable", the one 3.1.1 code that does not blame the client.
_RETURN_CODE_SERVER_UNAVAILABLE = 3
# mqtt5's enums are neither hashable nor IntEnums at run time (whatever its stub says): tables take int().
_CONNACK_RETURN_CODES = {
    int(mqtt5.ConnAckReasonCode.SUCCESS): 0,
    int(mqtt5.ConnAckReasonCode.UNSUPPORTED_PROTOCOL_VERSION): 1,
    int(mqtt5.ConnAckReasonCode.CLIENT_ID_NOT_VALID): 2,
    int(mqtt5.ConnAckReasonCode.SERVER_UNAVAILABLE): 3,
    int(mqtt5.ConnAckReasonCode.SERVER_BUSY): 3,
    int(mqtt5.ConnAckReasonCode.BAD_USER_NAME_OR_PASSWORD): 4,
    int(mqtt5.ConnAckReasonCode.NOT_AUTHORIZED): 5,
    int(mqtt5.ConnAckReasonCode.BANNED): 5,
}
# And back, for a client-side codec: each 3.1.1 return code to its v5 counterpart.
_CONNACK_REASON_CODES = (
    mqtt5.ConnAckReasonCode.SUCCESS,
    mqtt5.ConnAckReasonCode.UNSUPPORTED_PROTOCOL_VERSION,
    mqtt5.ConnAckReasonCode.CLIENT_ID_NOT_VALID,
    mqtt5.ConnAckReasonCode.SERVER_UNAVAILABLE,
    mqtt5.ConnAckReasonCode.BAD_USER_NAME_OR_PASSWORD,
    mqtt5.ConnAckReasonCode.NOT_AUTHORIZED,
)
_SUBACK_FAILURE = 0x80  # 3.1.1 section 3.9.3: the one failure return code
_SUBACK_REASON_CODES = {
    0: mqtt5.SubAckReasonCode.GRANTED_QOS_AT_MOST_ONCE,
    1: mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE,
    2: mqtt5.SubAckReasonCode.GRANTED_QOS_EXACTLY_ONCE,
    _SUBACK_FAILURE: mqtt5.SubAckReasonCode.UNSPECIFIED_ERROR,
}
_CONNACK_SESSION_PRESENT = 0x01

# What an amqtt decoder may raise on input the walk let through (it should be none; this is a second fence).
_AMQTT_ERRORS = (AMQTTError, CodecError, MQTTError, NoDataError, ValueError, IndexError, TypeError, AttributeError)


def _run_amqtt(packet_class: Any, frame: memoryview, offset: int) -> Any:
    """Decode a frame's body with an amqtt packet class, synchronously.

    amqtt's decoders are coroutines, but over a BufferReader they never wait (BufferReader.read is an `async
    def` returning at once), so one `send(None)` runs them to the end and StopIteration carries the packet.
    """
    first = frame[0]
    header = MQTTFixedHeader(first >> 4, first & 0x0F, len(frame) - offset)
    coroutine = packet_class.from_stream(BufferReader(frame[offset:].tobytes()), header)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    except _AMQTT_ERRORS as exc:
        raise MalformedPacket(f"{packet_type_name(first)}: amqtt's decoder failed: {exc!r}") from exc
    coroutine.close()
    raise RuntimeError(f"amqtt's {packet_class.__name__} decoder waited for I/O on an in-memory buffer")


def _decode_publish(frame: memoryview, offset: int, first: int) -> mqtt5.Packet:
    qos, topic, packet_id, position = read_publish_header(frame, offset, first)
    if not topic:
        raise ProtocolError(
            "PUBLISH: empty topic name; MQTT 3.1.1 has no topic aliases (MQTT-4.7.3-1)", reason_code=TOPIC_NAME_INVALID
        )
    return mqtt5.PublishPacket(
        topic,
        frame[position:].tobytes(),
        qos=QOS_LEVELS[qos],
        retain=bool(first & RETAIN_FLAG),
        packet_id=packet_id,
        duplicate=bool(first & DUP_FLAG),
    )


_QOS0 = QOS_LEVELS[0]
_QOS1 = QOS_LEVELS[1]
# The fixed header byte of a PUBLISH: type (high nibble), DUP (0x08), QoS (0x06), RETAIN (0x01).
_TYPE_BITS = 0xF0
_PUBLISH_TYPE = PUBLISH << 4
_QOS_BITS = 0x06
_QOS1_BITS = 0x02


def read_short_publish(buffer: bytearray, body: int, end: int) -> tuple[str, bytes, int, bool, int, bool] | None:
    """(topic, payload, QoS, retain, packet id (0 at QoS 0), DUP) of a well-formed QoS 0 or QoS 1 PUBLISH read
    straight from a connection's receive buffer (its fixed header at `body - 2`, remaining length under 128, body
    `buffer[body:end]`), else None: anything unusual, including a malformed packet, goes through
    `V311Codec.decode`, which names the error. Most inbound traffic is this packet, and the general path copies
    the frame out of the buffer and parses the fixed header again first; these fields are all a 3.1.1 PUBLISH has,
    so the gateway needs no `mqtt5.PublishPacket` for it (`decode_short_publish` makes one)."""
    first = buffer[body - 2]
    qos_bits = first & _QOS_BITS
    if first & _TYPE_BITS != _PUBLISH_TYPE or qos_bits > _QOS1_BITS or body + 2 > end:
        return None
    if qos_bits == 0 and first & DUP_FLAG:
        return None  # [MQTT-3.3.1-2]: DUP must be 0 for QoS 0; the codec says so
    topic_end = body + 2 + ((buffer[body] << 8) | buffer[body + 1])
    if topic_end > end or topic_end == body + 2:
        return None
    try:
        topic = buffer[body + 2 : topic_end].decode()
    except UnicodeDecodeError:
        return None
    if "\x00" in topic or "+" in topic or "#" in topic:
        return None
    retain = bool(first & RETAIN_FLAG)
    if not qos_bits:
        return topic, bytes(buffer[topic_end:end]), 0, retain, 0, False
    if topic_end + 2 > end:
        return None
    packet_id = (buffer[topic_end] << 8) | buffer[topic_end + 1]
    if not packet_id:
        return None  # [MQTT-2.3.1-1]: a QoS 1 PUBLISH needs a non-zero packet id; the codec refuses it
    return topic, bytes(buffer[topic_end + 2 : end]), 1, retain, packet_id, bool(first & DUP_FLAG)


def decode_short_publish(buffer: bytearray, body: int, end: int) -> mqtt5.PublishPacket | None:
    """The packet of `read_short_publish`'s fields, or None where it declines."""
    fields = read_short_publish(buffer, body, end)
    if fields is None:
        return None
    topic, payload, qos, retain, packet_id, duplicate = fields
    if not qos:
        return mqtt5.PublishPacket(topic, payload, qos=_QOS0, retain=retain, packet_id=None)
    return mqtt5.PublishPacket(topic, payload, qos=_QOS1, retain=retain, packet_id=packet_id, duplicate=duplicate)


def _check_connect(frame: memoryview, offset: int) -> bytes | None:
    """Walk a CONNECT; return its password, as bytes (amqtt decodes it as text)."""
    reader, flags = read_connect_header(frame, offset, MQTT_3_1_1)
    reader.text("client identifier")
    return read_connect_payload(reader, flags)


def _decode_connect(frame: memoryview, offset: int) -> mqtt5.Packet:
    password = _check_connect(frame, offset)
    packet = _run_amqtt(ConnectPacket, frame, offset)
    header, payload = packet.variable_header, packet.payload
    will = None
    if header.will_flag:
        will = mqtt5.Will(
            payload.will_topic,
            payload=bytes(payload.will_message),
            qos=QOS_LEVELS[header.will_qos],
            retain=header.will_retain_flag,
        )
    clean = header.clean_session_flag
    return mqtt5.ConnectPacket(
        "" if payload.client_id_is_random else payload.client_id,  # amqtt invents an id for an empty one
        username=payload.username if header.username_flag else None,
        password=password,
        clean_start=clean,
        will=will,
        keep_alive=header.keep_alive,
        session_expiry_interval=0 if clean else SESSION_NEVER_EXPIRES,
    )


def _decode_subscribe(frame: memoryview, offset: int) -> mqtt5.Packet:
    reader = FieldReader(frame, offset, "SUBSCRIBE")
    _check_packet_id(reader)
    if reader.at_end():
        raise ProtocolError("SUBSCRIBE: no topic filter; at least one is required (MQTT-3.8.3-3)")
    while not reader.at_end():
        pattern = reader.text("topic filter")
        if not pattern:
            raise MalformedPacket("SUBSCRIBE: empty topic filter; filters have at least one character (MQTT-4.7.3-1)")
        qos = reader.u8(f"requested QoS of {pattern[:60]!r}")
        if qos > 2:
            raise MalformedPacket(
                f"SUBSCRIBE: requested QoS byte {qos:#04x} of {pattern[:60]!r}: bits 7-2 are reserved and the QoS "
                "must be 0, 1 or 2 (MQTT-3.8.3-4)"
            )
    packet = _run_amqtt(SubscribePacket, frame, offset)
    filters = [_topic_filter(pattern, qos) for pattern, qos in packet.payload.topics]
    return mqtt5.SubscribePacket(packet.variable_header.packet_id, filters)


def _topic_filter(pattern: str, qos: int) -> mqtt5.TopicFilter:
    """A 3.1.1 subscription in v5 terms; raise ProtocolError if the filter breaks the wildcard rules (4.7.1)."""
    try:
        return mqtt5.TopicFilter(
            pattern,
            max_qos=QOS_LEVELS[qos],
            no_local=False,
            retain_as_published=False,
            retain_handling=mqtt5.RetainHandling.SEND_ALWAYS,
        )
    except ValueError as exc:
        # A wildcard in the wrong place breaks MQTT-4.7.1-2 or -3, and 3.1.1 section 4.8 closes the connection on
        # a protocol violation (return code 0x80 is for filters the server refuses, not malformed ones).
        raise ProtocolError(f"SUBSCRIBE: topic filter {pattern[:60]!r} breaks the wildcard rules: {exc}") from exc


def _decode_unsubscribe(frame: memoryview, offset: int) -> mqtt5.Packet:
    reader = FieldReader(frame, offset, "UNSUBSCRIBE")
    _check_packet_id(reader)
    if reader.at_end():
        raise ProtocolError("UNSUBSCRIBE: no topic filter; at least one is required (MQTT-3.10.3-2)")
    while not reader.at_end():
        if not reader.text("topic filter"):
            raise MalformedPacket("UNSUBSCRIBE: empty topic filter (MQTT-4.7.3-1)")
    packet = _run_amqtt(UnsubscribePacket, frame, offset)
    return mqtt5.UnsubscribePacket(packet.variable_header.packet_id, list(packet.payload.topics))


def _decode_connack(frame: memoryview, offset: int) -> mqtt5.Packet:
    reader = FieldReader(frame, offset, "CONNACK")
    flags = reader.u8("acknowledge flags")
    return_code = reader.u8("return code")
    reader.expect_end()
    if flags & ~_CONNACK_SESSION_PRESENT:
        raise MalformedPacket(f"CONNACK: acknowledge flags {flags:#04x} set reserved bits 7-1 (section 3.2.2.1)")
    if return_code >= len(_CONNACK_REASON_CODES):
        raise MalformedPacket(f"CONNACK: return code {return_code} is reserved (section 3.2.2.3)")
    if return_code and flags:
        raise ProtocolError(f"CONNACK: session present with return code {return_code} (MQTT-3.2.2-4)")
    packet = _run_amqtt(ConnackPacket, frame, offset)
    return mqtt5.ConnAckPacket(
        session_present=bool(packet.session_parent), reason_code=_CONNACK_REASON_CODES[packet.return_code]
    )


def _decode_suback(frame: memoryview, offset: int) -> mqtt5.Packet:
    reader = FieldReader(frame, offset, "SUBACK")
    _check_packet_id(reader)
    if reader.at_end():
        raise ProtocolError("SUBACK: no return code; there is one per topic filter (MQTT-3.9.3-1)")
    packet = _run_amqtt(SubackPacket, frame, offset)
    codes = []
    for return_code in packet.payload.return_codes:
        code = _SUBACK_REASON_CODES.get(return_code)
        if code is None:
            raise MalformedPacket(f"SUBACK: return code {return_code:#04x} is reserved (MQTT-3.9.3-2)")
        codes.append(code)
    return mqtt5.SubAckPacket(packet.variable_header.packet_id, codes)


def _decode_unsuback(frame: memoryview, offset: int) -> mqtt5.Packet:
    reader = FieldReader(frame, offset, "UNSUBACK")
    _check_packet_id(reader)
    reader.expect_end()
    packet = _run_amqtt(UnsubackPacket, frame, offset)
    return mqtt5.UnsubAckPacket(packet.variable_header.packet_id, [])


def _check_packet_id(reader: FieldReader) -> None:
    if not reader.u16("packet identifier"):
        raise ProtocolError(f"{reader.packet}: packet identifier 0; it must be non-zero (MQTT-2.3.1-1)")


def encode_publish(
    topic: str, payload: bytes, qos: int, retain: bool, packet_id: int | None, duplicate: bool = False
) -> bytes:
    """A 3.1.1 PUBLISH from its fields, without building a packet object: the gateway's delivery path (3.1.1
    carries no properties, so nothing else of a message goes on the wire). Raises ValueError for an empty topic
    or a field out of range."""
    name = topic.encode()
    if not name:
        raise ValueError("PUBLISH with a topic alias and no topic name: MQTT 3.1.1 has no topic aliases")
    first = 0x30 | qos << QOS_SHIFT | (DUP_FLAG if duplicate else 0) | (RETAIN_FLAG if retain else 0)
    try:
        if qos and packet_id is not None:
            variable_header = _U16.pack(len(name)) + name + _U16.pack(packet_id)
        else:
            variable_header = _U16.pack(len(name)) + name
        remaining_length = encode_remaining_length(len(variable_header) + len(payload))
    except struct.error as exc:
        raise ValueError(f"cannot encode PUBLISH as MQTT 3.1.1: {exc}") from exc
    return b"".join((bytes((first,)), remaining_length, variable_header, payload))


_DECODERS: dict[int, Callable[[memoryview, int], mqtt5.Packet]] = {
    CONNECT: _decode_connect,
    2: _decode_connack,
    8: _decode_subscribe,
    9: _decode_suback,
    10: _decode_unsubscribe,
    11: _decode_unsuback,
}


class V311Codec:
    """Decodes MQTT 3.1.1 frames into `mqtt5` packets and encodes `mqtt5` packets as 3.1.1 (see the module doc).

    `client_side` only changes DISCONNECT: a client sends one, a 3.1.1 server has none to send.
    """

    protocol_level = MQTT_3_1_1

    def __init__(self, *, client_side: bool = False) -> None:
        self.client_side = client_side

    def decode(self, frame: memoryview) -> mqtt5.Packet:
        """Decode one complete packet; raise a ProtocolError subclass naming the packet type if it is bad."""
        offset = body_offset(frame)
        first = frame[0]
        packet_type = first >> 4
        try:
            if packet_type == PUBLISH:
                return _decode_publish(frame, offset, first)
            check_fixed_header_flags(first)
            ack_class = _ACK_CLASSES.get(packet_type)
            if ack_class is not None:
                if len(frame) - offset != _ACK_BODY_SIZE:
                    raise MalformedPacket(
                        f"{packet_type_name(first)}: remaining length {len(frame) - offset}, must be 2 (section 3.4.1)"
                    )
                return ack_class(_U16.unpack_from(frame, offset)[0])
            bodiless = _BODILESS.get(packet_type)
            if bodiless is not None:
                if len(frame) != offset:
                    raise MalformedPacket(
                        f"{packet_type_name(first)}: remaining length {len(frame) - offset}, must be 0 (section 3.12.1)"
                    )
                return bodiless()
            decoder = _DECODERS.get(packet_type)
            if decoder is None:
                raise MalformedPacket(f"{packet_type_name(first)}: no such packet type in MQTT 3.1.1 (section 2.2.1)")
            return decoder(frame, offset)
        except ValueError as exc:  # an mqtt5 constructor refused a value: 'a/#/b' as a topic filter
            raise ProtocolError(f"{packet_type_name(first)}: {exc}") from exc

    def encode(self, packet: mqtt5.Packet) -> bytes:
        """Encode one packet as MQTT 3.1.1.

        Raises TypeError for AUTH (no such packet in 3.1.1) and ValueError for what 3.1.1 cannot express: a
        PUBLISH with a topic alias and no topic name, a password without a user name. (mqtt5's constructors
        already refuse out-of-range packet ids and over-long strings.)
        """
        encoder = _ENCODERS.get(type(packet))
        if encoder is None:
            raise TypeError(f"{type(packet).__name__} has no MQTT 3.1.1 encoding")
        try:
            return encoder(self, packet)
        except (struct.error, OverflowError, CodecError) as exc:
            raise ValueError(f"cannot encode {type(packet).__name__} as MQTT 3.1.1: {exc}") from exc

    def _encode_publish(self, packet: mqtt5.PublishPacket) -> bytes:
        # mqtt5's constructor requires a packet id at QoS 1 and 2 and none at QoS 0.
        return encode_publish(
            packet.topic, packet.payload, int(packet.qos), packet.retain, packet.packet_id, packet.duplicate
        )

    def _encode_ack(
        self, packet: mqtt5.PubAckPacket | mqtt5.PubRecPacket | mqtt5.PubRelPacket | mqtt5.PubCompPacket
    ) -> bytes:
        return _ACK.pack(_ACK_FIRST_BYTES[type(packet)], _ACK_BODY_SIZE, packet.packet_id)

    def _encode_connect(self, packet: mqtt5.ConnectPacket) -> bytes:
        if packet.password is not None and packet.username is None:
            raise ValueError("CONNECT: MQTT 3.1.1 has no password without a user name (MQTT-3.1.2-22)")
        flags = CLEAN_START_FLAG if packet.clean_start else 0
        will = packet.will
        if will is not None:
            flags |= WILL_FLAG | int(will.qos) << WILL_QOS_SHIFT | (WILL_RETAIN_FLAG if will.retain else 0)
        if packet.username is not None:
            flags |= USERNAME_FLAG
        if packet.password is not None:
            flags |= PASSWORD_FLAG
        header = ConnectVariableHeader(flags, packet.keep_alive, "MQTT", MQTT_3_1_1)
        payload = ConnectPayload(
            packet.client_id,
            will.topic if will is not None else None,
            (will.payload or b"") if will is not None else None,
            packet.username,
            None,  # amqtt writes the password as text; it is binary, so it is appended below
        )
        body = bytes(header.to_bytes()) + bytes(payload.to_bytes(None, header))
        if packet.password is not None:
            body += encode_data_with_length(packet.password)
        return bytes(MQTTFixedHeader(CONNECT, 0, len(body)).to_bytes()) + body

    def _encode_connack(self, packet: mqtt5.ConnAckPacket) -> bytes:
        return_code = _CONNACK_RETURN_CODES.get(int(packet.reason_code), _RETURN_CODE_SERVER_UNAVAILABLE)
        # MQTT-3.2.2-4: a refused connection never has a session present.
        session_present = 1 if packet.session_present and not return_code else 0
        return bytes(ConnackPacket.build(session_present, return_code).to_bytes())

    def _encode_subscribe(self, packet: mqtt5.SubscribePacket) -> bytes:
        topics = [(topic_filter.pattern, int(topic_filter.max_qos)) for topic_filter in packet.topic_filters]
        return bytes(SubscribePacket.build(topics, packet.packet_id).to_bytes())

    def _encode_suback(self, packet: mqtt5.SubAckPacket) -> bytes:
        codes = [min(int(code), _SUBACK_FAILURE) for code in packet.reason_codes]
        return bytes(SubackPacket.build(packet.packet_id, codes).to_bytes())

    def _encode_unsubscribe(self, packet: mqtt5.UnsubscribePacket) -> bytes:
        return bytes(UnsubscribePacket.build(list(packet.patterns), packet.packet_id).to_bytes())

    def _encode_unsuback(self, packet: mqtt5.UnsubAckPacket) -> bytes:
        return bytes(UnsubackPacket.build(packet.packet_id).to_bytes())

    def _encode_pingreq(self, packet: mqtt5.PingReqPacket) -> bytes:
        return bytes(PingReqPacket().to_bytes())

    def _encode_pingresp(self, packet: mqtt5.PingRespPacket) -> bytes:
        return bytes(PingRespPacket().to_bytes())

    def _encode_disconnect(self, packet: mqtt5.DisconnectPacket) -> bytes:
        return bytes(DisconnectPacket().to_bytes()) if self.client_side else b""


_ENCODERS: dict[type, Callable[[V311Codec, Any], bytes]] = {
    mqtt5.PublishPacket: V311Codec._encode_publish,
    mqtt5.PubAckPacket: V311Codec._encode_ack,
    mqtt5.PubRecPacket: V311Codec._encode_ack,
    mqtt5.PubRelPacket: V311Codec._encode_ack,
    mqtt5.PubCompPacket: V311Codec._encode_ack,
    mqtt5.ConnectPacket: V311Codec._encode_connect,
    mqtt5.ConnAckPacket: V311Codec._encode_connack,
    mqtt5.SubscribePacket: V311Codec._encode_subscribe,
    mqtt5.SubAckPacket: V311Codec._encode_suback,
    mqtt5.UnsubscribePacket: V311Codec._encode_unsubscribe,
    mqtt5.UnsubAckPacket: V311Codec._encode_unsuback,
    mqtt5.PingReqPacket: V311Codec._encode_pingreq,
    mqtt5.PingRespPacket: V311Codec._encode_pingresp,
    mqtt5.DisconnectPacket: V311Codec._encode_disconnect,
}
