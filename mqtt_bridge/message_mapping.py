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
  MQTT_HEADER         see below

Text a record's properties cannot carry. Property values cannot hold U+0001 or U+0002 (the record's separators),
and all properties of a record share 65,535 bytes, while an MQTT topic may hold both and be 65,535 bytes long. When
the topic, client id, content type, response topic, correlation data and user properties together hold either
character or take more than `MAX_PROPERTY_TEXT` bytes, they travel instead as a JSON object at the start of the
body ({"topic", "client_id", "content_type", "response_topic", "correlation" (base64), "user"}, absent ones left
out), `MQTT_HEADER` gives its length in bytes, and the payload follows it. `MqttMessage.from_core` and
`mqtt_view` read both forms; a core consumer sees such a message with the header in its body.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mqtt5

from core import Message, StoredMessage

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
PROPERTY_HEADER = "MQTT_HEADER"

# MQTT text kept in properties, at most (UTF-8 bytes): RocketMQ's clients cap all properties of a message at
# 32,767 bytes (a Java short); half of that leaves the core room for its own (keys, the light queues of every
# matching subscription filter).
MAX_PROPERTY_TEXT = 16 * 1024


def now_ms() -> int:
    """The wall clock in ms, as messages' birth and expiry times are kept."""
    return time.time_ns() // 1_000_000


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
        """The core message properties of a message whose text fits in properties (see `needs_header`)."""
        props = {PROPERTY_TOPIC: self.topic, PROPERTY_QOS: "012"[self.qos]}
        if self.client_id is not None:
            props[PROPERTY_CLIENT] = self.client_id
        if self.content_type is not None:
            props[PROPERTY_CONTENT_TYPE] = self.content_type
        if self.response_topic is not None:
            props[PROPERTY_RESPONSE_TOPIC] = self.response_topic
        if self.correlation_data is not None:
            props[PROPERTY_CORRELATION] = base64.b64encode(self.correlation_data).decode()
        if self.user_properties:
            props[PROPERTY_USER] = json.dumps(self.user_properties)  # escapes control characters
        self._add_flags(props)
        return props

    def _add_flags(self, props: dict[str, str]) -> None:
        if self.retain:
            props[PROPERTY_RETAIN] = "1"
        if self.expires_at_ms is not None:
            props[PROPERTY_EXPIRES_AT] = str(self.expires_at_ms)
        if self.payload_format:
            props[PROPERTY_FORMAT] = str(self.payload_format)

    def needs_header(self) -> bool:
        """True if the message's text cannot travel as properties (a separator character, or too long)."""
        size = 0
        for text in (self.topic, self.client_id, self.content_type, self.response_topic):
            if text is None:
                continue
            if "\x01" in text or "\x02" in text:
                return True
            size += len(text) if text.isascii() else len(text.encode("utf-8"))
        if self.correlation_data is not None:
            size += len(self.correlation_data) * 4 // 3 + 4
        if self.user_properties:
            for name, value in self.user_properties:
                size += len(name.encode("utf-8")) + len(value.encode("utf-8")) + 8
        return size > MAX_PROPERTY_TEXT

    def core_fields(self) -> tuple[dict[str, str], bytes]:
        """The core message's properties and body."""
        if not self.needs_header():
            return self.properties(), self.payload
        fields: dict[str, object] = {"topic": self.topic}
        if self.client_id is not None:
            fields["client_id"] = self.client_id
        if self.content_type is not None:
            fields["content_type"] = self.content_type
        if self.response_topic is not None:
            fields["response_topic"] = self.response_topic
        if self.correlation_data is not None:
            fields["correlation"] = base64.b64encode(self.correlation_data).decode()
        if self.user_properties:
            fields["user"] = self.user_properties
        header = json.dumps(fields).encode()  # ASCII: control characters and non-ASCII escaped
        props = {PROPERTY_QOS: "012"[self.qos], PROPERTY_HEADER: str(len(header))}
        self._add_flags(props)
        return props, header + self.payload

    def to_core(self, core_topic: str, queue_id: int) -> Message:
        # Born when the gateway received it: core consumers (and EventBridge's event `time`) read it.
        properties, body = self.core_fields()
        return Message(
            topic=core_topic,
            body=body,
            queue_id=queue_id,
            properties=properties,
            born_timestamp=time.time_ns() // 1_000_000,
        )

    @classmethod
    def from_core(cls, message: StoredMessage | Message) -> MqttMessage | None:
        """The MQTT view of a core message, or None if it carries no MQTT topic (or a broken header)."""
        props = message.properties
        topic = props.get(PROPERTY_TOPIC)
        body = bytes(message.body)
        header: dict[str, Any] = {}
        if topic is None:
            found = read_header(props, body)
            if found is None:
                return None
            header, body = found
            topic = header["topic"]
            client_id = header.get("client_id")
            content_type = header.get("content_type")
            response_topic = header.get("response_topic")
            correlation = header.get("correlation")
            user = header.get("user")
        else:
            client_id = props.get(PROPERTY_CLIENT)
            content_type = props.get(PROPERTY_CONTENT_TYPE)
            response_topic = props.get(PROPERTY_RESPONSE_TOPIC)
            correlation = props.get(PROPERTY_CORRELATION)
            text = props.get(PROPERTY_USER)
            user = json.loads(text) if text else None
        qos = props.get(PROPERTY_QOS, "1")
        expires = props.get(PROPERTY_EXPIRES_AT)
        return cls(
            topic,
            body,
            int(qos) if qos in ("0", "1", "2") else 1,
            props.get(PROPERTY_RETAIN) == "1",
            client_id,
            int(expires) if expires and expires.isdigit() else None,
            1 if props.get(PROPERTY_FORMAT) == "1" else 0,
            content_type,
            response_topic,
            base64.b64decode(correlation) if correlation is not None else None,
            [(str(k), str(v)) for k, v in user] if user else None,
        )

    def to_json(self) -> dict[str, object]:
        """For snapshots of retained messages: the core form, body in base64."""
        properties, body = self.core_fields()
        return {"properties": properties, "payload": base64.b64encode(body).decode()}

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


def read_header(properties: Mapping[str, str], body: bytes) -> tuple[dict[str, Any], bytes] | None:
    """The MQTT header at the start of a body (see the module docstring) and the payload after it; None if the
    message has no header, or one that does not parse (a core producer's mistake; the message is not MQTT's)."""
    length = properties.get(PROPERTY_HEADER)
    if length is None or not length.isdigit() or int(length) > len(body):
        return None
    size = int(length)
    try:
        header = json.loads(body[:size])
    except ValueError:
        return None
    if not isinstance(header, dict) or not isinstance(header.get("topic"), str):
        return None
    return header, body[size:]


def mqtt_view(properties: Mapping[str, str], body: bytes) -> tuple[str, bytes] | None:
    """The MQTT topic and payload of a core message (for readers that need no more), None if not an MQTT one."""
    topic = properties.get(PROPERTY_TOPIC)
    if topic is not None:
        return topic, body
    found = read_header(properties, body)
    if found is None:
        return None
    header, payload = found
    return header["topic"], payload


def mqtt_client_of(properties: Mapping[str, str], body: bytes) -> str | None:
    """The publishing client of an MQTT message stored by the gateway (None if unknown)."""
    client = properties.get(PROPERTY_CLIENT)
    if client is not None or PROPERTY_TOPIC in properties:
        return client
    found = read_header(properties, body)
    if found is None:
        return None
    value = found[0].get("client_id")
    return value if isinstance(value, str) else None
