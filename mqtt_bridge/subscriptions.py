"""SUBSCRIBE and UNSUBSCRIBE: every filter has a light queue in the core, shared by the sessions subscribed to it;
the send hook names the queues of the filters a message matches. Retained messages are queued for new
subscriptions (retain handling), never for shared ones."""

from __future__ import annotations

import mqtt5

from mqtt_bridge.acl_file import Access
from mqtt_bridge.gateway_state import (
    GatewayState,
    log,
    now_ms,
)
from mqtt_bridge.link import Link
from mqtt_bridge.session import Session, Subscription, session_group
from mqtt_bridge.shared_group import SharedGroup


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
            if client_id in self.links:  # connected: it reads the group from now on (at start, nobody is)
                self._join_shared(sub.queue, client_id)

    def _join_shared(self, queue: str, client_id: str) -> None:
        """A connected member of a shared subscription is a live member of its consumer group."""
        group = self.shared.get(queue)
        if group is not None:
            self.broker.join_group(group.consumer_group, client_id, (queue,))

    def _leave_shared(self, queue: str, client_id: str) -> None:
        group = self.shared.get(queue)
        if group is not None:
            self.broker.leave_group(group.consumer_group, client_id)

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
            self._leave_shared(sub.queue, client_id)
            if group.give_back_member(client_id):
                self._wake_members(group)
        if not users:
            del self.queue_users[sub.queue]
            self.trie.remove(sub.topic_filter, sub.queue)
            self.broker.delete_light_queue(sub.queue)
            if group is not None:
                del self.shared[sub.queue]
                self.broker.delete_group_offsets(group.consumer_group)

    async def subscribe(self, link: Link, packet: mqtt5.SubscribePacket) -> None:
        """SUBSCRIBE: the session rules plan it; a persistent session's record is stored with the new subscriptions
        before they are made (if the core refuses it, the SUBACK says failure and nothing changes); then the light
        queues are used, the SUBACK sent, and retained messages queued."""
        session = link.session
        assert session is not None
        client_id = session.client_id
        plan = self.rules.plan_subscribe(
            client_id, packet, link.conn.version, lambda pattern: self.allowed(link, pattern, Access.SUBSCRIBE)
        )
        for pattern, why in plan.refusals:
            log.info("client %r: SUBSCRIBE to %r: %s", client_id, pattern, why)
        # Where a new subscription starts reading: the end of its filter's queue now.
        starts = {
            sub.queue: self.broker.max_offset(sub.queue, 0)
            for sub, old, _ in plan.made
            if old is None and sub.share_group is None and sub.queue not in session.read_offsets
        }
        if session.persistent and plan.made:
            subscriptions = {**session.subscriptions, **{sub.key: sub for sub, _, _ in plan.made}}
            if not await self.store_session_now(session, self._session_data(session, subscriptions, starts)):
                plan.refused()  # not recorded, so not made ([MQTT-3.9.3]: the SUBACK says failure)
        retained = self.rules.subscribed(client_id, plan)
        for sub, old, _ in plan.made:
            if old is None:
                self._use_queue(sub, client_id)
                if sub.queue in starts:
                    session.read_offsets[sub.queue] = starts[sub.queue]
                self.readers.setdefault(sub.queue, set()).add(client_id)
        link.conn.acknowledge_subscribe(packet.packet_id, plan.codes)
        for sub in retained:
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
        # The $SYS tree's current values (sys_publishing.py), kept in memory only.
        for topic in self.sys_topics.matching(sub.topic_filter):
            sys_message = self.sys_messages.get(topic)
            if sys_message is not None and self.allowed(link, topic, Access.READ):
                link.retained.append((sys_message, 0, sub.subscription_id))

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
