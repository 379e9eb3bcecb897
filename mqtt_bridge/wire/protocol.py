"""One MQTT connection as a pure object (after h11's Connection): bytes in, events out; actions in, bytes out.

`MqttConnection.receive_data(data)` frames and decodes what the peer sent and returns the events the gateway
must act on; it answers by itself what needs no decision (PINGREQ, the PUBREL after a PUBREC, the PUBCOMP after
a PUBREL). The gateway's answers (`accept`, `acknowledge_publish`, `publish`, ...) queue bytes that
`data_to_send()` hands to the socket. Nothing here reads a clock or a socket, so every rule is testable byte for
byte. A peer that breaks the protocol gets a `ProtocolError` and, on MQTT 5, a DISCONNECT with its reason code
queued before the caller closes; other connections are not concerned.

Both protocol levels share the packet classes of the `mqtt5` package: level 4 is decoded and encoded by
`codec.V311Codec`, which drops what 3.1.1 cannot carry (reason codes, properties).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import mqtt5

from mqtt_bridge.errors import ProtocolError, UnsupportedProtocol
from mqtt_bridge.topics.topic import TopicError, validate_topic_name
from mqtt_bridge.wire.codec import DUP_FLAG, MQTT_3_1_1, check_first_byte, protocol_level
from mqtt_bridge.wire.codec_v5 import V5Codec, publish_topic_bounds, with_topic_alias
from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish, read_short_publish
from mqtt_bridge.wire.framing import FrameBuffer
from mqtt_bridge.wire.protocol_events import (
    CachedMessage,
    Connected,
    Delivered,
    Disconnected,
    Event,
    MqttTraffic,
    Published,
    Received,
    Released,
    Subscribed,
    Unsubscribed,
)

# The events and traffic counters live in protocol_events.py; importers of this module find them here too.
__all__ = [
    "Connected",
    "Delivered",
    "Disconnected",
    "Event",
    "Limits",
    "MqttConnection",
    "MqttTraffic",
    "Published",
    "Received",
    "Released",
    "State",
    "Subscribed",
    "Unsubscribed",
]

# Before CONNECT we know nothing of the peer: a CONNECT is small (ids, credentials, a will), so a first packet
# over this size is refused before it is buffered (Mosquitto applies its message size limit the same way).
MAX_CONNECT_SIZE = 256 * 1024
# Packet ids are 16-bit and 0 is not one.
MAX_PACKET_ID = 0xFFFF
# The fixed header byte of a PUBLISH at QoS 0 without DUP or RETAIN.
_PLAIN_QOS0_PUBLISH = 0x30
# Reason codes from 0x80 on are failures (MQTT 5 section 2.4).
_FIRST_FAILURE_REASON = 0x80
# A Topic Alias costs 3 bytes (identifier, two-byte value) in every PUBLISH that uses it, in place of the topic
# name: topics shorter than this gain nothing from one and keep their name.
MIN_ALIASED_TOPIC_BYTES = 4


class State(enum.Enum):
    AWAITING_CONNECT = "AWAITING_CONNECT"
    CONNECTED = "CONNECTED"
    CLOSED = "CLOSED"


@dataclass(slots=True, frozen=True)
class Limits:
    """What this server accepts from, and promises to, one client."""

    max_packet_size: int = 1024 * 1024
    # Inbound QoS 1/2 publishes not yet acknowledged (MQTT 5 Receive Maximum, announced in CONNACK).
    receive_maximum: int = 1024
    # Inbound topic aliases a v5 client may set (Topic Alias Maximum, announced in CONNACK).
    topic_alias_maximum: int = 64
    # Topic aliases the server sets toward a v5 client, at most the client's own Topic Alias Maximum (0: none).
    server_topic_alias_maximum: int = 64
    # The longest keep alive a client may use, in seconds (0: no maximum). A v5 client asking for more, or for
    # none (0), is told this one in CONNACK (Server Keep Alive); a 3.1.1 client, which cannot be told, is refused.
    max_keepalive: int = 0
    # Outbound QoS 1/2 publishes in flight per client, whatever the client's Receive Maximum allows
    # (Mosquitto's max_inflight_messages is 20; a durable queue behind us makes a larger window cheap).
    max_inflight: int = 64


class MqttConnection:
    def __init__(self, limits: Limits | None = None, traffic: MqttTraffic | None = None) -> None:
        self.limits = limits or Limits()
        self.traffic = traffic if traffic is not None else MqttTraffic()
        self.state = State.AWAITING_CONNECT
        self.version = 0
        self._codec: V311Codec | V5Codec | None = None
        self._frames = FrameBuffer(min(MAX_CONNECT_SIZE, self.limits.max_packet_size))
        self._out: list[bytes] = []
        # A protocol error found after packets whose events the caller has yet to act on (see receive_data).
        self.pending_error: ProtocolError | None = None
        # Inbound QoS 1/2 publishes whose quota the client has not got back (Receive Maximum, MQTT 5 4.9): a QoS 1
        # one until its PUBACK, a QoS 2 one until its PUBCOMP (or a PUBREC with a failure reason code).
        self.inbound_unacked = 0
        # The packet ids of inbound QoS 2 publishes counted in inbound_unacked, awaiting their PUBREL; made on the
        # first QoS 2 publish (most connections never send one).
        self._inbound_qos2: set[int] | None = None
        self._aliases: dict[int, str] = {}
        # The last topic name a PUBLISH passed validate_topic_name with.
        self._valid_topic = ""
        # Set from the CONNECT: the keep alive in force (seconds, 0: none), and the Server Keep Alive the CONNACK
        # must carry when it is not the client's own.
        self.keep_alive = 0
        self._server_keep_alive: int | None = None
        # Set from the CONNECT: what the client accepts.
        self.client_receive_maximum = MAX_PACKET_ID
        self.client_max_packet_size: int | None = None
        self.request_problem_info = True
        # Topic aliases we may set toward the client (the smaller of its Topic Alias Maximum and ours), and those set,
        # by topic name as encoded; the dict is made on the first one. They last as long as the connection.
        self.outbound_alias_limit = 0
        self._outbound_aliases: dict[bytes, int] | None = None
        # Outbound publishes awaiting PUBACK / PUBREC / PUBCOMP, by packet id (True once PUBREC came).
        self.outbound: dict[int, bool] = {}
        self._next_id = 1

    # --- input --------------------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """The events of the packets completed by `data`, in order.

        A packet that breaks the protocol ends the connection, but not what came before it: if packets before it
        (in this call) gave events, they are returned and the error is kept in `pending_error` for the caller to
        `fail` with once it has acted on them (the PUBLISHes before a malformed packet are stored). Otherwise the
        ProtocolError is raised, with the connection already failed. Nothing is read after the error.
        """
        if self.state is State.CLOSED or self.pending_error is not None:
            return []
        events: list[Event] = []
        traffic = self.traffic
        traffic.bytes_received += len(data)
        packets = 0
        try:
            if self._codec is None and data and not self._frames.buffered:
                # Nothing received yet: the first byte tells a peer that does not speak MQTT at all, refused at once
                # rather than after the connect timeout (Mosquitto checks the first byte the same way).
                check_first_byte(data[0])
            frames = self._frames
            frames.feed(data)
            buffer = frames.data
            fast = self._codec is not None and self.version == MQTT_3_1_1
            while (bounds := frames.next_bounds()) is not None:
                start, body, end = bounds
                packets += 1
                # A 3.1.1 QoS 0/1 PUBLISH (short enough for a one-byte length) is read in place, without a copy.
                fields = read_short_publish(buffer, body, end) if fast and body == start + 2 else None
                if fields is not None:
                    published = self._handle_short_publish(fields)
                    if buffer[start] == _PLAIN_QOS0_PUBLISH:
                        published.wire = bytes(buffer[start:end])
                    frames.advance(end)
                    event: Event | None = published
                else:
                    frame = memoryview(bytes(buffer[start:end]))
                    frames.advance(end)
                    event = self._handle(frame)
                    fast = self._codec is not None and self.version == MQTT_3_1_1
                if event is not None:
                    events.append(event)
                if self.state is State.CLOSED:
                    break
        except ProtocolError as exc:
            traffic.packets_received += packets
            if events:
                self.pending_error = exc
                return events
            self.fail(exc)
            raise
        traffic.packets_received += packets
        return events

    def _handle(self, frame: memoryview) -> Event | None:
        codec = self._codec
        if codec is None:
            return self._handle_connect(frame)
        packet = codec.decode(frame)
        if isinstance(packet, mqtt5.PublishPacket):
            return self._handle_publish(packet)
        if isinstance(packet, mqtt5.PubAckPacket | mqtt5.PubCompPacket):
            if self.outbound.pop(packet.packet_id, None) is None:
                return None  # an ack for an id we do not know (a duplicate after a resend): nothing to do
            return Delivered(packet.packet_id)
        if isinstance(packet, mqtt5.PubRecPacket):
            packet_id = packet.packet_id
            if packet_id not in self.outbound:
                # Answer anyway so that the client can free the id (MQTT 5 says: with "Packet Identifier not found").
                self._send(mqtt5.PubRelPacket(packet_id, reason_code=mqtt5.PubRelReasonCode.PACKET_ID_NOT_FOUND))
                return None
            self.outbound[packet_id] = True
            self._send(mqtt5.PubRelPacket(packet_id))
            return Received(packet_id)
        if isinstance(packet, mqtt5.PubRelPacket):
            return Released(packet.packet_id)  # the session knows whether it awaits this id: `complete` answers
        if isinstance(packet, mqtt5.SubscribePacket):
            if not packet.topic_filters:
                raise ProtocolError("SUBSCRIBE without topic filters")
            return Subscribed(packet)
        if isinstance(packet, mqtt5.UnsubscribePacket):
            if not packet.patterns:
                raise ProtocolError("UNSUBSCRIBE without topic filters")
            return Unsubscribed(packet)
        if isinstance(packet, mqtt5.PingReqPacket):
            self._send(mqtt5.PingRespPacket())
            return None
        if isinstance(packet, mqtt5.DisconnectPacket):
            self.state = State.CLOSED
            return Disconnected(packet)
        if isinstance(packet, mqtt5.ConnectPacket):
            raise ProtocolError("a second CONNECT on one connection")
        if isinstance(packet, mqtt5.AuthPacket):
            raise ProtocolError("AUTH: enhanced authentication is not supported", 0x8C)
        raise ProtocolError(f"{type(packet).__name__[:-6].upper()} is a packet only a server sends")

    def _handle_connect(self, frame: memoryview) -> Event:
        self.version = protocol_level(frame)
        self._codec = V5Codec() if self.version == 5 else V311Codec()
        packet = self._codec.decode(frame)
        if type(packet) is not mqtt5.ConnectPacket:
            raise ProtocolError(f"the first packet must be CONNECT, not {type(packet).__name__}")
        self._frames.max_packet_size = self.limits.max_packet_size
        if self.version == 5:
            if packet.receive_max == 0:
                raise ProtocolError("CONNECT: Receive Maximum 0")
            self.client_receive_maximum = packet.receive_max
            self.client_max_packet_size = packet.max_packet_size
            self.request_problem_info = packet.request_problem_info
            self.outbound_alias_limit = min(packet.topic_alias_max, self.limits.server_topic_alias_maximum)
        self._limit_keep_alive(packet.keep_alive, packet.client_id)
        return Connected(packet, self.version)

    def _limit_keep_alive(self, asked: int, client_id: str) -> None:
        """The keep alive in force for a client that asked for `asked` seconds, within `Limits.max_keepalive`.

        As Mosquitto's max_keepalive does: past the maximum, or 0 (no keep alive at all), a v5 client is told the
        maximum in CONNACK and held to it [MQTT-3.2.2-21]; a 3.1.1 client, which has no Server Keep Alive, gets
        CONNACK 0x02 "identifier rejected" and is disconnected (Mosquitto since 2.0.12: this bounds how long a
        silent connection is kept, CVE-2020-13849 being about 3.1.1 keep alives left to the client)."""
        maximum = self.limits.max_keepalive
        if not maximum or 0 < asked <= maximum:
            self.keep_alive = asked
            return
        if self.version != 5:
            self.refuse(mqtt5.ConnAckReasonCode.CLIENT_ID_NOT_VALID)
            raise ProtocolError(
                f"CONNECT of {client_id[:60]!r}: keep alive {asked} s{' (none)' if not asked else ''} is refused: "
                f"this server's max_keepalive is {maximum} s; an MQTT 3.1.1 client must ask for 1 to {maximum} s"
            )
        self.keep_alive = self._server_keep_alive = maximum

    def _handle_short_publish(self, fields: tuple[str, bytes, int, bool, int, bool]) -> Published:
        """`_handle_publish` for the fields of `read_short_publish`: an MQTT 3.1.1 QoS 0/1 PUBLISH, which has no
        properties (no topic alias, no subscription identifier) and no Receive Maximum to be held to."""
        topic, payload, qos, retain, packet_id, duplicate = fields
        self.traffic.publishes_received += 1
        if topic != self._valid_topic:
            try:
                validate_topic_name(topic)
            except TopicError as exc:
                raise ProtocolError(f"PUBLISH: {exc}", 0x90) from None
            self._valid_topic = topic
        if qos:
            self.inbound_unacked += 1
        return Published(topic, qos, packet_id, None, payload, retain, duplicate)

    def _handle_publish(self, packet: mqtt5.PublishPacket) -> Published:
        self.traffic.publishes_received += 1
        # A client may publish right after its CONNECT, before the CONNACK (MQTT 3.1.4): the events are handled
        # in order, so the gateway accepts the connection first, and drops them if it refuses it.
        if packet.subscription_ids:
            raise ProtocolError("PUBLISH: a client must not send a Subscription Identifier (MQTT-3.3.4-6)")
        alias = packet.topic_alias
        topic = packet.topic
        if alias is not None:
            if not 0 < alias <= self.limits.topic_alias_maximum:
                raise ProtocolError(
                    f"PUBLISH: topic alias {alias} is outside 1..{self.limits.topic_alias_maximum}", 0x94
                )
            if topic:
                self._aliases[alias] = topic
            else:
                known = self._aliases.get(alias)
                if known is None:
                    raise ProtocolError(f"PUBLISH: topic alias {alias} was never set")
                topic = known
        if topic != self._valid_topic:  # a client mostly publishes to the topic it published to last
            try:
                validate_topic_name(topic)
            except TopicError as exc:
                raise ProtocolError(f"PUBLISH: {exc}", 0x90) from None
            self._valid_topic = topic
        qos = int(packet.qos)  # an mqtt5 QoS is truthy even at QoS 0
        if qos:
            pending = self._inbound_qos2
            if qos == 2 and pending is not None and packet.packet_id in pending:
                # The same QoS 2 flow again (its PUBREL has not come): it holds its quota already, and the gateway
                # answers it with PUBREC without storing it twice.
                return Published(topic, qos, packet.packet_id or 0, packet)
            if self.inbound_unacked >= self.limits.receive_maximum and self.version == 5:
                raise ProtocolError(
                    f"more than Receive Maximum ({self.limits.receive_maximum}) unacknowledged QoS 1/2 publishes "
                    "(a QoS 2 publish counts until its PUBCOMP, MQTT 5 section 4.9)",
                    0x93,
                )
            self.inbound_unacked += 1
            if qos == 2:
                if pending is None:
                    pending = self._inbound_qos2 = set()
                pending.add(packet.packet_id)  # type: ignore[arg-type]
        return Published(topic, qos, packet.packet_id or 0, packet)

    def _qos2_done(self, packet_id: int) -> None:
        """An inbound QoS 2 flow ended (PUBCOMP queued, or PUBREC with a failure): its quota goes back."""
        pending = self._inbound_qos2
        if pending is not None and packet_id in pending:
            pending.discard(packet_id)
            if self.inbound_unacked:
                self.inbound_unacked -= 1

    # --- the gateway's answers -------------------------------------------------------------------------------

    def accept(self, session_present: bool, **properties: object) -> None:
        """CONNACK success. `properties` are MQTT 5 CONNACK properties (assigned_client_id, ...)."""
        if self.version == 5:
            if self._server_keep_alive is not None:
                properties["server_keep_alive"] = self._server_keep_alive
            ack = mqtt5.ConnAckPacket(
                session_present=session_present,
                receive_max=self.limits.receive_maximum,
                topic_alias_max=self.limits.topic_alias_maximum,
                max_packet_size=self.limits.max_packet_size,
                **properties,  # type: ignore[arg-type]
            )
        else:
            ack = mqtt5.ConnAckPacket(session_present=session_present)
        self._send(ack)
        self.state = State.CONNECTED

    def refuse(self, reason: mqtt5.ConnAckReasonCode, reason_string: str | None = None) -> None:
        """CONNACK failure; the caller closes the connection after sending."""
        self._send_with_reason(
            lambda text: mqtt5.ConnAckPacket(reason_code=reason, reason_str=text),
            reason_string if self.version == 5 else None,
        )
        self.state = State.CLOSED

    def acknowledge_publish(self, packet_id: int, qos: int, reason: int = 0, reason_string: str | None = None) -> None:
        """PUBACK (QoS 1) or PUBREC (QoS 2) for an inbound publish, once it is stored (or refused: reason >= 0x80).

        A QoS 1 publish gives its Receive Maximum quota back now; a QoS 2 one when its PUBREL is answered with
        PUBCOMP, unless it is refused here (MQTT 5 section 4.9)."""
        text = reason_string if self.request_problem_info else None
        if qos == 1:
            if self.inbound_unacked:
                self.inbound_unacked -= 1
            code = mqtt5.PubAckReasonCode(reason)
            self._send_with_reason(lambda text: mqtt5.PubAckPacket(packet_id, reason_code=code, reason_str=text), text)
        else:
            if reason >= _FIRST_FAILURE_REASON:
                self._qos2_done(packet_id)
            rec_code = mqtt5.PubRecReasonCode(reason)
            self._send_with_reason(
                lambda text: mqtt5.PubRecPacket(packet_id, reason_code=rec_code, reason_str=text), text
            )

    def acknowledge_subscribe(self, packet_id: int, codes: list[mqtt5.SubAckReasonCode]) -> None:
        self._send(mqtt5.SubAckPacket(packet_id, codes))

    def acknowledge_unsubscribe(self, packet_id: int, codes: list[mqtt5.UnsubAckReasonCode]) -> None:
        self._send(mqtt5.UnsubAckPacket(packet_id, codes))

    @property
    def send_window(self) -> int:
        """How many more QoS 1/2 publishes may be sent before acknowledgements come back."""
        return min(self.client_receive_maximum, self.limits.max_inflight) - len(self.outbound)

    def next_packet_id(self) -> int:
        """A packet id not in flight (ids of a persistent session's resends are reserved with `reserve`)."""
        for _ in range(MAX_PACKET_ID):
            packet_id = self._next_id
            self._next_id = packet_id + 1 if packet_id < MAX_PACKET_ID else 1
            if packet_id not in self.outbound:
                return packet_id
        raise ProtocolError("no free packet id: 65,535 publishes in flight")

    def publish(self, packet: mqtt5.PublishPacket) -> bool:
        """Queue an outbound PUBLISH; QoS 1/2 need `packet.packet_id` set (from next_packet_id or a resend).

        Returns False, sending nothing, when the packet is larger than the client's Maximum Packet Size
        (MQTT 5 says the server discards it as if delivered). A topic alias is used if the client takes them.
        """
        data = self._encode(packet)
        if self.outbound_alias_limit:
            data = self._with_alias(data)
        limit = self.client_max_packet_size
        if limit is not None and len(data) > limit:
            return False
        if int(packet.qos):
            self.outbound[packet.packet_id] = False  # type: ignore[index]
        self._out.append(data)
        self.traffic.publishes_sent += 1
        return True

    def publish_encoded(self, data: bytes, packet_id: int | None = None) -> bool:
        """Queue a PUBLISH already encoded at this protocol level (by `encode`, or `codec_v311.encode_publish`),
        with its `packet_id` at QoS 1/2: the gateway encodes a message once for all its QoS 0 receivers. False,
        sending nothing, as `publish` for one larger than the client takes. `data` is left as it is: a connection
        with topic aliases queues a copy with its own alias."""
        if self.outbound_alias_limit:
            data = self._with_alias(data)
        limit = self.client_max_packet_size
        if limit is not None and len(data) > limit:
            return False
        if packet_id is not None:
            self.outbound[packet_id] = False
        self._out.append(data)
        self.traffic.publishes_sent += 1
        return True

    def publish_cached(
        self,
        cached: CachedMessage,
        qos: int,
        retain: bool,
        packet_id: int | None,
        now_ms: int,
        subscription_ids: list[int],
    ) -> bool:
        """Queue the message as `publish` would, with its QoS 0 bytes encoded once for every connection that sends
        them alike (kept in `cached`). False as `publish`."""
        message = cached.message
        if self.version == MQTT_3_1_1:
            # 3.1.1 carries no properties (expiry, subscription ids): topic, payload and flags are the packet.
            if qos:
                return self.publish_encoded(
                    encode_publish(message.topic, message.payload, qos, retain, packet_id), packet_id
                )
            if not retain:
                data = cached.v311
                if data is None:
                    data = cached.v311 = encode_publish(message.topic, message.payload, 0, False, None)
                return self.publish_encoded(data)
        elif qos or subscription_ids or message.expires_at_ms is not None:
            return self.publish(message.to_publish(qos, retain, packet_id, now_ms, subscription_ids))
        key = (self.version, retain)
        encoded = cached.qos0
        found = encoded.get(key) if encoded is not None else None
        if found is None:
            if self.version == MQTT_3_1_1:
                found = encode_publish(message.topic, message.payload, 0, retain, None)
            else:
                found = self._encode(message.to_publish(0, retain, None, now_ms))
            if encoded is None:
                encoded = cached.qos0 = {}
            encoded[key] = found
        return self.publish_encoded(found)

    def encode(self, packet: mqtt5.Packet) -> bytes:
        """The bytes of `packet` at this connection's protocol level, queued nowhere (and without topic alias)."""
        return self._encode(packet)

    def _with_alias(self, data: bytes) -> bytes:
        """The encoded v5 PUBLISH `data` as this connection sends it: with the topic's alias and an empty topic name
        if the topic has one, with topic name and a new alias if one is free, else as it is.

        Aliases go to topics first come, first served, and stay theirs for the connection; a topic past the limit
        is sent in full. EMQX (emqx_channel:packing_alias) and Mosquitto's development branch
        (max_topic_alias_broker) do the same. Replacing the least recently used alias instead would resend a full
        topic name at every replacement, and a subscriber cycling through one topic more than it has aliases would
        get a full name and a new alias in every PUBLISH, more bytes than without aliases. A resend (DUP, after a
        reconnect) carries its topic name in full and no alias: aliases belong to a connection, and the resend
        must stand on its own.
        """
        if data[0] & DUP_FLAG:
            return data
        start, end = publish_topic_bounds(data)
        if end - start < MIN_ALIASED_TOPIC_BYTES:
            return data
        topic = data[start:end]
        aliases = self._outbound_aliases
        if aliases is None:
            aliases = self._outbound_aliases = {}
        alias = aliases.get(topic)
        if alias is not None:
            return with_topic_alias(data, start, end, alias, keep_topic=False)
        if len(aliases) >= self.outbound_alias_limit:
            return data
        alias = len(aliases) + 1
        aliased = with_topic_alias(data, start, end, alias, keep_topic=True)
        limit = self.client_max_packet_size
        if limit is not None and len(aliased) > limit:
            return data  # the 3 bytes of the alias would make it too large: not sent with it, so not set
        aliases[topic] = alias
        return aliased

    def complete(self, packet_id: int, known: bool) -> None:
        """PUBCOMP for the client's PUBREL. `known`: the session awaited it (the publish was stored and PUBREC'd);
        otherwise MQTT 5 says 0x92 Packet Identifier not found (a flow whose PUBREC refused the message, or one
        that never was), so that the client does not take a refused QoS 2 publish for a delivered one."""
        if known or self.version != 5:
            self._send(mqtt5.PubCompPacket(packet_id))
        else:
            self._send(mqtt5.PubCompPacket(packet_id, reason_code=mqtt5.PubCompReasonCode.PACKET_ID_NOT_FOUND))
        self._qos2_done(packet_id)

    def release(self, packet_id: int) -> None:
        """Resend the PUBREL of an outbound QoS 2 publish whose PUBREC came before a reconnect."""
        self.outbound[packet_id] = True
        self._send(mqtt5.PubRelPacket(packet_id))

    def disconnect(self, reason: mqtt5.DisconnectReasonCode, reason_string: str | None = None) -> None:
        """Server-side DISCONNECT (MQTT 5 only; 3.1.1 has none: the caller just closes)."""
        if self.state is State.CLOSED:
            return
        if self.version == 5:
            self._send_with_reason(
                lambda text: mqtt5.DisconnectPacket(reason_code=reason, reason_str=text), reason_string
            )
        self.state = State.CLOSED

    def fail(self, error: ProtocolError) -> None:
        """Queue the DISCONNECT that tells a v5 client why it is being dropped; the connection is over."""
        if isinstance(error, UnsupportedProtocol) and self._codec is None:
            # MQTT 3.1.1 3.1.2.2 (and 5.0 for a level it does not know): CONNACK 0x01 in the 3.1.1 layout.
            self._out.append(b"\x20\x02\x00\x01")
        if self.state is State.CONNECTED and self.version == 5:
            try:
                reason = mqtt5.DisconnectReasonCode(error.reason_code)
            except ValueError:
                reason = mqtt5.DisconnectReasonCode.PROTOCOL_ERROR
            self._send_with_reason(lambda text: mqtt5.DisconnectPacket(reason_code=reason, reason_str=text), str(error))
        self.state = State.CLOSED

    # --- output -------------------------------------------------------------------------------------------

    def _encode(self, packet: mqtt5.Packet) -> bytes:
        assert self._codec is not None, "nothing can be sent before the CONNECT"
        return self._codec.encode(packet)

    def _send(self, packet: mqtt5.Packet) -> None:
        data = self._encode(packet)
        if data:
            self._out.append(data)

    def _send_with_reason(self, make: Callable[[str | None], mqtt5.Packet], reason_string: str | None) -> None:
        """Queue `make(reason_string)`, or `make(None)` if the reason string would take the packet past the client's
        Maximum Packet Size: MQTT 5 forbids the property then (MQTT-3.2.2-19 CONNACK, -3.4.2-2 PUBACK, -3.5.2-2
        PUBREC, -3.14.2-3 DISCONNECT) and the packet still has to go, with its reason code."""
        data = self._encode(make(reason_string))
        limit = self.client_max_packet_size
        if reason_string is not None and limit is not None and len(data) > limit:
            data = self._encode(make(None))
        if data:
            self._out.append(data)

    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        self._out = []
        data = out[0] if len(out) == 1 else b"".join(out)
        traffic = self.traffic
        traffic.packets_sent += len(out)
        traffic.bytes_sent += len(data)
        return data
