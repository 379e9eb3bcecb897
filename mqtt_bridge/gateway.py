"""The gateway between MQTT clients and the broker core. Connections (listener.py) hand it protocol events; it
answers through their `MqttConnection` and keeps the core in step.

One object, written in modules by concern (each a class on gateway_state.GatewayState):
- gateway.py: start and close (durable state read back), the core's hooks (light queues named before a message is
  stored, retained messages and QoS 2 records changed after), connecting, and carrying out the session rules'
  actions (session_rules.py: takeover, clean start, expiry, wills) on links, timers and the core;
- inbound.py: PUBLISH to core message (topic_mapping.py, message_mapping.py), acknowledged once stored, or refused
  as publish_refusal.py says;
- subscriptions.py: SUBSCRIBE/UNSUBSCRIBE and the light queue of every filter;
- delivery.py: each connected session's delivery loop and the acknowledgements that move its positions;
- state_records.py: retained messages, session records and QoS 2 records as core messages.
"""

from __future__ import annotations

import asyncio
import secrets
import typing

import mqtt5

from core import (
    CoreError,
    Message,
    SendResult,
)
from mqtt_bridge.acl_file import Access
from mqtt_bridge.delivery import Delivery
from mqtt_bridge.errors import MqttBridgeError
from mqtt_bridge.gateway_state import (
    Reason,
    log,
    now_ms,
)
from mqtt_bridge.inbound import InboundPublishing
from mqtt_bridge.link import Link
from mqtt_bridge.message_mapping import (
    PROPERTY_HEADER,
    PROPERTY_PACKET_ID,
    PROPERTY_RETAIN,
    PROPERTY_TOPIC,
    MqttMessage,
    mqtt_view,
)
from mqtt_bridge.session import Session, session_group
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
    StartDelivery,
    StartTimer,
    StoreSession,
    Timer,
)
from mqtt_bridge.state_records import (
    INBOUND_QOS2_QUEUE,
    RETAINED_QUEUE,
    SESSIONS_TOPIC,
    payload_digest,
    qos2_key,
)
from mqtt_bridge.subscriptions import Subscriptions
from mqtt_bridge.sys_publishing import SysPublishing
from mqtt_bridge.topic import is_sys_topic


class MqttGateway(Subscriptions, InboundPublishing, Delivery, SysPublishing):
    async def start(self) -> None:
        if not self.broker.has_topic(SESSIONS_TOPIC):
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
        self.start_sys()
        log.info(
            "MQTT gateway: %d retained messages, %d stored sessions", len(self.retained.entries), len(self.sessions)
        )

    async def close(self) -> None:
        await self.stop_sys()
        for link in list(self.links.values()):
            link.close(mqtt5.DisconnectReasonCode.SERVER_SHUTTING_DOWN)
        for handle in self._timers.values():
            handle.cancel()
        self._commit_all()
        await self.retained.close()
        await self.stored_sessions.close()
        await self.inbound_qos2.close()

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
        queues = self.trie.match_keys(topic)
        if PROPERTY_PACKET_ID in properties:
            queues.append(INBOUND_QOS2_QUEUE)
        if properties.get(PROPERTY_RETAIN) == "1":
            queues.append(RETAINED_QUEUE)
        return queues

    def _on_stored(self, message: Message, result: SendResult) -> None:
        """A message is in the log (whatever its flush status: recovery would rebuild the same state from it): a
        retained one becomes its topic's retained message, a QoS 2 one's packet id is recorded. Never before."""
        if message.topic == SESSIONS_TOPIC:
            self.session_stored(message)
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

    def authenticate(self, packet: mqtt5.ConnectPacket) -> Reason:
        if packet.username is None:
            if not self.config.anonymous_allowed:
                return Reason.NOT_AUTHORIZED
            return Reason.SUCCESS
        if self.passwords is not None and not self.passwords.check(packet.username, packet.password):
            return Reason.BAD_USER_NAME_OR_PASSWORD
        if self.passwords is None and not self.config.anonymous_allowed:  # no password file to check it against
            return Reason.NOT_AUTHORIZED
        return Reason.SUCCESS

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
                    self._commit(session)
                case StoreSession(session):
                    self._store_session(session)
                case EndSession(session):
                    self._end_session(session)
                case PublishWill(client_id, will, username):
                    self._spawn(self._publish_will(client_id, will, username))
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
        self.links[session.client_id] = link
        for queue in session.queues():
            self.readers.setdefault(queue, set()).add(session.client_id)
        # While connected, the client reads its session's group and its shared subscriptions' groups: a live member
        # of each (the admin API's group members), without heartbeats; it leaves them when the connection goes.
        # The session group's queues change with every SUBSCRIBE; its progress lists them, the member does not.
        self.broker.join_group(session_group(session.client_id), session.client_id)
        for queue in session.queues():
            self._join_shared(queue, session.client_id)

    def _detach(self, action: Detach) -> None:
        link = typing.cast(Link, action.connection)
        session = action.session
        if self.links.get(session.client_id) is link:
            del self.links[session.client_id]
            # Not for a connection taken over: the new one is attached already, and the member is its.
            self.broker.leave_group(session_group(session.client_id), session.client_id)
            for queue in session.queues():
                self._leave_shared(queue, session.client_id)
        link.stop_delivery()
        for queue in session.queues():
            readers = self.readers.get(queue)
            if readers is not None:
                readers.discard(session.client_id)
                if not readers:
                    del self.readers[queue]
        self._return_shared(session)

    def _accept(self, action: Accept) -> None:
        self.traffic.connects += 1
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

    def _end_session(self, session: Session) -> None:
        """Delete a session and everything it holds: subscriptions, offsets, unused light queues, the record."""
        client_id = session.client_id
        for sub in list(session.subscriptions.values()):
            self._release_queue(sub, client_id)
        session.subscriptions.clear()
        self.broker.delete_group_offsets(session_group(client_id))
        prefix = qos2_key(client_id, "")
        for key in [key for key in self.inbound_qos2.entries if key.startswith(prefix)]:
            self.inbound_qos2.changed(key, None)
        if client_id in self.stored_sessions.entries or client_id in self._recorded:
            self._recorded.discard(client_id)
            self._spawn(self._append_session_change(client_id, None))

    async def _publish_will(self, client_id: str, will: mqtt5.Will, username: str | None) -> None:
        if is_sys_topic(will.topic):
            log.info(
                "will of %r to %r not published: $SYS topics are published by the server only", client_id, will.topic
            )
            return
        if self.acl is not None and not self.acl.check(
            username=username, client_id=client_id, topic=will.topic, access=Access.WRITE
        ):
            log.info("will of %r to %r refused by the ACL", client_id, will.topic)
            return
        try:
            await self.store(MqttMessage.from_will(will, client_id, now_ms()))
        except (CoreError, MqttBridgeError, ValueError) as exc:
            log.error("will of %r to %r not published: %s", client_id, will.topic, exc)
