"""The gateway's durable state as core messages (core.StateTable): how retained messages, session records and
inbound QoS 2 records are read back from the messages that changed them, and the keys and digests they use.

Retained messages are the retained MQTT messages themselves (light queue `%LMQ%MQTT_RETAINED`); a session record is
a message of topic MQTT_SESSIONS with the session as JSON (empty: deleted); an inbound QoS 2 record is the stored
QoS 2 publish of a persistent session, with its packet id (light queue `%LMQ%MQTT_QOS2_INBOUND`)."""

from __future__ import annotations

import hashlib
import json

from core import LIGHT_QUEUE_PREFIX, Message, StoredMessage
from mqtt_bridge.message_mapping import PROPERTY_PACKET_ID, MqttMessage, mqtt_client_of, mqtt_view

RETAINED_QUEUE = f"{LIGHT_QUEUE_PREFIX}MQTT_RETAINED"
# QoS 2 publishes of persistent sessions, so that a resend after a broker crash is recognised (not stored twice).
INBOUND_QOS2_QUEUE = f"{LIGHT_QUEUE_PREFIX}MQTT_QOS2_INBOUND"
SESSIONS_TOPIC = "MQTT_SESSIONS"
PROPERTY_SESSION = "MQTT_SESSION"


def retained_change(message: StoredMessage) -> tuple[str, MqttMessage | None] | None:
    mqtt = MqttMessage.from_core(message)
    if mqtt is None:
        return None
    return mqtt.topic, (mqtt if mqtt.payload else None)


def retained_json(message: MqttMessage) -> object:
    return message.to_json()


def retained_value(data: object) -> MqttMessage:
    if not isinstance(data, dict):
        raise ValueError("expected an object")
    return MqttMessage.from_json(data)


def session_change(message: StoredMessage) -> tuple[str, dict[str, object] | None] | None:
    client_id = message.properties.get(PROPERTY_SESSION)
    if client_id is None:
        return None
    return client_id, (json.loads(message.body) if message.body else None)


def session_value(data: object) -> dict[str, object]:
    if not isinstance(data, dict):
        raise ValueError("expected an object")
    return data


def qos2_key(client_id: str, packet_id: str) -> str:
    """The key of an inbound QoS 2 publish: client id and packet id (a NUL cannot occur in a client id)."""
    return f"{client_id}\x00{packet_id}"


def payload_digest(topic: str, payload: bytes) -> str:
    digest = hashlib.blake2b(topic.encode(), digest_size=8)
    digest.update(b"\x00")
    digest.update(payload)
    return digest.hexdigest()


def qos2_digest(message: Message | StoredMessage) -> str:
    view = mqtt_view(message.properties, bytes(message.body))
    return payload_digest(*view) if view is not None else ""


def qos2_change(message: StoredMessage) -> tuple[str, str | None] | None:
    properties = message.properties
    packet_id = properties.get(PROPERTY_PACKET_ID)
    if packet_id is None:
        return None
    client = mqtt_client_of(properties, bytes(message.body))
    return qos2_key(client or "", packet_id), qos2_digest(message)


def qos2_value(data: object) -> str:
    if not isinstance(data, str):
        raise ValueError("expected a string")
    return data
