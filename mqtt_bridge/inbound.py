"""Inbound PUBLISHes: an MQTT message becomes a core message (topic_mapping.py, message_mapping.py) and is
acknowledged once stored, or refused as publish_refusal.py says. QoS 0/1 runs of one connection go to the core in
batches; QoS 2 follows the session rules' duplicate suppression (session_rules.py)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import mqtt5

from core import (
    CoreError,
    Message,
    MessageType,
    SendStatus,
)
from mqtt_bridge.acl_file import Access
from mqtt_bridge.errors import StoreNotDurableError
from mqtt_bridge.gateway_state import (
    PUBLISH_BATCH,
    PUBLISH_BATCH_BYTES,
    GatewayState,
    log,
    now_ms,
)
from mqtt_bridge.link import Link
from mqtt_bridge.message_mapping import (
    PROPERTY_HEADER,
    PROPERTY_PACKET_ID,
    MqttMessage,
)
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
from mqtt_bridge.state_records import (
    payload_digest,
    qos2_key,
)
from mqtt_bridge.topic import first_level, is_sys_topic, validate_topic_name
from mqtt_bridge.topic_mapping import core_topic_of_level

if TYPE_CHECKING:
    from mqtt_bridge.protocol import Published


class InboundPublishing(GatewayState):
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
        self.messages.put(sent.commit_log_offset, message, core_topic)
        self.stats["published"] += 1
        if sent.status is not SendStatus.SEND_OK:
            # Written, but not known to be on disk (SYNC_FLUSH timed out): no acknowledgement may claim it is.
            raise StoreNotDurableError(not_confirmed(sent.status).reason)

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

    def _refuse(self, link: Link, topic: str, qos: int, packet_id: int, refusal: Refusal) -> bool:
        """Answer a PUBLISH that was not stored (publish_refusal.py); False if the connection was closed."""
        self.stats["refused"] += 1
        code = refusal.reason_code
        self.refusals[code] = self.refusals.get(code, 0) + 1
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
            self.inbound_qos2.entries.get(qos2_key(session.client_id, str(packet_id))),
        ):
            conn.acknowledge_publish(packet_id, 2)  # a resend of one we stored: PUBREC again, store nothing
            return
        if is_sys_topic(topic):
            self._refuse(link, topic, qos, packet_id, SYS_DENIED)
            return
        if not self.allowed(link, topic, Access.WRITE):
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

    async def publish_run(self, link: Link, events: Sequence[Published]) -> None:
        """A run of inbound QoS 0 and 1 PUBLISHes of one connection, in the order received: each run of
        consecutive messages for the same core topic and queue goes to the core in one `Broker.send_batch` (the
        send hooks still see every message), and the QoS 1 ones are acknowledged once that returned, in the order
        received ([MQTT-4.6.0-2]; a refusal's answer waits for the stored run before it). A refused message is
        answered as publish_refusal.py says; when that closes the connection, nothing after it is handled."""
        assert link.session is not None
        client_id = link.client_id
        now = now_ms()
        broker = self.broker
        acl = self.acl
        run: list[Message] = []
        mqtt_run: list[tuple[MqttMessage, bytes | None, int | None]] = []
        run_key: tuple[str, int] | None = None
        run_bytes = 0
        # What depends on the topic alone is found once per run of one topic (a device publishes to few).
        last_topic: str | None = None
        allowed = True
        denied = ACL_DENIED
        topic_error: Exception | None = None
        core_topic = ""
        queue_id = 0
        # The core properties of a message with nothing but topic, QoS, retain flag and client (all of 3.1.1's):
        # the same for the run of one topic, so they are checked and built once.
        plain_properties: dict[str, str] = {}
        properties_key: tuple[str, bool, int] | None = None
        for event in events:
            topic = event.topic
            if topic != last_topic:
                last_topic = topic
                denied = SYS_DENIED if is_sys_topic(topic) else ACL_DENIED
                allowed = denied is ACL_DENIED and (acl is None or self.allowed(link, topic, Access.WRITE))
                try:
                    core_topic = self.core_topic(topic)
                    queue_id = zlib.crc32(topic.encode()) % len(broker.write_queues(core_topic))
                    topic_error = None
                except (CoreError, ValueError) as exc:
                    topic_error = exc
            qos = event.qos
            packet_id = event.packet_id
            refusal = denied if not allowed else refusal_of(topic_error) if topic_error is not None else None
            if refusal is None:
                if event.plain:  # a 3.1.1 PUBLISH read without a packet object: these fields are all it has
                    message = MqttMessage(topic, event.payload, qos, event.retain, client_id)
                    plain = True
                else:
                    message = MqttMessage.from_publish(event.packet, topic, client_id, now)
                    plain = message.is_plain()
                if plain and properties_key == (topic, message.retain, qos):
                    core = Message(core_topic, message.payload, queue_id, plain_properties.copy(), born_timestamp=now)
                else:
                    properties, body = message.core_fields()
                    if plain and PROPERTY_HEADER not in properties:
                        plain_properties, properties_key = properties.copy(), (topic, message.retain, qos)
                    core = Message(core_topic, body, queue_id, properties, born_timestamp=now)
            else:
                if qos and run:
                    # The answer goes after those of the messages before it, which are stored first.
                    if not await self._store_run(link, run, mqtt_run):
                        return
                    run, mqtt_run, run_bytes = [], [], 0
                if not self._refuse(link, topic, qos, packet_id, refusal):
                    return
                continue
            # A retained message goes alone: its send is what makes it the topic's retained message, and one run
            # is one store call.
            key = (core_topic, queue_id) if not message.retain else None
            size = len(message.payload)
            if run and (
                key is None or key != run_key or len(run) >= PUBLISH_BATCH or run_bytes + size > PUBLISH_BATCH_BYTES
            ):
                if not await self._store_run(link, run, mqtt_run):
                    return
                run, mqtt_run, run_bytes = [], [], 0
            run_key = key
            run.append(core)
            mqtt_run.append((message, event.wire, packet_id if qos else None))
            run_bytes += size
        if run:
            await self._store_run(link, run, mqtt_run)

    async def _store_run(
        self, link: Link, run: list[Message], mqtt_run: list[tuple[MqttMessage, bytes | None, int | None]]
    ) -> bool:
        """Store messages of one core topic and queue, then acknowledge its QoS 1 ones; if the core refused them or
        could not confirm them, answer each as publish_refusal.py says. False if the connection was closed."""
        try:
            sent = await self.broker.send_batch(run) if len(run) > 1 else [await self.broker.send(run[0])]
        except (CoreError, ValueError) as exc:
            return self._refuse_run(link, mqtt_run, refusal_of(exc))
        self.messages.put_many([result.commit_log_offset for result in sent], mqtt_run, run[0].topic)
        self.stats["published"] += len(run)
        unconfirmed = next((result.status for result in sent if result.status is not SendStatus.SEND_OK), None)
        if unconfirmed is not None:
            # Written, but not known to be on disk (SYNC_FLUSH timed out): no PUBACK may claim it is (a 3.1.1 client
            # sends them again after reconnecting, and the log may then hold them twice: at least once).
            return self._refuse_run(link, mqtt_run, not_confirmed(unconfirmed))
        conn = link.conn
        for _, _, packet_id in mqtt_run:
            if packet_id is not None:
                conn.acknowledge_publish(packet_id, 1)
        return True

    def _refuse_run(
        self, link: Link, mqtt_run: list[tuple[MqttMessage, bytes | None, int | None]], refusal: Refusal
    ) -> bool:
        for message, _, packet_id in mqtt_run:
            if not self._refuse(link, message.topic, message.qos, packet_id or 0, refusal):
                return False
        return True

    def released(self, link: Link, packet_id: int) -> None:
        """The client's PUBREL: the inbound QoS 2 flow ends with PUBCOMP (0x92 in MQTT 5 if it was not awaited)."""
        key = qos2_key(link.client_id, str(packet_id))
        recorded = key in self.inbound_qos2.entries
        if recorded:
            # In memory only: a crash brings the entry back, which a new publish with DUP clear passes.
            self.inbound_qos2.changed(key, None)
        link.conn.complete(packet_id, self.rules.release(link.client_id, packet_id, recorded))
