"""The records an `MqttConnection` (protocol.py) and the gateway exchange: one event per packet the gateway must act
on, the messages the gateway hands it to send (`CachedMessage`), and the traffic counters its connections share.
Plain records, compiled with mypyc with the connection (a Published is made per inbound message).

A `CachedMessage` is a message on its way to subscribers: the decoded `MqttMessage`, the core topic it is counted
under, and its QoS 0 PUBLISH bytes, per protocol level and retain flag, encoded once for all its receivers by
their connections (`MqttConnection.publish_cached`), but for MQTT 5 receivers of a message with subscription
identifiers or a Message Expiry (its remaining interval is written at sending time). MQTT 3.1.1 PUBLISHes, which
carry no properties, are encoded from the message's fields without a packet object. The bytes kept carry the full
topic name and no Topic Alias: an MQTT 5 connection that takes topic aliases from the server queues a copy with
its own, and the others send the shared bytes as they are. The message cache (message_cache.py) keeps one per
recent message."""

from __future__ import annotations

from dataclasses import dataclass

import mqtt5

from mqtt_bridge.message_mapping import MqttMessage


@dataclass(slots=True)
class Connected:
    packet: mqtt5.ConnectPacket
    version: int


class Published:
    """A PUBLISH from the client; `topic` is its topic with any topic alias resolved, `qos` and `packet_id` (0 at
    QoS 0) plain integers. QoS 1/2 need `acknowledge_publish` once stored.

    An MQTT 3.1.1 QoS 0/1 PUBLISH read in place (most inbound traffic) has nothing but these fields, payload,
    retain and DUP flags: it is kept without an `mqtt5.PublishPacket` (`plain`), whose construction and getters
    (each copying the payload or topic out of the packet again) cost more than the rest of its way to the store.
    `packet` makes one when asked. Every other PUBLISH keeps its decoded packet (read-only)."""

    __slots__ = ("_duplicate", "_packet", "_payload", "_retain", "packet_id", "qos", "topic", "wire")

    def __init__(
        self,
        topic: str,
        qos: int,
        packet_id: int,
        packet: mqtt5.PublishPacket | None = None,
        payload: bytes = b"",
        retain: bool = False,
        duplicate: bool = False,
    ) -> None:
        self.topic = topic
        self.qos = qos
        self.packet_id = packet_id
        self._packet = packet
        self._payload = payload
        self._retain = retain
        self._duplicate = duplicate
        # The packet's own bytes when they are also how a QoS 0 copy goes to an MQTT 3.1.1 subscriber (a 3.1.1
        # QoS 0 PUBLISH without retain flag): the gateway keeps them instead of encoding the message again.
        self.wire: bytes | None = None

    @property
    def plain(self) -> bool:
        """No packet behind it: topic, payload, QoS, flags and packet id are all there is (no properties)."""
        return self._packet is None

    @property
    def payload(self) -> bytes:
        return self._payload if self._packet is None else self._packet.payload

    @property
    def retain(self) -> bool:
        return self._retain if self._packet is None else self._packet.retain

    @property
    def packet(self) -> mqtt5.PublishPacket:
        packet = self._packet
        if packet is None:
            qos = mqtt5.QoS.AT_LEAST_ONCE if self.qos else mqtt5.QoS.AT_MOST_ONCE
            packet = self._packet = mqtt5.PublishPacket(
                self.topic,
                self._payload,
                qos=qos,
                retain=self._retain,
                packet_id=self.packet_id or None,
                duplicate=self._duplicate,
            )
        return packet

    def __repr__(self) -> str:
        # Not through `packet`: a log line must not make a packet for a plain event (it would stop being plain).
        detail = f"packet={self._packet!r}" if self._packet is not None else f"payload={len(self._payload)} bytes"
        return f"Published(topic={self.topic!r}, qos={self.qos}, packet_id={self.packet_id}, {detail})"


@dataclass(slots=True)
class Released:
    """The client's PUBREL for an inbound QoS 2 publish; the gateway answers with `complete`."""

    packet_id: int


@dataclass(slots=True, init=False)
class Delivered:
    """An outbound QoS 1 (PUBACK) or QoS 2 (PUBCOMP) publish is done; its packet id is free again. One per QoS 1
    delivery, so its __init__ is written out: mypyc compiles a class's own methods, while those the dataclass
    decorator generates run interpreted."""

    packet_id: int

    def __init__(self, packet_id: int) -> None:
        self.packet_id = packet_id


@dataclass(slots=True)
class Received:
    """The client's PUBREC for an outbound QoS 2 publish; the PUBREL is already queued."""

    packet_id: int


@dataclass(slots=True)
class Subscribed:
    packet: mqtt5.SubscribePacket


@dataclass(slots=True)
class Unsubscribed:
    packet: mqtt5.UnsubscribePacket


@dataclass(slots=True)
class Disconnected:
    """The client sent DISCONNECT (v5: with a reason code; 0x04 asks for the will to be published)."""

    packet: mqtt5.DisconnectPacket


Event = Connected | Published | Released | Delivered | Received | Subscribed | Unsubscribed | Disconnected


class MqttTraffic:
    """What connections received and sent, in all (Mosquitto's $SYS counters): each connection adds to the one its
    server gives it. Plain integers: the connections of a server share one event loop, and an addition per packet
    is the whole cost of keeping them."""

    __slots__ = (
        "bytes_received",
        "bytes_sent",
        "connects",
        "packets_received",
        "packets_sent",
        "publishes_received",
        "publishes_sent",
        "sockets",
    )

    def __init__(self) -> None:
        self.bytes_received = 0
        self.bytes_sent = 0
        self.packets_received = 0  # every control packet, as Mosquitto's messages/received
        self.packets_sent = 0
        self.publishes_received = 0
        self.publishes_sent = 0
        self.sockets = 0  # connections opened (the listener counts them)
        self.connects = 0  # CONNECTs accepted (the gateway counts them)


@dataclass(slots=True, init=False)
class CachedMessage:
    """A decoded message and its QoS 0 PUBLISH encodings. Its __init__ is written out: mypyc compiles a class's own
    methods, while those the dataclass decorator generates run interpreted (core.store.put_result.PutResult)."""

    message: MqttMessage
    size: int
    topic: str  # the core topic that stores it: deliveries are counted under it (core.TopicTraffic)
    # The QoS 0 MQTT 3.1.1 PUBLISH without retain flag, what most receivers get (for a message a 3.1.1 client
    # published so, the bytes it sent: put_many), in a field of its own: as a dict entry it cost 0.4 us of the
    # 1.3 us a put_many entry took (allocating, tracking by the GC and freeing a dict per message; 64-byte
    # messages, a full cache).
    v311: bytes | None
    # The other QoS 0 encodings, by (protocol level, retain flag); made on the first: the empty dict for every
    # stored message cost more than the lookups it saves.
    qos0: dict[tuple[int, bool], bytes] | None

    def __init__(self, message: MqttMessage, size: int, topic: str, v311: bytes | None = None) -> None:
        self.message = message
        self.size = size
        self.topic = topic
        self.v311 = v311
        self.qos0 = None
