"""The gateway between MQTT clients and the broker core: the coordinator of its parts. Connections (listener.py)
hand it protocol events (`handle`); it answers through their `MqttConnection`, carries out the session rules'
actions, and keeps the core in step.

The parts, each owning its state (the coordinator builds them and passes each what it uses):
- access/access_control.py (`AccessControl`): the password file and the ACL;
- sessions/session_table.py (`SessionTable`): the sessions, their rules (sessions/session_rules.py), the connected
  clients, and the session records and positions kept in the core;
- subscriptions.py (`Subscriptions`): SUBSCRIBE/UNSUBSCRIBE, the topic trie, the light queue of every filter and
  who reads it; shared_subscriptions.py (`SharedSubscriptions`): the shared subscriptions' groups;
- retained.py (`RetainedMessages`): retained messages and the $SYS tree's current values;
- inbound.py (`InboundPublishing`): PUBLISH to core message, batched per run of one topic, acknowledged once stored
  or refused (publish_refusal.py), and the QoS 2 records;
- delivery.py (`Delivery`): each connected session's delivery loop, through the message cache (message_cache.py),
  and the acknowledgements that move its positions;
- sys_topics/publishing.py (`SysPublishing`): the $SYS tree; counters.py (`GatewayCounters`): what the metrics
  read.

Here: start and close (durable state read back), the core's hooks (light queues named before a message is stored,
retained messages, QoS 2 and session records changed after, sessions woken on arrival), connecting, and the
session rules' actions (takeover, clean start, expiry, wills) on links, timers and the parts.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import typing
from collections.abc import Sequence
from pathlib import Path

import mqtt5

from core import Broker, Message, SendResult
from mqtt_bridge.access.access_control import AccessControl, Reason
from mqtt_bridge.cluster.filter_records import FILTERS_TOPIC
from mqtt_bridge.cluster.membership import PROPERTY_RETAINED_COPY, Membership
from mqtt_bridge.cluster.remote_queues import RemoteQueues
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.counters import GatewayCounters
from mqtt_bridge.delivery import Delivery
from mqtt_bridge.inbound import InboundPublishing
from mqtt_bridge.link import Link
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import (
    PROPERTY_HEADER,
    PROPERTY_PACKET_ID,
    PROPERTY_RETAIN,
    PROPERTY_TOPIC,
    MqttMessage,
    mqtt_view,
    now_ms,
)
from mqtt_bridge.retained import RetainedMessages
from mqtt_bridge.sessions.session import Session, positions_from
from mqtt_bridge.sessions.session_rules import (
    Accept,
    Action,
    Attach,
    CancelTimer,
    CloseTakenOver,
    CommitPositions,
    Detach,
    EndSession,
    MoveSession,
    PublishWill,
    Refuse,
    Resend,
    StartDelivery,
    StartTimer,
    StoreSession,
    Timer,
)
from mqtt_bridge.sessions.session_table import SessionTable, spawn
from mqtt_bridge.sessions.state_records import INBOUND_QOS2_QUEUE, RETAINED_QUEUE, SESSIONS_TOPIC
from mqtt_bridge.shared_subscriptions import SharedSubscriptions
from mqtt_bridge.subscriptions import Subscriptions
from mqtt_bridge.sys_topics.publishing import SysPublishing
from mqtt_bridge.wire.protocol import (
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
from peers.group_peers import ClusterPeers

log = logging.getLogger("mqtt_bridge.gateway")


def _in_run(event: Event) -> bool:
    """A QoS 0 or 1 PUBLISH: those go to the core in runs (QoS 2 has its own duplicate check)."""
    return type(event) is Published and event.qos < 2


class MqttGateway:
    def __init__(self, broker: Broker, config: MqttConfig, state_dir: Path, peers: ClusterPeers | None = None) -> None:
        """`peers`: the other broker groups of a cluster (None: this group alone)."""
        self.broker = broker
        self.config = config
        state_dir = Path(state_dir)
        self.peers = peers
        self.membership = Membership(
            broker.config.broker_name, peers, state_dir / "filters.json" if peers is not None else None
        )
        self.access = AccessControl(config)
        self.counters = GatewayCounters()
        # Recent messages decoded, by commit-log offset: what the gateway stores, its sessions read without the log.
        self.cache = MessageCache(broker, max_bytes=config.message_cache_mb * 1024 * 1024)
        links: dict[str, Link] = {}  # the connected clients: the session table's, read by the shared groups
        self.shared = SharedSubscriptions(broker, links, self.membership)
        self.sessions = SessionTable(broker, config, state_dir, links, self.shared.positions)
        self.retained = RetainedMessages(broker, state_dir)
        self.subscriptions = Subscriptions(
            broker, self.access, self.sessions, self.shared, self.retained, self.membership
        )
        self.sessions.remote_commit = self.membership.commit
        if peers is not None:
            self.sessions.copy = self.membership.copy
            self.sessions.group = broker.config.broker_name
        self.membership.claimed = self._claimed_elsewhere
        self.inbound = InboundPublishing(
            broker, config, state_dir, self.access, self.sessions.rules, self.cache, self.counters
        )
        if peers is not None:
            self.inbound.copy_retained = self.membership.copy_retained
        self.delivery = Delivery(
            broker, config, self.access, self.sessions, self.shared, self.cache, self.counters, self.membership
        )
        self.sys = SysPublishing(
            config.sys_interval,
            self.access,
            self.sessions,
            self.subscriptions,
            self.retained,
            self.cache,
            self.counters,
        )
        # What mqgate itself publishes (an EventBridge rule's MQTT target): stored as a client's PUBLISH would be.
        self.publish_from_server = self.inbound.publish_from_server
        self._timers: dict[tuple[Timer, str], asyncio.TimerHandle] = {}
        self.connection_count = 0  # network connections open (the listeners count them)

    @property
    def traffic(self) -> MqttTraffic:
        """What every connection received and sent (the listener gives each MqttConnection this one)."""
        return self.counters.traffic

    # --- life cycle ---

    async def start(self) -> None:
        if not self.broker.has_topic(SESSIONS_TOPIC):
            self.broker.create_topic(SESSIONS_TOPIC, 1)
        if self.peers is not None and not self.broker.has_topic(FILTERS_TOPIC):
            self.broker.create_topic(FILTERS_TOPIC, 1)  # on every group: the others write their filters to it
        self.membership.load()
        await self.retained.load()
        await self.sessions.records.load()
        await self.inbound.qos2.load()
        rules = self.sessions.rules
        for client_id, data in self.sessions.records.entries.items():
            if not self.sessions.held_here(data):
                continue  # another group's session: where it is, for a client that connects here
            session = Session.from_json(client_id, data)
            restored = rules.restore(session, now_ms())
            self.subscriptions.restore(session)
            self._execute(restored)
        self.broker.add_send_hook(self._on_send)
        self.broker.add_stored_listener(self._on_stored)
        self.broker.add_arrival_listener(self.subscriptions.arrived)
        self.retained.start()
        self.sessions.records.start()
        self.inbound.qos2.start()
        self.sys.start()
        log.info("MQTT gateway: %d retained messages, %d stored sessions", len(self.retained), len(self.sessions))

    async def join_cluster(self) -> None:
        """On a cluster (`peers`), once this group's node is reachable through the NameServers: hear the other
        groups' filters and tell them this one's, and read their queues for the sessions here. Before clients
        connect."""
        if self.peers is None:
            return
        await self.peers.start()
        remote = RemoteQueues(self.peers, self.subscriptions.arrived_elsewhere)
        remote.start()
        for session in self.sessions.values():
            if session.persistent:
                await self.membership.restore_positions(session)
        await self.membership.join(remote)

    async def close(self) -> None:
        await self.sys.stop()
        for link in list(self.sessions.links.values()):
            link.close(mqtt5.DisconnectReasonCode.SERVER_SHUTTING_DOWN)
        for handle in self._timers.values():
            handle.cancel()
        self.sessions.commit_all()
        self.shared.commit_all()
        await self.retained.close()
        await self.sessions.records.close()
        await self.inbound.qos2.close()
        await self.membership.close()
        if self.peers is not None:
            await self.peers.close()

    # --- the core's hooks ---

    def _on_send(self, message: Message) -> list[str] | None:
        """The light queues a message goes to as well: those of the matching filters, the retained queue, the QoS 2
        record. Nothing changes here: the store may still refuse the message (state follows in `_on_stored`)."""
        properties = message.properties
        if PROPERTY_RETAINED_COPY in properties:
            return [RETAINED_QUEUE]  # another group's retained message: for the retained table only
        topic = properties.get(PROPERTY_TOPIC)
        if topic is None:
            if PROPERTY_HEADER not in properties:
                return None
            view = mqtt_view(properties, bytes(message.body))  # text the properties could not carry
            if view is None:
                return None
            topic = view[0]
        queues = self.subscriptions.queues_for(topic)
        if PROPERTY_PACKET_ID in properties:
            queues.append(INBOUND_QOS2_QUEUE)
        if properties.get(PROPERTY_RETAIN) == "1":
            queues.append(RETAINED_QUEUE)
        return queues

    def _on_stored(self, message: Message, result: SendResult) -> None:
        """A message is in the log (whatever its flush status: recovery would rebuild the same state from it): a
        retained one becomes its topic's retained message, a QoS 2 one's packet id is recorded. Never before."""
        if message.topic == SESSIONS_TOPIC:
            self.sessions.record_stored(message)
            return
        if message.topic == FILTERS_TOPIC:
            if PROPERTY_RETAINED_COPY in message.properties:
                copied = MqttMessage.from_core(message)
                if copied is not None:
                    self.retained.stored(copied)
                return
            self.membership.record_stored(message)
            return
        properties = message.properties
        retain = properties.get(PROPERTY_RETAIN) == "1"
        packet_id = properties.get(PROPERTY_PACKET_ID)
        if not retain and packet_id is None:
            return
        mqtt = MqttMessage.from_core(message)
        if mqtt is None:
            return
        if packet_id is not None:
            self.inbound.qos2_stored(mqtt, packet_id)
        if retain:
            self.retained.stored(mqtt)

    # --- what connections hand over ---

    async def handle(self, link: Link, events: Sequence[Event]) -> None:
        """The events of one connection, in order; stops when the connection closes. A run of QoS 0/1 PUBLISHes is
        stored with one store call per core topic and queue (InboundPublishing.publish_run)."""
        index, count = 0, len(events)
        while index < count:
            event = events[index]
            index += 1
            if _in_run(event):
                end = index
                while end < count and _in_run(events[end]):
                    end += 1
                await self.inbound.publish_run(link, typing.cast(Sequence[Published], events[index - 1 : end]))
                index = end
            elif isinstance(event, Published):
                await self.inbound.publish(link, event.packet, event.topic)
            elif isinstance(event, Delivered):
                self.delivery.acknowledged(link, event.packet_id)
            elif isinstance(event, Received):
                self.delivery.received(link, event.packet_id)
            elif isinstance(event, Released):
                self.inbound.released(link, event.packet_id)
            elif isinstance(event, Subscribed):
                await self.subscriptions.subscribe(link, event.packet)
            elif isinstance(event, Unsubscribed):
                await self.subscriptions.unsubscribe(link, event.packet)
            elif isinstance(event, Connected):
                await self.connect(link, event.packet, event.version)
                link.connect_answered()
            elif isinstance(event, Disconnected):
                packet = event.packet
                if link.session is not None:  # may change the session expiry (ProtocolError if forbidden)
                    self.sessions.rules.disconnect_received(link.client_id, packet.session_expiry_interval)
                will = packet.reason_code == mqtt5.DisconnectReasonCode.DISCONNECT_WITH_WILL_MESSAGE
                link.client_disconnected(publish_will=will)
            if link.closed:
                return

    async def deliver(self, link: Link) -> None:
        """The delivery loop of a connected session (the link runs it as a task, from StartDelivery)."""
        await self.delivery.deliver(link)

    async def connect(self, link: Link, packet: mqtt5.ConnectPacket, version: int) -> None:
        """A CONNECT: the client id and credentials are checked here, the session rules decide the rest (on a
        cluster, once the session is this node's: `_claim`)."""
        rules = self.sessions.rules
        client_id = packet.client_id
        assigned = False
        if not client_id:
            if version == 4 and not packet.clean_start:
                self._execute(rules.refuse(link, Reason.CLIENT_ID_NOT_VALID))
                return
            client_id, assigned = f"mqgate-{secrets.token_hex(8)}", True
        reason = self.access.authenticate(packet)
        if reason is not Reason.SUCCESS:
            log.info("client %r refused: %s", client_id, reason.name)
            self._execute(rules.refuse(link, reason))
            return
        if not assigned and not await self._claim(client_id, packet.clean_start):
            log.warning("client %r refused: its session could not be taken over from the other nodes", client_id)
            self._execute(rules.refuse(link, Reason.SERVER_UNAVAILABLE))
            return
        if link.closed:
            return
        link.client_id = client_id
        link.username = packet.username
        actions = rules.connect(
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
        session = rules.sessions.get(client_id)
        if self.membership.clustered and session is not None and not session.generation and not session.subscriptions:
            session.generation = secrets.token_hex(4)  # a new session: a consumer group of its own (on every group)
        self._execute(actions)

    async def _claim(self, client_id: str, clean_start: bool) -> bool:
        """On a cluster, before a client is accepted: its session becomes this node's. A persistent session
        another node holds (its record there names that node's group) moves here: its filters are announced first
        (so nothing published meanwhile misses its queues), then every other node is told (the claim), and a node
        that held it closes the connection and lets it go; here it is restored from its record, at the positions
        committed on each group. False if a group could not be told."""
        if not self.membership.clustered:
            return True
        rules = self.sessions.rules
        moving: Session | None = None
        record = self.sessions.records.entries.get(client_id)
        held_elsewhere = record is not None and record.get("group") not in (None, self.membership.group)
        if not clean_start and client_id not in rules.sessions and record is not None and held_elsewhere:
            moving = Session.from_json(client_id, record)
            # The record's positions (as of its last write), and below the offsets committed on each group.
            moving.read_offsets = positions_from(moving.read_offsets, str(record["group"]), self.membership.group)
            new = [sub for sub in moving.subscriptions.values() if sub.queue not in self.subscriptions.queue_users]
            if not await self.membership.announce(new):
                return False
        if clean_start and record is not None and client_id not in rules.sessions:
            # A clean start ends the session wherever it was: its record goes from every group (a persistent new
            # session writes its own once accepted).
            await self.sessions.delete_record(client_id)
        if not await self.membership.claim(client_id):
            return False
        if moving is not None and client_id not in rules.sessions:
            self._execute(rules.restore(moving, now_ms()))
            self.subscriptions.restore(moving)
            await self.membership.restore_positions(moving)
            log.info("session %r taken over from broker group %s", client_id, record.get("group") if record else "")
        return True

    def _claimed_elsewhere(self, client_id: str) -> None:
        """Another node's client took this session over (its claim reached this group's store)."""
        self._execute(self.sessions.rules.taken_elsewhere(client_id, now_ms()))

    def disconnected(self, link: Link, publish_will: bool) -> None:
        """The connection is gone (DISCONNECT, error, keepalive timeout; a takeover is the rules' own)."""
        self._execute(self.sessions.rules.connection_lost(link, link.client_id, publish_will, now_ms()))

    # --- the session rules' actions ---

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case Attach():
                    self._attach(action)
                case Detach():
                    self._detach(action)
                case Accept():
                    self._accept(action)
                case Refuse(connection, reason):
                    typing.cast(Link, connection).conn.refuse(reason)
                case CloseTakenOver(connection):
                    old = typing.cast(Link, connection)
                    old.taken_over = True
                    old.close(mqtt5.DisconnectReasonCode.SESSION_TAKEN_OVER)
                case Resend():
                    self._resend(action)
                case StartDelivery(connection):
                    typing.cast(Link, connection).start_delivery()
                case CommitPositions(session):
                    self.sessions.commit(session)
                case StoreSession(session):
                    self.sessions.store(session)
                case EndSession(session):
                    self._end_session(session)
                case MoveSession(session):
                    self._move_session(session)
                case PublishWill(client_id, will, username):
                    spawn(self.inbound.publish_will(client_id, will, username))
                case StartTimer(timer, client_id, delay_s):
                    self._cancel_timer(timer, client_id)
                    self._timers[(timer, client_id)] = asyncio.get_running_loop().call_later(
                        delay_s, self._timer_fired, timer, client_id
                    )
                case CancelTimer(timer, client_id):
                    self._cancel_timer(timer, client_id)
                case _:
                    raise AssertionError(f"unknown session action {action!r}")

    def _attach(self, action: Attach) -> None:
        link = typing.cast(Link, action.connection)
        session = action.session
        link.session = session
        self.sessions.links[session.client_id] = link
        self.subscriptions.attach(session)

    def _detach(self, action: Detach) -> None:
        link = typing.cast(Link, action.connection)
        session = action.session
        links = self.sessions.links
        if links.get(session.client_id) is link:
            # Not for a connection taken over: the new one is attached already, and the group members are its.
            del links[session.client_id]
            self.subscriptions.leave_groups(session)
        link.stop_delivery()
        self.subscriptions.detach(session)

    def _accept(self, action: Accept) -> None:
        self.counters.traffic.connects += 1
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
        rules = self.sessions.rules
        if timer is Timer.EXPIRY:
            session = rules.sessions.get(client_id)
            if session is not None:
                log.info("session %r expired after %d s", client_id, session.expiry_interval)
        self._execute(rules.timer_fired(timer, client_id, now_ms()))

    def _cancel_timer(self, timer: Timer, client_id: str) -> None:
        handle = self._timers.pop((timer, client_id), None)
        if handle is not None:
            handle.cancel()

    def _move_session(self, session: Session) -> None:
        """The session went to another node: its positions committed (on every group), what it used let go here;
        its offsets and record stay, for the node that has it now."""
        self.sessions.commit(session)
        self.subscriptions.let_go(session)
        self.sessions.moved(session.client_id)
        if self.peers is not None:
            spawn(self.peers.flush_commits())

    def _end_session(self, session: Session) -> None:
        """Delete a session and everything it holds: subscriptions, offsets, unused light queues, the records."""
        self.subscriptions.end(session)
        self.inbound.forget_client(session.client_id)
        self.sessions.forget(session.client_id)
