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
import json
import logging
import secrets
import time
import zlib
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mqtt5

from core.broker import Broker, PullStatus
from core.errors import BrokerError
from core.store.errors import StoreError
from core.store.message import LIGHT_QUEUE_PREFIX, PROPERTY_MULTI_DISPATCH, Message, StoredMessage
from core.store.topic_name import validate_topic
from core.topic_config import MessageType
from mqtt_bridge.acl_file import Access, AclFile
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.message_cache import CachedMessage, MessageCache
from mqtt_bridge.message_mapping import PROPERTY_RETAIN, PROPERTY_TOPIC, MqttMessage
from mqtt_bridge.password_file import PasswordFile
from mqtt_bridge.session import NEVER_EXPIRES, Outgoing, Session, Subscription, session_group
from mqtt_bridge.state_table import StateTable
from mqtt_bridge.topic import TopicError, first_level, parse_subscription
from mqtt_bridge.topic_trie import SubscriptionTrie, TopicTree

if TYPE_CHECKING:
    from mqtt_bridge.listener import ClientLink

log = logging.getLogger(__name__)

RETAINED_QUEUE = f"{LIGHT_QUEUE_PREFIX}MQTT_RETAINED"
SESSIONS_TOPIC = "MQTT_SESSIONS"
PROPERTY_SESSION = "MQTT_SESSION"
# Messages read from one light queue per round of a session's delivery loop.
READ_BATCH = 64
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
        self.sessions: dict[str, Session] = {}
        self.links: dict[str, ClientLink] = {}
        self.readers: dict[str, set[str]] = {}  # light queue -> connected client ids reading it
        self.retained_topics = TopicTree()
        self.retained: StateTable[MqttMessage] = StateTable(
            broker, RETAINED_QUEUE, self.state_dir / "retained.json", _retained_change, _retained_json, _retained_value
        )
        self.stored_sessions: StateTable[dict[str, object]] = StateTable(
            broker, SESSIONS_TOPIC, self.state_dir / "sessions.json", _session_change, lambda v: v, _session_value
        )
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        self._wills: dict[str, asyncio.TimerHandle] = {}
        self._known_topics: set[str] = set()
        # Recent messages decoded, by commit-log offset: what the gateway stores, its sessions read without the log.
        self.messages = MessageCache(broker)
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
        loop = asyncio.get_running_loop()
        for client_id, data in self.stored_sessions.entries.items():
            session = Session.from_json(client_id, data)
            self.sessions[client_id] = session
            group = session_group(client_id)
            for sub in session.subscriptions.values():
                self._use_queue(sub, client_id)
                # The later of the offset in the session record and the consumer offset (written every few s).
                committed = max(self.broker.query_offset(group, sub.queue, 0), session.read_offsets.get(sub.queue, -1))
                if committed < 0:
                    committed = self.broker.max_offset(sub.queue, 0)
                session.read_offsets[sub.queue] = max(committed, self.broker.min_offset(sub.queue, 0))
            if session.disconnected_at_ms is None:
                session.disconnected_at_ms = now_ms()
            self._schedule_expiry(session, loop)
        self.broker.add_send_hook(self._on_send)
        self.broker.add_arrival_listener(self._on_arrival)
        self.retained.start()
        self.stored_sessions.start()
        log.info(
            "MQTT gateway: %d retained messages, %d stored sessions", len(self.retained.entries), len(self.sessions)
        )

    async def close(self) -> None:
        for link in list(self.links.values()):
            link.close(mqtt5.DisconnectReasonCode.SERVER_SHUTTING_DOWN)
        for handle in [*self._expiry.values(), *self._wills.values()]:
            handle.cancel()
        self._commit_all()
        await self.retained.close()
        await self.stored_sessions.close()

    def _commit_all(self) -> None:
        for session in self.sessions.values():
            if session.persistent:
                self._commit(session)

    def _commit(self, session: Session, queues: Iterable[str] | None = None) -> None:
        """Commit the session's positions in `queues` (default: all it reads) as core consumer offsets."""
        group = session_group(session.client_id)
        for queue in session.queues() if queues is None else queues:
            if queue in session.read_offsets:
                self.broker.commit_offset(group, queue, 0, session.committed(queue))

    # --- the send hook: every producer's message passes here before it is stored -----------------------------

    def _on_send(self, message: Message) -> None:
        properties = message.properties
        topic = properties.get(PROPERTY_TOPIC)
        if topic is None or PROPERTY_MULTI_DISPATCH in properties:
            return
        queues = [queue for _, queue, _ in self.trie.match(topic)]
        if properties.get(PROPERTY_RETAIN) == "1":
            queues.append(RETAINED_QUEUE)
            retained = MqttMessage.from_core(message)
            assert retained is not None
            if retained.payload:
                self.retained.changed(topic, retained)
                self.retained_topics.add(topic)
            else:  # an empty retained payload clears the topic's retained message
                self.retained.changed(topic, None)
                self.retained_topics.discard(topic)
        if queues:
            properties[PROPERTY_MULTI_DISPATCH] = ",".join(queues)

    def _on_arrival(self, queues: set[tuple[str, int]]) -> None:
        readers = self.readers
        links = self.links
        for queue, _ in queues:
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

    def allowed(self, link: ClientLink, topic: str, access: Access) -> bool:
        if self.acl is None:
            return True
        return self.acl.check(username=link.username, client_id=link.client_id, topic=topic, access=access)

    def connect(self, link: ClientLink, packet: mqtt5.ConnectPacket, version: int) -> None:
        conn = link.conn
        client_id = packet.client_id
        assigned = None
        if not client_id:
            if version == 4 and not packet.clean_start:
                conn.refuse(Reason.CLIENT_ID_NOT_VALID)
                return
            client_id = assigned = f"mqgate-{secrets.token_hex(8)}"
        reason = self.authenticate(packet)
        if reason is not Reason.SUCCESS:
            log.info("client %r refused: %s", client_id, reason.name)
            conn.refuse(reason)
            return
        link.client_id = client_id
        link.username = packet.username
        expiry = packet.session_expiry_interval
        if version == 4:
            expiry = 0 if packet.clean_start else NEVER_EXPIRES
        expiry = min(expiry, self.config.session_expiry_max_s)
        previous = self.links.get(client_id)
        if previous is not None:
            # Session takeover (MQTT 3.1.4-2): the older connection goes, without its will if the session stays.
            previous.taken_over = True
            previous.close(mqtt5.DisconnectReasonCode.SESSION_TAKEN_OVER)
            self._detach(previous, publish_will=True)
        self._cancel_will(client_id)
        session = self.sessions.get(client_id)
        present = session is not None and not packet.clean_start
        if session is not None and packet.clean_start:
            self._end_session(session)
            session = None
        if session is None:
            session = Session(client_id)
            self.sessions[client_id] = session
        timer = self._expiry.pop(client_id, None)
        if timer is not None:
            timer.cancel()
        was_persistent = session.persistent
        session.expiry_interval = expiry
        session.will = packet.will
        session.connected = True
        session.disconnected_at_ms = None
        if session.persistent or was_persistent:
            self._store_session(session)
        link.session = session
        self.links[client_id] = link
        for queue in session.queues():
            self.readers.setdefault(queue, set()).add(client_id)
        properties: dict[str, object] = {}
        if assigned is not None:
            properties["assigned_client_id"] = assigned
        if version == 5 and expiry != packet.session_expiry_interval:
            properties["session_expiry_interval"] = expiry
        conn.accept(present, **properties)
        # Resend what was in flight when the last connection went (MQTT 4.4: with DUP, same packet ids).
        for packet_id, outgoing in sorted(session.inflight.items()):
            if outgoing.released:
                conn.release(packet_id)
            else:
                conn.publish(
                    outgoing.message.to_publish(
                        outgoing.qos, outgoing.retain, packet_id, now_ms(), outgoing.subscription_ids, duplicate=True
                    )
                )
        link.start_delivery()

    def disconnected(self, link: ClientLink, publish_will: bool) -> None:
        """The connection is gone (DISCONNECT, error, keepalive timeout or takeover already handled)."""
        if self.links.get(link.client_id) is link:
            self._detach(link, publish_will)

    def _detach(self, link: ClientLink, publish_will: bool) -> None:
        session = link.session
        self.links.pop(link.client_id, None)
        link.stop_delivery()
        if session is None:
            return
        session.connected = False
        session.disconnected_at_ms = now_ms()
        for queue in session.queues():
            readers = self.readers.get(queue)
            if readers is not None:
                readers.discard(session.client_id)
                if not readers:
                    del self.readers[queue]
        will = session.will
        session.will = None
        if will is not None and publish_will:
            delay = min(will.will_delay_interval, session.expiry_interval) if link.conn.version == 5 else 0
            if delay > 0:
                loop = asyncio.get_running_loop()
                self._wills[session.client_id] = loop.call_later(
                    delay, self._publish_will_later, session.client_id, will, link.username
                )
            else:
                self._spawn(self._publish_will(session.client_id, will, link.username))
        if session.persistent and not link.taken_over:
            self._commit(session)
            self._store_session(session)
            self._schedule_expiry(session, asyncio.get_running_loop())
        elif not session.persistent:
            self._end_session(session)

    def _schedule_expiry(self, session: Session, loop: asyncio.AbstractEventLoop) -> None:
        if session.expiry_interval >= NEVER_EXPIRES:
            return
        since = (now_ms() - (session.disconnected_at_ms or now_ms())) / 1000
        delay = max(0.0, session.expiry_interval - since)
        old = self._expiry.pop(session.client_id, None)
        if old is not None:
            old.cancel()
        self._expiry[session.client_id] = loop.call_later(delay, self._expire, session.client_id)

    def _expire(self, client_id: str) -> None:
        self._expiry.pop(client_id, None)
        session = self.sessions.get(client_id)
        if session is not None and not session.connected:
            log.info("session %r expired after %d s", client_id, session.expiry_interval)
            self._end_session(session)

    def _end_session(self, session: Session) -> None:
        """Delete a session and everything it holds: subscriptions, offsets, unused light queues, the record."""
        client_id = session.client_id
        for sub in list(session.subscriptions.values()):
            self._release_queue(sub, client_id)
        session.subscriptions.clear()
        self.broker.offsets.delete_group(session_group(client_id))
        if self.sessions.get(client_id) is session:
            del self.sessions[client_id]
        if client_id in self.stored_sessions.entries:
            self.stored_sessions.changed(client_id, None)
            self._spawn(self._append_session_change(client_id, None))

    def _store_session(self, session: Session) -> None:
        data = session.to_json()
        self.stored_sessions.changed(session.client_id, data)
        self._spawn(self._append_session_change(session.client_id, data))

    async def _append_session_change(self, client_id: str, data: dict[str, object] | None) -> None:
        body = json.dumps(data).encode() if data is not None else b""
        try:
            await self.broker.send(Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id}))
        except (BrokerError, StoreError) as exc:
            log.error("session %r: state not stored: %s", client_id, exc)

    async def store_session_now(self, session: Session) -> None:
        """Store a persistent session's subscriptions before SUBACK/UNSUBACK (they must survive a crash)."""
        data = session.to_json()
        self.stored_sessions.changed(session.client_id, data)
        await self._append_session_change(session.client_id, data)

    # --- wills -----------------------------------------------------------------------------------------------

    def _cancel_will(self, client_id: str) -> None:
        handle = self._wills.pop(client_id, None)
        if handle is not None:
            handle.cancel()

    def _publish_will_later(self, client_id: str, will: mqtt5.Will, username: str | None) -> None:
        self._wills.pop(client_id, None)
        self._spawn(self._publish_will(client_id, will, username))

    async def _publish_will(self, client_id: str, will: mqtt5.Will, username: str | None) -> None:
        if self.acl is not None and not self.acl.check(
            username=username, client_id=client_id, topic=will.topic, access=Access.WRITE
        ):
            log.info("will of %r to %r refused by the ACL", client_id, will.topic)
            return
        try:
            await self.store(MqttMessage.from_will(will, client_id, now_ms()))
        except (BrokerError, StoreError, ValueError) as exc:
            log.error("will of %r to %r not published: %s", client_id, will.topic, exc)

    # --- publishing ------------------------------------------------------------------------------------------

    def core_topic(self, mqtt_topic: str) -> str:
        """The core topic of an MQTT topic (its first level); raises ValueError when it cannot be used."""
        name = first_level(mqtt_topic)
        if name in self._known_topics:
            return name
        if self.config.topics and name not in self.config.topics:
            raise ValueError(f"first-level topic {name!r} is not one of the configured MQTT topics")
        try:
            validate_topic(name)
        except StoreError as exc:
            raise ValueError(f"first level {name!r} cannot name a core topic: {exc}") from None
        if self.broker.topics.get(name) is None:
            if not self.config.auto_create_topics:
                raise ValueError(f"core topic {name!r} does not exist and MQTT topics are not created on the fly")
            self.broker.create_topic(name, self.config.queue_nums, MessageType.NORMAL)
        self._known_topics.add(name)
        return name

    async def store(self, message: MqttMessage) -> None:
        """Store an MQTT message in the core (durable under the flush mode when this returns)."""
        core_topic = self.core_topic(message.topic)
        queues = self.broker.write_queues(core_topic)
        queue_id = zlib.crc32(message.topic.encode()) % len(queues)
        sent = await self.broker.send(message.to_core(core_topic, queue_id))
        self.messages.put(sent.commit_log_offset, message)
        self.stats["published"] += 1

    async def publish(self, link: ClientLink, packet: mqtt5.PublishPacket, topic: str) -> None:
        """An inbound PUBLISH: store it (unless refused or a QoS 2 duplicate), then acknowledge."""
        conn = link.conn
        session = link.session
        assert session is not None
        qos = int(packet.qos)
        packet_id = packet.packet_id or 0
        if qos == 2 and packet_id in session.awaiting_release:
            conn.acknowledge_publish(packet_id, 2)  # a resend of one we stored: PUBREC again, store nothing
            return
        if not self.allowed(link, topic, Access.WRITE):
            self.stats["refused"] += 1
            log.info("client %r: PUBLISH to %r refused by the ACL", link.client_id, topic)
            if qos:
                # 3.1.1 has no way to say no: acknowledge and drop (as Mosquitto does); v5 says 0x87.
                conn.acknowledge_publish(packet_id, qos, 0x87 if conn.version == 5 else 0, "not authorized")
            return
        try:
            await self.store(MqttMessage.from_publish(packet, topic, link.client_id, now_ms()))
        except ValueError as exc:
            self.stats["refused"] += 1
            log.warning("client %r: PUBLISH to %r refused: %s", link.client_id, topic, exc)
            if qos:
                conn.acknowledge_publish(packet_id, qos, 0x90 if conn.version == 5 else 0, str(exc))
            return
        except (BrokerError, StoreError) as exc:
            # Not stored: no acknowledgement that could claim otherwise. The client resends after reconnecting.
            log.error("client %r: PUBLISH to %r not stored: %s", link.client_id, topic, exc)
            link.close(mqtt5.DisconnectReasonCode.UNSPECIFIED_ERROR)
            return
        if qos == 2:
            session.awaiting_release.add(packet_id)
        if qos:
            conn.acknowledge_publish(packet_id, qos)

    def released(self, link: ClientLink, packet_id: int) -> None:
        if link.session is not None:
            link.session.awaiting_release.discard(packet_id)

    # --- subscribing -----------------------------------------------------------------------------------------

    def _use_queue(self, sub: Subscription, client_id: str) -> None:
        users = self.queue_users.get(sub.queue)
        if users is None:
            users = self.queue_users[sub.queue] = set()
            self.trie.add(sub.topic_filter, sub.queue, None)
        users.add(client_id)

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
        if not users:
            del self.queue_users[sub.queue]
            self.trie.remove(sub.topic_filter, sub.queue)
            self.broker.delete_light_queue(sub.queue)

    async def subscribe(self, link: ClientLink, packet: mqtt5.SubscribePacket) -> None:
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
            if shared.group is not None:
                # Shared subscriptions come with the shared-group reader (not built yet): refuse them clearly.
                codes.append(mqtt5.SubAckReasonCode.SHARED_SUBSCRIPTIONS_NOT_SUPPORTED)
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
            self._queue_retained(link, sub)
        link.wake()

    def _queue_retained(self, link: ClientLink, sub: Subscription) -> None:
        now = now_ms()
        for topic in list(self.retained_topics.matching(sub.topic_filter)):
            message = self.retained.entries.get(topic)
            if message is None or (message.expires_at_ms is not None and message.expires_at_ms <= now):
                continue
            if not self.allowed(link, topic, Access.READ):
                continue
            link.retained.append((message, min(sub.qos, message.qos), sub.subscription_id))

    async def unsubscribe(self, link: ClientLink, packet: mqtt5.UnsubscribePacket) -> None:
        session = link.session
        assert session is not None
        codes = []
        for pattern in packet.patterns:
            sub = session.subscriptions.pop(pattern, None)
            if sub is None:
                codes.append(mqtt5.UnsubAckReasonCode.NO_SUBSCRIPTION_EXISTED)
                continue
            if session.persistent:
                self.broker.commit_offset(session_group(session.client_id), sub.queue, 0, session.committed(sub.queue))
            session.read_offsets.pop(sub.queue, None)
            self._release_queue(sub, session.client_id)
            codes.append(mqtt5.UnsubAckReasonCode.SUCCESS)
        if session.persistent:
            await self.store_session_now(session)
        link.conn.acknowledge_unsubscribe(packet.packet_id, codes)

    # --- delivering ------------------------------------------------------------------------------------------

    async def deliver(self, link: ClientLink) -> None:
        """The delivery loop of one connected session (cancelled when the connection goes)."""
        session = link.session
        assert session is not None
        conn = link.conn
        limit = self.config.max_queued_messages
        while True:
            link.woken.clear()
            progressed = self._send_retained(link)
            batch: dict[int, tuple[CachedMessage | None, list[tuple[str, int]]]] = {}
            for queue in list(session.queues()):
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
            stopped = False
            now = now_ms()
            for commit_offset in sorted(batch):
                cached, positions = batch[commit_offset]
                message = cached.message if cached is not None else None
                delivery = None
                if message is not None and (message.expires_at_ms is None or message.expires_at_ms > now):
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
            link.flush()
            if progressed and not stopped and batch:
                continue
            await link.woken.wait()

    def _send_retained(self, link: ClientLink) -> bool:
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

    def acknowledged(self, link: ClientLink, packet_id: int) -> None:
        session = link.session
        if session is None:
            return
        outgoing = session.acknowledged(packet_id)
        if outgoing is not None:
            if session.persistent:
                # Only the queues this publish stood for can have moved (per acknowledgement: keep it small).
                self._commit(session, {queue for queue, _ in outgoing.positions})
            link.wake()

    def received(self, link: ClientLink, packet_id: int) -> None:
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
