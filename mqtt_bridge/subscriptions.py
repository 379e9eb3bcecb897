"""SUBSCRIBE and UNSUBSCRIBE: every filter has a light queue in the core, shared by the sessions subscribed to it;
the send hook names the queues of the filters a message matches. Retained messages are queued for new
subscriptions (retain handling), never for shared ones."""

from __future__ import annotations

import mqtt5

from mqtt_bridge.acl_file import Access
from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.gateway_state import (
    GatewayState,
    log,
    now_ms,
)
from mqtt_bridge.link import Link
from mqtt_bridge.session import Session, Subscription, session_group
from mqtt_bridge.shared_group import SharedGroup
from mqtt_bridge.topic import TopicError, parse_subscription


class Subscriptions(GatewayState):
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
        new_subs: list[tuple[Subscription, Subscription | None, int]] = []  # (new, the one it replaces, its code)
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
            old = session.subscriptions.get(sub.key)
            existed = old is not None
            if old is not None:
                sub.queue = old.queue
            session.subscriptions[sub.key] = sub
            if not existed:
                self._use_queue(sub, session.client_id)
                if sub.share_group is None:
                    session.read_offsets[sub.queue] = self.broker.max_offset(sub.queue, 0)
                self.readers.setdefault(sub.queue, set()).add(session.client_id)
            new_subs.append((sub, old, len(codes)))
            codes.append(mqtt5.SubAckReasonCode(sub.qos))
        if session.persistent and new_subs and not await self.store_session_now(session):
            # The record that makes them survive a restart was not stored: they are not made ([MQTT-3.9.3]: the
            # SUBACK says failure), and what they changed is undone.
            for sub, old, index in new_subs:
                if old is not None:
                    session.subscriptions[sub.key] = old
                else:
                    self._forget_subscription(session, sub)
                codes[index] = mqtt5.SubAckReasonCode.UNSPECIFIED_ERROR
            new_subs = []
        conn.acknowledge_subscribe(packet.packet_id, codes)
        for sub, old, _ in new_subs:
            existed = old is not None
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
            self._forget_subscription(session, sub)
            codes.append(mqtt5.UnsubAckReasonCode.SUCCESS)
        if session.persistent and not await self.store_session_now(session):
            # Not recorded: after a restart the subscriptions would be back. MQTT 5 says so in the UNSUBACK; 3.1.1
            # cannot, so the connection is closed (the client unsubscribes again when it reconnects).
            if link.conn.version != 5:
                link.close(mqtt5.DisconnectReasonCode.UNSPECIFIED_ERROR)
                return
            codes = [
                mqtt5.UnsubAckReasonCode.UNSPECIFIED_ERROR if code is mqtt5.UnsubAckReasonCode.SUCCESS else code
                for code in codes
            ]
        link.conn.acknowledge_unsubscribe(packet.packet_id, codes)

    def _forget_subscription(self, session: Session, sub: Subscription) -> None:
        """Drop a subscription of a session: its position is committed (persistent) and its light queue released."""
        session.subscriptions.pop(sub.key, None)
        if session.persistent and sub.queue in session.read_offsets:
            self.broker.commit_offset(session_group(session.client_id), sub.queue, 0, session.committed(sub.queue))
        session.read_offsets.pop(sub.queue, None)
        self._release_queue(sub, session.client_id)
