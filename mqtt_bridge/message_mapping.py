"""How an MQTT PUBLISH becomes a core message and back: the message properties the gateway reads and writes.

A core message that carries `MQTT_TOPIC` is an MQTT message, whoever sent it: an in-process (later gRPC)
producer that sets it reaches MQTT subscribers, and a core consumer group reading topic `sensors` sees every
MQTT message published under `sensors/...` with its full topic in `MQTT_TOPIC`. The body is the payload, as is.

Properties (values are strings, as in every RocketMQ message):
  MQTT_TOPIC          the full MQTT topic name
  MQTT_QOS            the QoS it was published with ("0", "1", "2"; absent: 1)
  MQTT_RETAIN         "1" if published with the retain flag
  MQTT_CLIENT_ID      the publishing client (MQTT 5 no-local)
  MQTT_EXPIRES_AT     MQTT 5 Message Expiry: epoch milliseconds after which it is not delivered
  MQTT_FORMAT         MQTT 5 Payload Format Indicator ("1": UTF-8)
  MQTT_CONTENT_TYPE, MQTT_RESPONSE_TOPIC       MQTT 5 properties, as given
  MQTT_CORRELATION    MQTT 5 Correlation Data, base64
  MQTT_USER           MQTT 5 User Properties, a JSON list of [name, value] pairs (order and repeats kept)
  MQTT_PACKET_ID      the packet id of a persistent session's QoS 2 publish (the gateway's duplicate check)
"""

from __future__ import annotations

import base64
import json
import math
import time
from dataclasses import dataclass

import mqtt5

from core.store.message import Message, StoredMessage

PROPERTY_TOPIC = "MQTT_TOPIC"
PROPERTY_QOS = "MQTT_QOS"
PROPERTY_RETAIN = "MQTT_RETAIN"
PROPERTY_CLIENT = "MQTT_CLIENT_ID"
PROPERTY_EXPIRES_AT = "MQTT_EXPIRES_AT"
PROPERTY_FORMAT = "MQTT_FORMAT"
PROPERTY_CONTENT_TYPE = "MQTT_CONTENT_TYPE"
PROPERTY_RESPONSE_TOPIC = "MQTT_RESPONSE_TOPIC"
PROPERTY_CORRELATION = "MQTT_CORRELATION"
PROPERTY_USER = "MQTT_USER"
PROPERTY_PACKET_ID = "MQTT_PACKET_ID"

# Core property values cannot hold the record's separators.
_RESERVED = ("\x01", "\x02")


