"""The gateway between MQTT clients and the broker core: sessions, publishes, subscriptions, retained and will
messages. Connections (listener.py) hand it protocol events; it answers through their `MqttConnection`.

Publishing: a PUBLISH becomes a core message in the topic named by its first level (`sensors/dev1/temp` ->
`sensors`), queue chosen by a hash of the full topic (one topic's messages stay in order), full topic and MQTT
attributes in properties (message_mapping.py). QoS 1/2 are acknowledged after `Broker.send` returns, i.e. once
the message is durable under the store's flush mode. A send hook, run for every producer's messages, matches
the MQTT topic against the subscription trie and names the light queue of every matching filter, so the one
record gets an entry per filter (and one in the retained queue if it is retained).

Delivering: see session.py. Each connected session has one task that reads its queues, merges them, sends what
its window allows and waits for acknowledgements or arrivals (Broker.add_arrival_listener).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
import typing
import zlib
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mqtt5

from core import (
    LIGHT_QUEUE_PREFIX,
    Broker,
    CoreError,
    Message,
    MessageType,
    PullStatus,
    SendResult,
    SendStatus,
    StateTable,
    StoredMessage,
)
from mqtt_bridge.acl_file import Access, AclFile
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.errors import MqttBridgeError, ProtocolError, StoreNotDurableError
from mqtt_bridge.link import Link
from mqtt_bridge.message_cache import CachedMessage, MessageCache
from mqtt_bridge.message_mapping import (
    PROPERTY_HEADER,
    PROPERTY_PACKET_ID,
    PROPERTY_RETAIN,
    PROPERTY_TOPIC,
    MqttMessage,
    mqtt_client_of,
    mqtt_view,
)
from mqtt_bridge.password_file import PasswordFile
from mqtt_bridge.publish_refusal import (
    ACL_DENIED,
    UNSPECIFIED_ERROR,
    Answer,
    Refusal,
    TopicNotAccepted,
    answer,
    not_confirmed,
    refusal_of,
)
from mqtt_bridge.session import Outgoing, Session, Subscription, session_group
from mqtt_bridge.session_rules import (
    Accept,
    Action,
    Attach,
    CancelTimer,
    CloseTakenOver,
    CommitPositions,
    Detach,
    EndSession,
    PublishWill,
    Refuse,
    Resend,
    SessionRules,
    StartDelivery,
    StartTimer,
    StoreSession,
    Timer,
)
from mqtt_bridge.shared_group import TAKE_BATCH, SharedGroup
from mqtt_bridge.topic import TopicError, first_level, parse_subscription
from mqtt_bridge.topic_mapping import core_topic_of_level
from mqtt_bridge.topic_trie import SubscriptionTrie, TopicTree

if TYPE_CHECKING:
    from mqtt_bridge.protocol import Published

log = logging.getLogger(__name__)

RETAINED_QUEUE = f"{LIGHT_QUEUE_PREFIX}MQTT_RETAINED"
# QoS 2 publishes of persistent sessions, so that a resend after a broker crash is recognised (not stored twice).
INBOUND_QOS2_QUEUE = f"{LIGHT_QUEUE_PREFIX}MQTT_QOS2_INBOUND"
SESSIONS_TOPIC = "MQTT_SESSIONS"
PROPERTY_SESSION = "MQTT_SESSION"
# Messages read from one light queue per round of a session's delivery loop.
READ_BATCH = 64
# Inbound QoS 0 PUBLISHes of one connection stored with one store call, at most: a run of a pipelining publisher
# (a read of 64 KiB holds about 800 small ones) is cut into batches of this many messages or payload bytes, well
# under the core's batch limit of 4 MiB (core.broker.MAX_BATCH_BYTES) whatever the packet size.
PUBLISH_BATCH = 256
PUBLISH_BATCH_BYTES = 1024 * 1024
Reason = mqtt5.ConnAckReasonCode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class MqttGateway:
    def __init__(self, broker: Broker, config: MqttConfig, state_dir: Path) -> None:
        self.broker = broker
        self.config = config
        self.state_dir = Path(state_dir)
        self.passwords = PasswordFile.load(config.password_file) if config.password_file else None
        self.acl = AclFile.load(config.acl_file) if config.acl_file else None
        # Filters by light queue: the hook names the queues whose filters match a topic.
        self.trie: SubscriptionTrie[str, None] = SubscriptionTrie()
        # Who uses each light queue (connected or persistent sessions): the queue goes when the last one does.
        self.queue_users: dict[str, set[str]] = {}
        # The sessions and the rules they follow (session_rules.py); what follows here is how they reach the core.
        self.rules = SessionRules(config.session_expiry_max_s)
        self.sessions = self.rules.sessions
        self.links: dict[str, Link] = {}
        self.readers: dict[str, set[str]] = {}  # light queue -> connected client ids reading it
        self.retained_topics = TopicTree()
        self.retained: StateTable[MqttMessage] = StateTable(
            broker, RETAINED_QUEUE, self.state_dir / "retained.json", _retained_change, _retained_json, _retained_value
        )
        self.stored_sessions: StateTable[dict[str, object]] = StateTable(
            broker, SESSIONS_TOPIC, self.state_dir / "sessions.json", _session_change, lambda v: v, _session_value
        )
        # Inbound QoS 2 publishes stored and not released, by `qos2_key`: a digest of topic and payload.
        self.inbound_qos2: StateTable[str] = StateTable(
            broker, INBOUND_QOS2_QUEUE, self.state_dir / "qos2.json", _qos2_change, lambda v: v, _qos2_value
        )
        # Shared subscriptions by light queue.
        self.shared: dict[str, SharedGroup] = {}
        self._timers: dict[tuple[Timer, str], asyncio.TimerHandle] = {}
        # Core topics by MQTT first level, once checked (and created).
        self._known_topics: dict[str, str] = {}
        # Recent messages decoded, by commit-log offset: what the gateway stores, its sessions read without the log.
        self.messages = MessageCache(broker, max_bytes=config.message_cache_mb * 1024 * 1024)
        self.connection_count = 0
        self.stats = {"published": 0, "delivered": 0, "dropped": 0, "refused": 0}

    # --- life cycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.broker.topics.get(SESSIONS_TOPIC) is None:
            self.broker.create_topic(SESSIONS_TOPIC, 1)
        await self.retained.load()
        for topic in self.retained.entries:
            self.retained_topics.add(topic)
        await self.stored_sessions.load()
        await self.inbound_qos2.load()
        for client_id, data in self.stored_sessions.entries.items():
            session = Session.from_json(client_id, data)
            restored = self.rules.restore(session, now_ms())
            group = session_group(client_id)
            for sub in session.subscriptions.values():
                if sub.share_group is not None:
                    self._use_queue(sub, client_id, session.read_offsets.pop(sub.queue, -1))
                    continue
                self._use_queue(sub, client_id)
                # The later of the offset in the session record and the consumer offset (written every few s).
                committed = max(self.broker.query_offset(group, sub.queue, 0), session.read_offsets.get(sub.queue, -1))
                if committed < 0:
                    committed = self.broker.max_offset(sub.queue, 0)
                session.read_offsets[sub.queue] = max(committed, self.broker.min_offset(sub.queue, 0))
            self._execute(restored)
        self.broker.add_send_hook(self._on_send)
        self.broker.add_stored_listener(self._on_stored)
        self.broker.add_arrival_listener(self._on_arrival)
        self.retained.start()
        self.stored_sessions.start()
        self.inbound_qos2.start()
        log.info(
            "MQTT gateway: %d retained messages, %d stored sessions", len(self.retained.entries), len(self.sessions)
        )

    async def close(self) -> None:
        for link in list(self.links.values()):
            link.close(mqtt5.DisconnectReasonCode.SERVER_SHUTTING_DOWN)
        for handle in self._timers.values():
            handle.cancel()
        self._commit_all()
        await self.retained.close()
        await self.stored_sessions.close()
        await self.inbound_qos2.close()

    def _commit_all(self) -> None:
        for session in self.sessions.values():
            if session.persistent:
                self._commit(session)
        for group in self.shared.values():
            self._commit_group(group)

    def _commit_group(self, group: SharedGroup) -> None:
        self.broker.commit_offset(group.consumer_group, group.queue, 0, group.committed())

    def _commit(self, session: Session, queues: Iterable[str] | None = None) -> None:
        """Commit the session's positions in `queues` (default: all it reads) as core consumer offsets."""
        group = session_group(session.client_id)
        for queue in session.own_queues() if queues is None else queues:
            if queue in session.read_offsets:
                self.broker.commit_offset(group, queue, 0, session.committed(queue))

    # --- every producer's MQTT message passes here: before it is stored (its light queues), after (state) -------

    def _on_send(self, message: Message) -> list[str] | None:
        """The light queues a message goes to as well: those of the matching filters, the retained queue, the QoS 2
        record. Nothing changes here: the store may still refuse the message (state follows in `_on_stored`)."""
        properties = message.properties
        topic = properties.get(PROPERTY_TOPIC)
        if topic is None:
            if PROPERTY_HEADER not in properties:
                return None
            view = mqtt_view(properties, bytes(message.body))  # text the properties could not carry
            if view is None:
                return None
            topic = view[0]
        queues = [queue for _, queue, _ in self.trie.match(topic)]
        if PROPERTY_PACKET_ID in properties:
            queues.append(INBOUND_QOS2_QUEUE)
        if properties.get(PROPERTY_RETAIN) == "1":
            queues.append(RETAINED_QUEUE)
        return queues

    def _on_stored(self, message: Message, result: SendResult) -> None:
        """A message is in the log (whatever its flush status: recovery would rebuild the same state from it): a
        retained one becomes its topic's retained message, a QoS 2 one's packet id is recorded. Never before."""
        properties = message.properties
        retain = properties.get(PROPERTY_RETAIN) == "1"
        packet_id = properties.get(PROPERTY_PACKET_ID)
        if not retain and packet_id is None:
            return
        mqtt = MqttMessage.from_core(message)
        if mqtt is None:
            return
        if packet_id is not None:
            digest = payload_digest(mqtt.topic, mqtt.payload)
            self.inbound_qos2.changed(qos2_key(mqtt.client_id or "", packet_id), digest)
        if retain:
            if mqtt.payload:
                self.retained.changed(mqtt.topic, mqtt)
                self.retained_topics.add(mqtt.topic)
            else:  # an empty retained payload clears the topic's retained message
                self.retained.changed(mqtt.topic, None)
                self.retained_topics.discard(mqtt.topic)

    def _on_arrival(self, queues: set[tuple[str, int]]) -> None:
        readers = self.readers
        links = self.links
        shared = self.shared
        for queue, _ in queues:
            group = shared.get(queue)
            if group is not None:
                self._wake_members(group)
                continue
            for client_id in readers.get(queue, ()):
                link = links.get(client_id)
                if link is not None:
                    link.wake()

    # --- connecting --------------------------------------------------------------------------------------------

    def authenticate(self, packet: mqtt5.ConnectPacket) -> Reason:
        if packet.username is None:
            if not self.config.allow_anonymous:
                return Reason.NOT_AUTHORIZED
            return Reason.SUCCESS
        if self.passwords is not None and not self.passwords.check(packet.username, packet.password):
            return Reason.BAD_USER_NAME_OR_PASSWORD
        if self.passwords is None and not self.config.allow_anonymous:
            return Reason.NOT_AUTHORIZED
        return Reason.SUCCESS

    def allowed(self, link: Link, topic: str, access: Access) -> bool:
        if self.acl is None:
            return True
        return self.acl.check(username=link.username, client_id=link.client_id, topic=topic, access=access)

    def connect(self, link: Link, packet: mqtt5.ConnectPacket, version: int) -> None:
        """A CONNECT: the client id and credentials are checked here, the session rules decide the rest."""
        client_id = packet.client_id
        assigned = False
        if not client_id:
            if version == 4 and not packet.clean_start:
                self._execute(self.rules.refuse(link, Reason.CLIENT_ID_NOT_VALID))
                return
            client_id, assigned = f"mqgate-{secrets.token_hex(8)}", True
        reason = self.authenticate(packet)
        if reason is not Reason.SUCCESS:
            log.info("client %r refused: %s", client_id, reason.name)
            self._execute(self.rules.refuse(link, reason))
            return
        link.client_id = client_id
        link.username = packet.username
        actions = self.rules.connect(
            link,
            client_id,
            version=version,
            clean_start=packet.clean_start,
            session_expiry=packet.session_expiry_interval,
            will=packet.will,
            username=packet.username,
            assigned=assigned,
            now_ms=now_ms(),
        )
        self._execute(actions)

    def disconnect_received(self, link: Link, packet: mqtt5.DisconnectPacket) -> None:
        """The client's DISCONNECT, before its connection ends (may change the session expiry; raises
        ProtocolError for a change the specification forbids)."""
        if link.session is not None:
            self.rules.disconnect_received(link.client_id, packet.session_expiry_interval)

    def disconnected(self, link: Link, publish_will: bool) -> None:
        """The connection is gone (DISCONNECT, error, keepalive timeout; a takeover is the rules' own)."""
        self._execute(self.rules.connection_lost(link, link.client_id, publish_will, now_ms()))

    # --- carrying out the session rules' actions ----------------------------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            kind = type(action)
            if kind is Attach:
                self._attach(typing.cast(Attach, action))
            elif kind is Detach:
                self._detach(typing.cast(Detach, action))
            elif kind is Accept:
                self._accept(typing.cast(Accept, action))
            elif kind is Refuse:
                refuse = typing.cast(Refuse, action)
                typing.cast(Link, refuse.connection).conn.refuse(refuse.reason)
            elif kind is CloseTakenOver:
                old = typing.cast(Link, typing.cast(CloseTakenOver, action).connection)
                old.taken_over = True
                old.close(mqtt5.DisconnectReasonCode.SESSION_TAKEN_OVER)
            elif kind is Resend:
                self._resend(typing.cast(Resend, action))
            elif kind is StartDelivery:
                typing.cast(Link, typing.cast(StartDelivery, action).connection).start_delivery()
            elif kind is CommitPositions:
                self._commit(typing.cast(CommitPositions, action).session)
            elif kind is StoreSession:
                self._store_session(typing.cast(StoreSession, action).session)
            elif kind is EndSession:
                self._end_session(typing.cast(EndSession, action).session)
            elif kind is PublishWill:
                will = typing.cast(PublishWill, action)
                self._spawn(self._publish_will(will.client_id, will.will, will.username))
            elif kind is StartTimer:
                start = typing.cast(StartTimer, action)
                self._cancel_timer(start.timer, start.client_id)
                self._timers[(start.timer, start.client_id)] = asyncio.get_running_loop().call_later(
                    start.delay_s, self._timer_fired, start.timer, start.client_id
                )
            elif kind is CancelTimer:
                cancel = typing.cast(CancelTimer, action)
                self._cancel_timer(cancel.timer, cancel.client_id)
            else:
                raise AssertionError(f"unknown session action {action!r}")

    def _attach(self, action: Attach) -> None:
        link = typing.cast(Link, action.connection)
        session = action.session
        link.session = session
        self.links[session.client_id] = link
        for queue in session.queues():
            self.readers.setdefault(queue, set()).add(session.client_id)

    def _detach(self, action: Detach) -> None:
        link = typing.cast(Link, action.connection)
        session = action.session
        if self.links.get(session.client_id) is link:
            del self.links[session.client_id]
        link.stop_delivery()
        for queue in session.queues():
            readers = self.readers.get(queue)
            if readers is not None:
                readers.discard(session.client_id)
                if not readers:
                    del self.readers[queue]
        self._return_shared(session)

    def _accept(self, action: Accept) -> None:
        properties: dict[str, object] = {}
        if action.assigned_client_id is not None:
            properties["assigned_client_id"] = action.assigned_client_id
        if action.session_expiry is not None:
            properties["session_expiry_interval"] = action.session_expiry
        typing.cast(Link, action.connection).conn.accept(action.session_present, **properties)

    def _resend(self, action: Resend) -> None:
        """What was in flight when the last connection went (MQTT 4.4: with DUP, same packet ids)."""
        conn = typing.cast(Link, action.connection).conn
        now = now_ms()
        for packet_id, outgoing in sorted(action.session.inflight.items()):
            if outgoing.released:
                conn.release(packet_id)
            else:
                conn.publish(
                    outgoing.message.to_publish(
                        outgoing.qos, outgoing.retain, packet_id, now, outgoing.subscription_ids, duplicate=True
                    )
                )

    def _timer_fired(self, timer: Timer, client_id: str) -> None:
        self._timers.pop((timer, client_id), None)
        if timer is Timer.EXPIRY:
            session = self.rules.sessions.get(client_id)
            if session is not None:
                log.info("session %r expired after %d s", client_id, session.expiry_interval)
        self._execute(self.rules.timer_fired(timer, client_id, now_ms()))

    def _cancel_timer(self, timer: Timer, client_id: str) -> None:
        handle = self._timers.pop((timer, client_id), None)
        if handle is not None:
            handle.cancel()

    def _return_shared(self, session: Session) -> None:
        """The connection went: what it holds of shared subscriptions goes to the other members (MQTT 5 4.8.2).

        A QoS 2 publish the client has PUBREC'd is its own (the session resends only the PUBREL); everything else
        it took (in flight, or taken and not sent yet) is handed out again, so a member that never comes back
        holds nothing up."""
        for packet_id, outgoing in list(session.inflight.items()):
            for queue, offset in outgoing.positions:
                group = self.shared.get(queue)
                if group is None:
                    continue
                if outgoing.released:
                    group.settle(offset)
                else:
                    session.acknowledged(packet_id)
        for sub in session.subscriptions.values():
            group = self.shared.get(sub.queue) if sub.share_group is not None else None
            if group is not None and group.give_back_member(session.client_id):
                self._commit_group(group)
                self._wake_members(group)

    def _wake_members(self, group: SharedGroup) -> None:
        """Wake the connected members, a different one first each time: the first to run takes the new messages,
        so a trickle of single messages goes round the members instead of always to the same one."""
        links = [link for member in sorted(group.members) if (link := self.links.get(member)) is not None]
        if not links:
            return
        group.rotation = (group.rotation + 1) % len(links)
        for link in links[group.rotation :] + links[: group.rotation]:
            link.wake()

    def _end_session(self, session: Session) -> None:
        """Delete a session and everything it holds: subscriptions, offsets, unused light queues, the record."""
        client_id = session.client_id
        for sub in list(session.subscriptions.values()):
            self._release_queue(sub, client_id)
        session.subscriptions.clear()
        self.broker.offsets.delete_group(session_group(client_id))
        prefix = qos2_key(client_id, "")
        for key in [key for key in self.inbound_qos2.entries if key.startswith(prefix)]:
            self.inbound_qos2.changed(key, None)
        if client_id in self.stored_sessions.entries:
            self.stored_sessions.changed(client_id, None)
            self._spawn(self._append_session_change(client_id, None))

    def _session_data(self, session: Session) -> dict[str, object]:
        """The session record, with the positions of its shared subscriptions' groups as well: a group's consumer
        offset is written every few seconds, and a group must not start at the queue's end after a crash."""
        data = session.to_json()
        positions = data["positions"]
        assert isinstance(positions, dict)
        for sub in session.subscriptions.values():
            group = self.shared.get(sub.queue) if sub.share_group is not None else None
            if group is not None:
                positions[sub.queue] = group.committed()
        return data

    def _store_session(self, session: Session) -> None:
        data = self._session_data(session)
        self.stored_sessions.changed(session.client_id, data)
        self._spawn(self._append_session_change(session.client_id, data))

    async def _append_session_change(self, client_id: str, data: dict[str, object] | None) -> None:
        body = json.dumps(data).encode() if data is not None else b""
        try:
            await self.broker.send(Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id}))
        except CoreError as exc:
            log.error("session %r: state not stored: %s", client_id, exc)

    async def store_session_now(self, session: Session) -> None:
        """Store a persistent session's subscriptions before SUBACK/UNSUBACK (they must survive a crash)."""
        data = self._session_data(session)
        self.stored_sessions.changed(session.client_id, data)
        await self._append_session_change(session.client_id, data)

    # --- wills -----------------------------------------------------------------------------------------------

    async def _publish_will(self, client_id: str, will: mqtt5.Will, username: str | None) -> None:
        if self.acl is not None and not self.acl.check(
            username=username, client_id=client_id, topic=will.topic, access=Access.WRITE
        ):
            log.info("will of %r to %r refused by the ACL", client_id, will.topic)
            return
        try:
            await self.store(MqttMessage.from_will(will, client_id, now_ms()))
        except (CoreError, MqttBridgeError, ValueError) as exc:
            log.error("will of %r to %r not published: %s", client_id, will.topic, exc)

    # --- publishing ------------------------------------------------------------------------------------------

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
        if self.broker.topics.get(name) is None:
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
        self.messages.put(sent.commit_log_offset, message)
        self.stats["published"] += 1
        if sent.status is not SendStatus.SEND_OK:
            # Written, but not known to be on disk (SYNC_FLUSH timed out): no acknowledgement may claim it is.
            raise StoreNotDurableError(not_confirmed(sent.status).reason)

    def _refuse(self, link: Link, topic: str, qos: int, packet_id: int, refusal: Refusal) -> bool:
        """Answer a PUBLISH that was not stored (publish_refusal.py); False if the connection was closed."""
        self.stats["refused"] += 1
        conn = link.conn
        action = answer(conn.version, qos, refusal)
        if refusal.by_acl:
            log.info("client %r: PUBLISH to %r refused by the ACL", link.client_id, topic)
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
            payload_digest(topic, packet.payload),
            self.inbound_qos2.entries.get(qos2_key(session.client_id, str(packet_id))),
        ):
            conn.acknowledge_publish(packet_id, 2)  # a resend of one we stored: PUBREC again, store nothing
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
                allowed = acl is None or self.allowed(link, topic, Access.WRITE)
                try:
                    core_topic = self.core_topic(topic)
                    queue_id = zlib.crc32(topic.encode()) % len(broker.write_queues(core_topic))
                    topic_error = None
                except (CoreError, ValueError) as exc:
                    topic_error = exc
            qos = int(event.packet.qos)
            packet_id = event.packet.packet_id or 0
            refusal = ACL_DENIED if not allowed else refusal_of(topic_error) if topic_error is not None else None
            if refusal is None:
                message = MqttMessage.from_publish(event.packet, topic, client_id, now)
                if message.is_plain() and properties_key == (topic, message.retain, qos):
                    core = Message(core_topic, message.payload, queue_id, plain_properties.copy(), born_timestamp=now)
                else:
                    properties, body = message.core_fields()
                    if message.is_plain() and PROPERTY_HEADER not in properties:
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
            mqtt_run.append((message, event.wire, event.packet.packet_id if qos else None))
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
        self.messages.put_many(
            (result.commit_log_offset, message, wire) for result, (message, wire, _) in zip(sent, mqtt_run, strict=True)
        )
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

    # --- subscribing -----------------------------------------------------------------------------------------

    def _use_queue(self, sub: Subscription, client_id: str, recorded: int = -1) -> None:
        """`client_id` uses the subscription's light queue. `recorded`: a shared group's position as a session
        record holds it (at start; never ahead of the truth), in case the group's consumer offset was not
        written before a crash."""
        users = self.queue_users.get(sub.queue)
        if users is None:
            users = self.queue_users[sub.queue] = set()
            self.trie.add(sub.topic_filter, sub.queue, None)
        users.add(client_id)
        if sub.share_group is not None:
            group = self.shared.get(sub.queue)
            if group is None:
                group = SharedGroup(sub.queue, sub.share_group, sub.topic_filter, 0)
                # Resume where the group left off (a restart), or start with the messages published from now.
                committed = max(self.broker.query_offset(group.consumer_group, sub.queue, 0), recorded)
                if committed < 0:
                    committed = self.broker.max_offset(sub.queue, 0)
                group.next_offset = max(committed, self.broker.min_offset(sub.queue, 0))
                self.shared[sub.queue] = group
            group.members.add(client_id)

    def _release_queue(self, sub: Subscription, client_id: str) -> None:
        users = self.queue_users.get(sub.queue)
        if users is None:
            return
        users.discard(client_id)
        readers = self.readers.get(sub.queue)
        if readers is not None:
            readers.discard(client_id)
            if not readers:
                del self.readers[sub.queue]
        group = self.shared.get(sub.queue)
        if group is not None:
            group.members.discard(client_id)
            if group.give_back_member(client_id):
                self._wake_members(group)
        if not users:
            del self.queue_users[sub.queue]
            self.trie.remove(sub.topic_filter, sub.queue)
            self.broker.delete_light_queue(sub.queue)
            if group is not None:
                del self.shared[sub.queue]
                self.broker.offsets.delete_group(group.consumer_group)

    async def subscribe(self, link: Link, packet: mqtt5.SubscribePacket) -> None:
        session = link.session
        assert session is not None
        conn = link.conn
        codes: list[mqtt5.SubAckReasonCode] = []
        new_subs: list[tuple[Subscription, bool]] = []
        for option in packet.topic_filters:
            try:
                shared = parse_subscription(option.pattern)
            except TopicError as exc:
                if conn.version == 4:
                    raise ProtocolError(f"SUBSCRIBE: {exc}") from None
                log.info("client %r: %s", link.client_id, exc)
                codes.append(mqtt5.SubAckReasonCode.TOPIC_FILTER_INVALID)
                continue
            if shared.group is not None and option.no_local and conn.version == 5:
                raise ProtocolError("SUBSCRIBE: no-local on a shared subscription (MQTT 5 3.8.3.1)")
            if not self.allowed(link, option.pattern, Access.SUBSCRIBE):
                log.info("client %r: SUBSCRIBE to %r refused by the ACL", link.client_id, option.pattern)
                codes.append(mqtt5.SubAckReasonCode.NOT_AUTHORIZED)
                continue
            sub = Subscription.from_packet(option, shared.group, shared.filter, packet.subscription_id)
            if sub.qos > 2:
                raise ProtocolError(f"SUBSCRIBE: QoS {sub.qos}")
            existed = sub.key in session.subscriptions
            old = session.subscriptions.get(sub.key)
            if old is not None:
                sub.queue = old.queue
            session.subscriptions[sub.key] = sub
            if not existed:
                self._use_queue(sub, session.client_id)
                if sub.share_group is None:
                    session.read_offsets[sub.queue] = self.broker.max_offset(sub.queue, 0)
                self.readers.setdefault(sub.queue, set()).add(session.client_id)
            new_subs.append((sub, existed))
            codes.append(mqtt5.SubAckReasonCode(sub.qos))
        if session.persistent and new_subs:
            await self.store_session_now(session)
        conn.acknowledge_subscribe(packet.packet_id, codes)
        for sub, existed in new_subs:
            if sub.retain_handling == 2 or (sub.retain_handling == 1 and existed):
                continue
            if sub.share_group is not None:
                continue  # MQTT 5 4.8.2: no retained messages for a shared subscription
            self._queue_retained(link, sub)
        link.wake()

    def _queue_retained(self, link: Link, sub: Subscription) -> None:
        now = now_ms()
        for topic in list(self.retained_topics.matching(sub.topic_filter)):
            message = self.retained.entries.get(topic)
            if message is None or (message.expires_at_ms is not None and message.expires_at_ms <= now):
                continue
            if not self.allowed(link, topic, Access.READ):
                continue
            link.retained.append((message, min(sub.qos, message.qos), sub.subscription_id))

    async def unsubscribe(self, link: Link, packet: mqtt5.UnsubscribePacket) -> None:
        session = link.session
        assert session is not None
        codes = []
        for pattern in packet.patterns:
            sub = session.subscriptions.pop(pattern, None)
            if sub is None:
                codes.append(mqtt5.UnsubAckReasonCode.NO_SUBSCRIPTION_EXISTED)
                continue
            if session.persistent and sub.queue in session.read_offsets:
                self.broker.commit_offset(session_group(session.client_id), sub.queue, 0, session.committed(sub.queue))
            session.read_offsets.pop(sub.queue, None)
            self._release_queue(sub, session.client_id)
            codes.append(mqtt5.UnsubAckReasonCode.SUCCESS)
        if session.persistent:
            await self.store_session_now(session)
        link.conn.acknowledge_unsubscribe(packet.packet_id, codes)

    # --- delivering ------------------------------------------------------------------------------------------

    async def deliver(self, link: Link) -> None:
        """The delivery loop of one connected session (cancelled when the connection goes)."""
        session = link.session
        assert session is not None
        conn = link.conn
        limit = self.config.max_queued_messages
        while True:
            link.woken.clear()
            progressed = self._send_retained(link)
            batch: dict[int, tuple[CachedMessage | None, list[tuple[str, int]]]] = {}
            # Queues are read READ_BATCH entries at a time. When one has more past what was read, a message of
            # another queue stored later than the last one read here may not go first: the round delivers up to
            # the lowest such commit-log offset (the horizon) and reads the rest again next round, so overlapping
            # subscriptions keep the publish order.
            horizon: int | None = None
            for queue in list(session.own_queues()):
                offset = session.read_offsets.get(queue)
                if offset is None:
                    continue
                high = self.broker.max_offset(queue, 0)
                if high - offset > limit:
                    skipped = high - limit - offset
                    session.dropped += skipped
                    self.stats["dropped"] += skipped
                    log.warning(
                        "client %r: %d queued messages dropped (max_queued_messages %d)", link.client_id, skipped, limit
                    )
                    offset = session.read_offsets[queue] = high - limit
                if offset >= high:
                    continue
                got = await self.messages.pull(session_group(session.client_id), queue, offset, READ_BATCH)
                if got.status is PullStatus.OFFSET_ILLEGAL:
                    session.read_offsets[queue] = got.next_begin_offset
                    progressed = True
                    continue
                for commit_log_offset, queue_offset, read in got.messages:
                    entry = batch.get(commit_log_offset)
                    if entry is None:
                        batch[commit_log_offset] = (read, [(queue, queue_offset)])
                    else:
                        entry[1].append((queue, queue_offset))
                if not got.messages and got.next_begin_offset > offset:  # only holes or corrupt entries: skip them
                    session.read_offsets[queue] = got.next_begin_offset
                if got.messages and got.next_begin_offset < high:
                    last = got.messages[-1][0]
                    horizon = last if horizon is None else min(horizon, last)
            stopped = False
            now = now_ms()
            # How a message of one queue is delivered depends on its QoS, retain flag and whether this client
            # published it, and on the queue's subscriptions: found once per round for each such kind (most
            # messages sit in one queue only).
            deliveries: dict[tuple[str, int, bool, bool], tuple[int, bool, list[int]] | None] = {}
            for commit_offset in sorted(batch):
                if horizon is not None and commit_offset > horizon:
                    break  # read again next round, after what comes before it in the other queues
                cached, positions = batch[commit_offset]
                message = cached.message if cached is not None else None
                delivery = None
                if message is not None and (message.expires_at_ms is None or message.expires_at_ms > now):
                    if len(positions) == 1:
                        kind = (positions[0][0], message.qos, message.retain, message.client_id == session.client_id)
                        if kind in deliveries:
                            delivery = deliveries[kind]
                        else:
                            delivery = deliveries[kind] = session.delivery(message, session.matching(positions))
                    else:
                        delivery = session.delivery(message, session.matching(positions))
                if delivery is None or (message is not None and not self.allowed(link, message.topic, Access.READ)):
                    session.advance(positions)
                    progressed = True
                    continue
                assert cached is not None and message is not None
                qos, retain, ids = delivery
                if qos and conn.send_window <= 0:
                    stopped = True
                    break
                if not link.writable:
                    stopped = True
                    break
                packet_id = conn.next_packet_id() if qos else None
                if self.messages.publish(conn, cached, qos, retain, packet_id, now, ids) and qos:
                    session.sent(packet_id, Outgoing(message, qos, retain, ids, positions))  # type: ignore[arg-type]
                session.advance(positions)
                self.stats["delivered"] += 1
                progressed = True
            took = False
            if not stopped:
                took, stopped = await self._deliver_shared(link)
            link.flush()
            if not stopped and ((progressed and batch) or took):
                continue
            await link.woken.wait()

    async def _deliver_shared(self, link: Link) -> tuple[bool, bool]:
        """Send what the session's shared subscriptions let it take; returns (took anything, window closed)."""
        session = link.session
        assert session is not None
        conn = link.conn
        took = False
        for sub in list(session.subscriptions.values()):
            group = self.shared.get(sub.queue) if sub.share_group is not None else None
            if group is None:
                continue
            queue = sub.queue
            high = self.broker.max_offset(queue, 0)
            skipped = group.skip_to(max(self.broker.min_offset(queue, 0), high - self.config.max_queued_messages))
            if skipped:
                group.dropped += skipped
                self.stats["dropped"] += skipped
                log.warning("%s: %d queued messages dropped (max_queued_messages)", sub.key, skipped)
            backlog = group.backlog(high)
            if not backlog:
                continue
            # A fair share of the backlog among the connected members, so one burst is spread over them.
            ready = sum(1 for member in group.members if member in self.links) or 1
            count = min(TAKE_BATCH, -(-backlog // ready))
            if sub.qos:
                count = min(count, conn.send_window)
            if count <= 0 or not link.writable:
                return took, True
            offsets = group.take(session.client_id, high, count)
            found = await self._read_light_queue(group.consumer_group, queue, offsets)
            now = now_ms()
            for index, offset in enumerate(offsets):
                stored = found.get(offset)
                message = MqttMessage.from_core(stored) if stored is not None else None
                delivery = None
                if (
                    message is not None
                    and (message.expires_at_ms is None or message.expires_at_ms > now)
                    and self.allowed(link, message.topic, Access.READ)
                ):
                    delivery = session.delivery(message, [sub])
                if delivery is None or message is None:
                    group.settle(offset)  # gone from the queue, expired or not readable: nobody gets it
                    continue
                qos, retain, ids = delivery
                if (qos and conn.send_window <= 0) or not link.writable or session.client_id not in group.members:
                    group.give_back(offsets[index:])
                    self._commit_group(group)
                    self._wake_members(group)
                    return True, True
                packet_id = conn.next_packet_id() if qos else None
                if conn.publish(message.to_publish(qos, retain, packet_id, now, ids)) and qos:
                    session.sent(packet_id, Outgoing(message, qos, retain, ids, [(queue, offset)]))  # type: ignore[arg-type]
                else:
                    group.settle(offset)
                self.stats["delivered"] += 1
            self._commit_group(group)
            took = True
        return took, False

    async def _read_light_queue(self, group: str, queue: str, offsets: list[int]) -> dict[int, StoredMessage]:
        """The messages at `offsets` of a light queue (ascending; missing ones are gone: holes or retention)."""
        found: dict[int, StoredMessage] = {}
        index = 0
        while index < len(offsets):
            start = end = offsets[index]
            while index < len(offsets) and offsets[index] == end:  # one contiguous run
                index += 1
                end += 1
            offset = start
            while offset < end:
                got = await self.broker.pull(group, queue, 0, offset, end - offset)
                for read in got.messages:
                    if offset <= read.queue_offset < end:
                        found[read.queue_offset] = read
                if got.next_begin_offset <= offset:
                    break
                offset = got.next_begin_offset
        return found

    def _send_retained(self, link: Link) -> bool:
        conn = link.conn
        session = link.session
        assert session is not None
        sent = False
        now = now_ms()
        while link.retained:
            message, qos, sub_id = link.retained[0]
            if qos and conn.send_window <= 0:
                break
            link.retained.popleft()
            packet_id = conn.next_packet_id() if qos else None
            ids = [sub_id] if sub_id is not None else []
            packet = message.to_publish(qos, True, packet_id, now, ids)
            if conn.publish(packet) and qos:
                session.sent(packet_id, Outgoing(message, qos, True, ids, []))  # type: ignore[arg-type]
            sent = True
        return sent

    def acknowledged(self, link: Link, packet_id: int) -> None:
        session = link.session
        if session is None:
            return
        outgoing = session.acknowledged(packet_id)
        if outgoing is not None:
            for queue, offset in outgoing.positions:
                group = self.shared.get(queue)
                if group is not None:
                    group.settle(offset)
                    self._commit_group(group)
            if session.persistent:
                # Only the queues this publish stood for can have moved (per acknowledgement: keep it small).
                self._commit(session, {queue for queue, _ in outgoing.positions})
            link.wake()

    def received(self, link: Link, packet_id: int) -> None:
        session = link.session
        if session is not None:
            outgoing = session.inflight.get(packet_id)
            if outgoing is not None:
                outgoing.released = True

    # --- helpers ----------------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        _background.add(task)
        task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()


def _retained_change(message: StoredMessage) -> tuple[str, MqttMessage | None] | None:
    mqtt = MqttMessage.from_core(message)
    if mqtt is None:
        return None
    return mqtt.topic, (mqtt if mqtt.payload else None)


def _retained_json(message: MqttMessage) -> object:
    return message.to_json()


def _retained_value(data: object) -> MqttMessage:
    if not isinstance(data, dict):
        raise ValueError("expected an object")
    return MqttMessage.from_json(data)


def _session_change(message: StoredMessage) -> tuple[str, dict[str, object] | None] | None:
    client_id = message.properties.get(PROPERTY_SESSION)
    if client_id is None:
        return None
    return client_id, (json.loads(message.body) if message.body else None)


def _session_value(data: object) -> dict[str, object]:
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


def _qos2_change(message: StoredMessage) -> tuple[str, str | None] | None:
    properties = message.properties
    packet_id = properties.get(PROPERTY_PACKET_ID)
    if packet_id is None:
        return None
    client = mqtt_client_of(properties, bytes(message.body))
    return qos2_key(client or "", packet_id), qos2_digest(message)


def _qos2_value(data: object) -> str:
    if not isinstance(data, str):
        raise ValueError("expected a string")
    return data
