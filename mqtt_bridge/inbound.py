"""Inbound PUBLISHes: an MQTT message becomes a core message (topic_mapping.py, message_mapping.py) and is
acknowledged once stored, or refused as publish_refusal.py says. QoS 0/1 runs of one connection go to the core in
batches; QoS 2 follows the session rules' duplicate suppression (session_rules.py), with a
record of each stored QoS 2 publish kept in the core until its PUBREL (sessions/state_records.py).

How a run of QoS 0 and 1 PUBLISHes becomes store calls is worked out without I/O: what depends on a message's
topic alone is found once per run of one topic (`TopicRoute`: its refusal, if any, its core topic and queue, the
core properties of its plain messages), and consecutive messages for the same core topic and queue are gathered
into one batch (`StoreRun`), cut at PUBLISH_BATCH messages or PUBLISH_BATCH_BYTES."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import mqtt5

from core import Broker, CoreError, Message, MessageType, SendStatus, StateTable
from mqtt_bridge.access.access_control import AccessControl
from mqtt_bridge.access.acl_file import Access
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.counters import GatewayCounters
from mqtt_bridge.errors import MqttBridgeError, StoreNotDurableError
from mqtt_bridge.link import Link
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import PROPERTY_HEADER, PROPERTY_PACKET_ID, PROPERTY_RETAIN, MqttMessage, now_ms
from mqtt_bridge.publish_refusal import (
    ACL_DENIED,
    SYS_DENIED,
    UNSPECIFIED_ERROR,
    Answer,
    Refusal,
    TopicNotAccepted,
    answer,
    not_confirmed,
    refusal_of,
)
from mqtt_bridge.sessions.session_rules import SessionRules
from mqtt_bridge.sessions.state_records import INBOUND_QOS2_QUEUE, payload_digest, qos2_change, qos2_key, qos2_value
from mqtt_bridge.topics.topic import first_level, is_sys_topic, validate_topic_name
from mqtt_bridge.topics.topic_mapping import core_topic_of_level
from mqtt_bridge.wire.protocol import Published

log = logging.getLogger("mqtt_bridge.gateway")

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


class InboundPublishing:
    def __init__(
        self,
        broker: Broker,
        config: MqttConfig,
        state_dir: Path,
        access: AccessControl,
        rules: SessionRules,
        cache: MessageCache,
        counters: GatewayCounters,
    ) -> None:
        self.broker = broker
        self.config = config
        self.access = access
        self.rules = rules
        self.cache = cache
        self.counters = counters
        # Inbound QoS 2 publishes stored and not released, by `qos2_key`: a digest of topic and payload.
        self.qos2: StateTable[str] = StateTable(
            broker, INBOUND_QOS2_QUEUE, Path(state_dir) / "qos2.json", qos2_change, lambda v: v, qos2_value
        )
        # Core topics by MQTT first level, once checked (and created).
        self._known_topics: dict[str, str] = {}
        # On a cluster: a retained message stored here is copied to the other groups before it is acknowledged
        # (the gateway's Membership.copy_retained), so a subscriber on any node gets it.
        self.copy_retained: Callable[[Message], Awaitable[None]] | None = None

    def core_topic(self, mqtt_topic: str) -> str:
        """The core topic that stores `mqtt_topic` (topic_mapping.py), created on first use; raises
        TopicNotAccepted when the configuration does not let it be used."""
        level = first_level(mqtt_topic)
        name = self._known_topics.get(level)
        if name is not None:
            return name
        if self.config.topics and level not in self.config.topics:
            raise TopicNotAccepted(f"first level {level!r} is not one of the configured MQTT topics ([mqtt] topics)")
        name = core_topic_of_level(level)
        if not self.broker.has_topic(name):
            if not self.config.auto_create_topics:
                raise TopicNotAccepted(
                    f"core topic {name!r} (of first level {level!r}) does not exist and MQTT topics are not "
                    "created on the fly ([mqtt] auto_create_topics = false)"
                )
            self.broker.create_topic(name, self.config.queue_nums, MessageType.NORMAL)
        self._known_topics[level] = name
        return name

    async def store(self, message: MqttMessage, qos2_packet_id: int | None = None) -> None:
        """Store an MQTT message in the core (durable under the flush mode when this returns).

        Raises what refusal_of classifies: TopicNotAccepted, a core or store error, or StoreNotDurableError for a
        write the disk did not confirm in time. `qos2_packet_id`: the packet id of a persistent session's QoS 2
        publish, recorded with the message so that a resend after a broker crash is recognised."""
        core_topic = self.core_topic(message.topic)
        queues = self.broker.write_queues(core_topic)
        queue_id = zlib.crc32(message.topic.encode()) % len(queues)
        core = message.to_core(core_topic, queue_id)
        if qos2_packet_id is not None:
            core.properties[PROPERTY_PACKET_ID] = str(qos2_packet_id)
        sent = await self.broker.send(core)
        self.cache.put(sent.commit_log_offset, message, core_topic)
        self.counters.published += 1
        if sent.status is not SendStatus.SEND_OK:
            # Written, but not known to be on disk (SYNC_FLUSH timed out): no acknowledgement may claim it is.
            raise StoreNotDurableError(not_confirmed(sent.status).reason)
        if message.retain and self.copy_retained is not None:
            await self.copy_retained(core)

    async def publish_from_server(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        content_type: str | None = None,
        user_properties: list[tuple[str, str]] | None = None,
    ) -> None:
        """Store a message that mqgate itself publishes (an EventBridge rule's MQTT target) as a client's PUBLISH
        would be stored: subscribers get it at up to `qos`, and `retain` makes it the topic's retained message (an
        empty payload clears it). It has no client and passes no ACL (the operator wrote the rule).

        Raises TopicError or TopicNotAccepted (ValueError) for a topic the gateway does not take, the core's error
        for a message it refuses, StoreNotDurableError when the disk did not confirm it in time."""
        validate_topic_name(topic)
        message = MqttMessage(
            topic, payload, qos, retain, content_type=content_type, user_properties=user_properties or None
        )
        await self.store(message)

    async def publish_will(self, client_id: str, will: mqtt5.Will, username: str | None) -> None:
        if is_sys_topic(will.topic):
            log.info(
                "will of %r to %r not published: $SYS topics are published by the server only", client_id, will.topic
            )
            return
        if not self.access.client_allowed(username, client_id, will.topic, Access.WRITE):
            log.info("will of %r to %r refused by the ACL", client_id, will.topic)
            return
        try:
            await self.store(MqttMessage.from_will(will, client_id, now_ms()))
        except (CoreError, MqttBridgeError, ValueError) as exc:
            log.error("will of %r to %r not published: %s", client_id, will.topic, exc)

    def _refuse(self, link: Link, topic: str, qos: int, packet_id: int, refusal: Refusal) -> bool:
        """Answer a PUBLISH that was not stored (publish_refusal.py); False if the connection was closed."""
        self.counters.refusal(refusal.reason_code)
        conn = link.conn
        action = answer(conn.version, qos, refusal)
        if refusal.by_acl:
            log.info("client %r: PUBLISH to %r refused: %s", link.client_id, topic, refusal.reason)
        else:
            log.warning("client %r: QoS %d PUBLISH to %r not stored (%s): %s", link.client_id, qos, topic,
                        action.value, refusal.reason)  # fmt: skip
        if action is Answer.ACKNOWLEDGE_REFUSAL:
            conn.acknowledge_publish(packet_id, qos, refusal.reason_code, refusal.reason)
        elif action is Answer.ACKNOWLEDGE_AND_DROP:
            conn.acknowledge_publish(packet_id, qos)
        elif action is Answer.CLOSE:
            link.close(mqtt5.DisconnectReasonCode.UNSPECIFIED_ERROR)
            return False
        return True

    async def publish(self, link: Link, packet: mqtt5.PublishPacket, topic: str) -> None:
        """An inbound PUBLISH: store it (unless refused or a QoS 2 duplicate), then acknowledge."""
        conn = link.conn
        session = link.session
        assert session is not None
        qos = int(packet.qos)
        packet_id = packet.packet_id or 0
        if qos == 2 and self.rules.inbound_qos2(
            session.client_id,
            packet_id,
            packet.duplicate,
            lambda: payload_digest(topic, packet.payload),
            self.qos2.entries.get(qos2_key(session.client_id, str(packet_id))),
        ):
            conn.acknowledge_publish(packet_id, 2)  # a resend of one we stored: PUBREC again, store nothing
            return
        if is_sys_topic(topic):
            self._refuse(link, topic, qos, packet_id, SYS_DENIED)
            return
        if not self.access.allowed(link, topic, Access.WRITE):
            self._refuse(link, topic, qos, packet_id, ACL_DENIED)
            return
        try:
            message = MqttMessage.from_publish(packet, topic, link.client_id, now_ms())
            await self.store(message, packet_id if qos == 2 and session.persistent else None)
        except StoreNotDurableError as exc:
            self._refuse(link, topic, qos, packet_id, Refusal(UNSPECIFIED_ERROR, str(exc)))
            return
        except (CoreError, ValueError) as exc:
            self._refuse(link, topic, qos, packet_id, refusal_of(exc))
            return
        if qos == 2:
            self.rules.inbound_stored(session.client_id, packet_id)
        if qos:
            conn.acknowledge_publish(packet_id, qos)

    def _route(self, link: Link, topic: str) -> TopicRoute:
        """Where a client's messages of `topic` go, or the refusal they all get."""
        if is_sys_topic(topic):
            return TopicRoute(topic, SYS_DENIED)
        if self.access.acl is not None and not self.access.allowed(link, topic, Access.WRITE):
            return TopicRoute(topic, ACL_DENIED)
        try:
            core_topic = self.core_topic(topic)
            queue_id = zlib.crc32(topic.encode()) % len(self.broker.write_queues(core_topic))
        except (CoreError, ValueError) as exc:
            return TopicRoute(topic, refusal_of(exc))
        return TopicRoute(topic, None, core_topic, queue_id)

    async def publish_run(self, link: Link, events: Sequence[Published]) -> None:
        """A run of inbound QoS 0 and 1 PUBLISHes of one connection, in the order received: each run of
        consecutive messages for the same core topic and queue goes to the core in one `Broker.send_batch` (the
        send hooks still see every message), and the QoS 1 ones are acknowledged once that returned, in the order
        received ([MQTT-4.6.0-2]; a refusal's answer waits for the stored run before it). A refused message is
        answered as publish_refusal.py says; when that closes the connection, nothing after it is handled."""
        assert link.session is not None
        client_id = link.client_id
        now = now_ms()
        route: TopicRoute | None = None  # a device publishes to few topics: routed once per run of one
        run = StoreRun()
        for event in events:
            topic = event.topic
            if route is None or route.topic != topic:
                route = self._route(link, topic)
            qos = event.qos
            refusal = route.refusal
            if refusal is not None:
                if qos and run:
                    # The answer goes after those of the messages before it, which are stored first.
                    if not await self._store_run(link, run):
                        return
                    run = StoreRun()
                if not self._refuse(link, topic, qos, event.packet_id, refusal):
                    return
                continue
            message, core = route.messages(event, client_id, now)
            key = route.key if not message.retain else None
            if not run.takes(key, len(message.payload)):
                if not await self._store_run(link, run):
                    return
                run = StoreRun()
            run.add(key, core, (message, event.wire, event.packet_id if qos else None))
        if run:
            await self._store_run(link, run)

    async def _store_run(self, link: Link, run: StoreRun) -> bool:
        """Store messages of one core topic and queue, then acknowledge its QoS 1 ones; if the core refused them or
        could not confirm them, answer each as publish_refusal.py says. False if the connection was closed."""
        messages = run.messages
        broker = self.broker
        try:
            sent = await broker.send_batch(messages) if len(messages) > 1 else [await broker.send(messages[0])]
        except (CoreError, ValueError) as exc:
            return self._refuse_run(link, run, refusal_of(exc))
        self.cache.put_many([result.commit_log_offset for result in sent], run.entries, messages[0].topic)
        self.counters.published += len(messages)
        unconfirmed = next((result.status for result in sent if result.status is not SendStatus.SEND_OK), None)
        if unconfirmed is not None:
            # Written, but not known to be on disk (SYNC_FLUSH timed out): no PUBACK may claim it is (a 3.1.1 client
            # sends them again after reconnecting, and the log may then hold them twice: at least once).
            return self._refuse_run(link, run, not_confirmed(unconfirmed))
        if self.copy_retained is not None and messages[0].properties.get(PROPERTY_RETAIN) == "1":
            await self.copy_retained(messages[0])  # a retained message goes alone in its run
        conn = link.conn
        for _, _, packet_id in run.entries:
            if packet_id is not None:
                conn.acknowledge_publish(packet_id, 1)
        return True

    def _refuse_run(self, link: Link, run: StoreRun, refusal: Refusal) -> bool:
        for message, _, packet_id in run.entries:
            if not self._refuse(link, message.topic, message.qos, packet_id or 0, refusal):
                return False
        return True

    def qos2_stored(self, message: MqttMessage, packet_id: str) -> None:
        """A persistent session's QoS 2 publish reached the log: its packet id is recorded until the PUBREL."""
        self.qos2.changed(qos2_key(message.client_id or "", packet_id), payload_digest(message.topic, message.payload))

    def released(self, link: Link, packet_id: int) -> None:
        """The client's PUBREL: the inbound QoS 2 flow ends with PUBCOMP (0x92 in MQTT 5 if it was not awaited)."""
        key = qos2_key(link.client_id, str(packet_id))
        recorded = key in self.qos2.entries
        if recorded:
            # In memory only: a crash brings the entry back, which a new publish with DUP clear passes.
            self.qos2.changed(key, None)
        link.conn.complete(packet_id, self.rules.release(link.client_id, packet_id, recorded))

    def forget_client(self, client_id: str) -> None:
        """The client's session ended: its QoS 2 records go."""
        prefix = qos2_key(client_id, "")
        for key in [key for key in self.qos2.entries if key.startswith(prefix)]:
            self.qos2.changed(key, None)