@dataclass(slots=True)
class MqttMessage:
    """What a subscriber is sent, read back from a core message (or a retained or will message)."""

    topic: str
    payload: bytes
    qos: int
    retain: bool
    client_id: str | None = None
    expires_at_ms: int | None = None
    payload_format: int = 0
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    user_properties: list[tuple[str, str]] | None = None

    def expiry_left_s(self, now_ms: int) -> int | None:
        """Seconds of Message Expiry left (rounded up), 0 if expired, None if it never expires."""
        if self.expires_at_ms is None:
            return None
        return max(0, math.ceil((self.expires_at_ms - now_ms) / 1000))

    def to_publish(
        self,
        qos: int,
        retain: bool,
        packet_id: int | None,
        now_ms: int,
        subscription_ids: list[int] | None = None,
        duplicate: bool = False,
    ) -> mqtt5.PublishPacket:
        return mqtt5.PublishPacket(
            self.topic,
            self.payload,
            qos=mqtt5.QoS(qos),
            retain=retain,
            packet_id=packet_id,
            duplicate=duplicate,
            subscription_ids=subscription_ids or None,
            payload_format_indicator=self.payload_format,
            message_expiry_interval=self.expiry_left_s(now_ms),
            content_type=self.content_type,
            response_topic=self.response_topic,
            correlation_data=self.correlation_data,
            user_properties=self.user_properties,
        )

    @classmethod
    def from_publish(cls, packet: mqtt5.PublishPacket, topic: str, client_id: str, now_ms: int) -> MqttMessage:
        expiry = packet.message_expiry_interval
        return cls(
            topic,
            packet.payload,
            int(packet.qos),
            packet.retain,
            client_id,
            now_ms + expiry * 1000 if expiry is not None else None,
            packet.payload_format_indicator,
            packet.content_type,
            packet.response_topic,
            packet.correlation_data,
            packet.user_properties or None,
        )

    @classmethod
    def from_will(cls, will: mqtt5.Will, client_id: str, now_ms: int) -> MqttMessage:
        expiry = will.message_expiry_interval
        return cls(
            will.topic,
            will.payload or b"",
            int(will.qos),
            will.retain,
            client_id,
            now_ms + expiry * 1000 if expiry is not None else None,
            will.payload_format_indicator,
            will.content_type,
            will.response_topic,
            will.correlation_data,
            will.user_properties or None,
        )

    def is_plain(self) -> bool:
        """True if only topic, QoS, retain flag and client id are set (its core properties depend on no more)."""
        return (
            self.expires_at_ms is None
            and not self.payload_format
            and self.content_type is None
            and self.response_topic is None
            and self.correlation_data is None
            and not self.user_properties
        )

    def properties(self) -> dict[str, str]:
        """The core message properties; raises ValueError for text the record cannot carry."""
        topic = self.topic
        if "\x01" in topic or "\x02" in topic:
            raise ValueError("the topic holds the control characters U+0001 or U+0002, which the store reserves")
        props = {PROPERTY_TOPIC: topic, PROPERTY_QOS: "012"[self.qos]}
        if self.retain:
            props[PROPERTY_RETAIN] = "1"
        if self.client_id is not None:
            props[PROPERTY_CLIENT] = _text(self.client_id, "client id")
        if self.expires_at_ms is not None:
            props[PROPERTY_EXPIRES_AT] = str(self.expires_at_ms)
        if self.payload_format:
            props[PROPERTY_FORMAT] = str(self.payload_format)
        if self.content_type is not None:
            props[PROPERTY_CONTENT_TYPE] = _text(self.content_type, "content type")
        if self.response_topic is not None:
            props[PROPERTY_RESPONSE_TOPIC] = _text(self.response_topic, "response topic")
        if self.correlation_data is not None:
            props[PROPERTY_CORRELATION] = base64.b64encode(self.correlation_data).decode()
        if self.user_properties:
            props[PROPERTY_USER] = json.dumps(self.user_properties)  # escapes control characters
        return props

    def to_core(self, core_topic: str, queue_id: int) -> Message:
        # Born when the gateway received it: core consumers (and EventBridge's event `time`) read it.
        return Message(
            topic=core_topic,
            body=self.payload,
            queue_id=queue_id,
            properties=self.properties(),
            born_timestamp=time.time_ns() // 1_000_000,
        )

    @classmethod
    def from_core(cls, message: StoredMessage | Message) -> MqttMessage | None:
        """The MQTT view of a core message, or None if it carries no MQTT topic."""
        props = message.properties
        topic = props.get(PROPERTY_TOPIC)
        if topic is None:
            return None
        qos = props.get(PROPERTY_QOS, "1")
        expires = props.get(PROPERTY_EXPIRES_AT)
        correlation = props.get(PROPERTY_CORRELATION)
        user = props.get(PROPERTY_USER)
        return cls(
            topic,
            bytes(message.body),
            int(qos) if qos in ("0", "1", "2") else 1,
            props.get(PROPERTY_RETAIN) == "1",
            props.get(PROPERTY_CLIENT),
            int(expires) if expires and expires.isdigit() else None,
            1 if props.get(PROPERTY_FORMAT) == "1" else 0,
            props.get(PROPERTY_CONTENT_TYPE),
            props.get(PROPERTY_RESPONSE_TOPIC),
            base64.b64decode(correlation) if correlation is not None else None,
            [(str(k), str(v)) for k, v in json.loads(user)] if user else None,
        )

    def to_json(self) -> dict[str, object]:
        """For snapshots of retained messages."""
        return {
            "properties": self.properties(),
            "payload": base64.b64encode(self.payload).decode(),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> MqttMessage:
        properties = data["properties"]
        payload = data["payload"]
        if not isinstance(properties, dict) or not isinstance(payload, str):
            raise ValueError("a retained message needs 'properties' (object) and 'payload' (base64 text)")
        message = cls.from_core(Message(topic="-", body=base64.b64decode(payload), properties=properties))
        if message is None:
            raise ValueError(f"a retained message without {PROPERTY_TOPIC}")
        return message


def _text(value: str, what: str) -> str:
    for reserved in _RESERVED:
        if reserved in value:
            raise ValueError(f"the {what} holds the control character U+000{ord(reserved)}, which the store reserves")
    return value
