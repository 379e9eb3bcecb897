"""How a run of inbound QoS 0 and 1 PUBLISHes of one connection becomes store calls, without I/O: what depends on
a message's topic alone is worked out once per run of one topic (`TopicRoute`: its refusal, if any, its core
topic and queue, the core properties of its plain messages), and consecutive messages for the same core topic
and queue are gathered into one batch (`StoreRun`), cut at PUBLISH_BATCH messages or PUBLISH_BATCH_BYTES.
inbound.py stores the batches and answers."""

from __future__ import annotations

from core import Message
from mqtt_bridge.message_mapping import PROPERTY_HEADER, MqttMessage
from mqtt_bridge.protocol import Published
from mqtt_bridge.publish_refusal import Refusal

# Inbound QoS 0 PUBLISHes of one connection stored with one store call, at most: a run of a pipelining publisher
# (a read of 64 KiB holds about 800 small ones) is cut into batches of this many messages or payload bytes, well
# under the core's batch limit of 4 MiB (core.broker.MAX_BATCH_BYTES) whatever the packet size.
PUBLISH_BATCH = 256
PUBLISH_BATCH_BYTES = 1024 * 1024

# What the message cache keeps of a stored message (MessageCache.put_many): the message, its QoS 0 MQTT 3.1.1
# PUBLISH without retain flag if known (the bytes a 3.1.1 client sent), its packet id if it is acknowledged.
RunEntry = tuple[MqttMessage, bytes | None, int | None]


class TopicRoute:
    """Where the messages of one topic go, or why they are refused (`refusal`)."""

    __slots__ = ("_plain_key", "_plain_properties", "core_topic", "queue_id", "refusal", "topic")

    def __init__(self, topic: str, refusal: Refusal | None, core_topic: str = "", queue_id: int = 0) -> None:
        self.topic = topic
        self.refusal = refusal
        self.core_topic = core_topic
        self.queue_id = queue_id
        # The core properties of a message with nothing but topic, QoS, retain flag and client (all of 3.1.1's):
        # the same for the run of one topic, so they are checked and built once, for the (retain, QoS) last seen.
        self._plain_properties: dict[str, str] = {}
        self._plain_key: tuple[bool, int] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.core_topic, self.queue_id

    def messages(self, event: Published, client_id: str, now: int) -> tuple[MqttMessage, Message]:
        """The MQTT message of a PUBLISH of this topic, and the core message that stores it."""
        qos = event.qos
        if event.plain:  # a 3.1.1 PUBLISH read without a packet object: these fields are all it has
            message = MqttMessage(self.topic, event.payload, qos, event.retain, client_id)
            plain = True
        else:
            message = MqttMessage.from_publish(event.packet, self.topic, client_id, now)
            plain = message.is_plain()
        if plain and self._plain_key == (message.retain, qos):
            properties = self._plain_properties.copy()
            return message, Message(self.core_topic, message.payload, self.queue_id, properties, born_timestamp=now)
        properties, body = message.core_fields()
        if plain and PROPERTY_HEADER not in properties:
            self._plain_properties, self._plain_key = properties.copy(), (message.retain, qos)
        return message, Message(self.core_topic, body, self.queue_id, properties, born_timestamp=now)


class StoreRun:
    """Messages for one store call: one core topic and queue. A retained message goes alone (its key is None): its
    send is what makes it the topic's retained message, and one run is one store call."""

    __slots__ = ("entries", "key", "messages", "size")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.entries: list[RunEntry] = []
        self.key: tuple[str, int] | None = None
        self.size = 0

    def __bool__(self) -> bool:
        return bool(self.messages)

    def takes(self, key: tuple[str, int] | None, size: int) -> bool:
        """Whether a message for `key` (None: retained) of `size` payload bytes may join this run."""
        if not self.messages:
            return True
        return (
            key is not None
            and key == self.key
            and len(self.messages) < PUBLISH_BATCH
            and self.size + size <= PUBLISH_BATCH_BYTES
        )

    def add(self, key: tuple[str, int] | None, core: Message, entry: RunEntry) -> None:
        self.key = key
        self.messages.append(core)
        self.entries.append(entry)
        self.size += len(entry[0].payload)
