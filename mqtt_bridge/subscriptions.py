"""SUBSCRIBE and UNSUBSCRIBE, and the light queue of every filter: each filter has one in the core, shared by the
sessions subscribed to it; the send hook names the queues of the filters a message matches (`queues_for`), and
a message's arrival wakes the connected sessions that read its queues. Retained messages are queued for new
subscriptions (retain handling), never for shared ones."""

from __future__ import annotations

import logging
from collections.abc import Callable

import mqtt5

from core import Broker
from mqtt_bridge.access.access_control import AccessControl
from mqtt_bridge.access.acl_file import Access
from mqtt_bridge.cluster.filter_registry import FilterRegistry
from mqtt_bridge.cluster.membership import Membership
from mqtt_bridge.link import Link
from mqtt_bridge.retained import RetainedMessages
from mqtt_bridge.sessions.session import Session, Subscription, remote_key, session_group
from mqtt_bridge.sessions.session_table import SessionTable
from mqtt_bridge.shared_subscriptions import SHARED_PREFIX, SharedSubscriptions

log = logging.getLogger("mqtt_bridge.gateway")


class Subscriptions:
    def __init__(
        self,
        broker: Broker,
        access: AccessControl,
        sessions: SessionTable,
        shared: SharedSubscriptions,
        retained: RetainedMessages,
        membership: Membership,
    ) -> None:
        self.broker = broker
        self.membership = membership  # the filters of every group, and this one's part in the cluster
        self.access = access
        self.sessions = sessions
        self.shared = shared
        self.retained = retained
        # Filters by light queue, of every group's sessions: the hook names the queues whose filters match a topic.
        self.registry: FilterRegistry = membership.registry
        self.trie = self.registry.trie
        # Who of this group uses each light queue (connected or persistent sessions): this group announces the
        # queue with its first user and releases it with its last; the queue goes when no group uses it.
        self.queue_users: dict[str, set[str]] = {}
        self.readers: dict[str, set[str]] = {}  # light queue -> connected client ids reading it
        # The light queues of the filters that match a topic (a new list, the caller's to extend): the send hook's
        # question, for every message stored, answered by the trie itself.
        self.queues_for: Callable[[str], list[str]] = self.registry.queues_for
        if membership.clustered:
            # A shared subscription's messages go to one of its partitions, one node's each (share_partitions.py).
            self.queues_for = self.registry.partitioned_queues_for

    def restore(self, session: Session) -> None:
        """A persistent session read back at start: its filters' light queues, and where it reads them."""
        broker = self.broker
        client_id = session.client_id
        group = session_group(client_id, session.generation)
        for sub in session.subscriptions.values():
            if sub.share_group is not None:
                self._use_queue(sub, client_id, session.read_offsets.pop(sub.queue, -1))
                continue
            self._use_queue(sub, client_id)
            # The later of the offset in the session record and the consumer offset (written every few s).
            committed = max(broker.query_offset(group, sub.queue, 0), session.read_offsets.get(sub.queue, -1))
            if committed < 0:
                committed = broker.max_offset(sub.queue, 0)
            session.read_offsets[sub.queue] = max(committed, broker.min_offset(sub.queue, 0))

    def attach(self, session: Session) -> None:
        """The session's client is connected: it reads its queues, and is a live member of their groups."""
        client_id = session.client_id
        for queue in session.queues():
            self._add_reader(queue, client_id)
        # While connected, the client reads its session's group and its shared subscriptions' groups: a live member
        # of each (the admin API's group members), without heartbeats; it leaves them when the connection goes.
        # The session group's queues change with every SUBSCRIBE; its progress lists them, the member does not.
        self.broker.join_group(session_group(client_id, session.generation), client_id)
        for queue in session.queues():
            self.shared.join(queue, client_id)

    def leave_groups(self, session: Session) -> None:
        """The client's connection is gone (not taken over): it is no longer a live member of its groups."""
        self.broker.leave_group(session_group(session.client_id, session.generation), session.client_id)
        for queue in session.queues():
            self.shared.leave(queue, session.client_id)

    def detach(self, session: Session) -> None:
        """The session's connection is gone: nobody reads its queues for it; what it took of shared subscriptions
        goes to the other members."""
        for queue in session.queues():
            self._drop_reader(queue, session.client_id)
        self.shared.give_back(session)

    def _add_reader(self, queue: str, client_id: str) -> None:
        readers = self.readers.get(queue)
        if readers is None:
            readers = self.readers[queue] = set()
            self.membership.reading(queue)
        readers.add(client_id)

    def _drop_reader(self, queue: str, client_id: str) -> None:
        readers = self.readers.get(queue)
        if readers is not None:
            readers.discard(client_id)
            if not readers:
                del self.readers[queue]
                self.membership.not_reading(queue)

    def arrived(self, queues: set[tuple[str, int]]) -> None:
        """Messages arrived in these (queue, queue id)s: wake the connected sessions that read them."""
        readers = self.readers
        links = self.sessions.links
        shared = self.shared.groups
        for queue, _ in queues:
            group = shared.get(queue)
            if group is None and queue.startswith(SHARED_PREFIX):
                group = self.shared.of_partition(queue)  # on a cluster, a partition of a shared subscription
            if group is not None:
                self.shared.wake_members(group)
                continue
            for client_id in readers.get(queue, ()):
                link = links.get(client_id)
                if link is not None:
                    link.wake()

    def arrived_elsewhere(self, queue: str) -> None:
        """Messages arrived in `queue` on another broker group (remote_queues.py)."""
        self.arrived({(queue, 0)})

    def _use_queue(self, sub: Subscription, client_id: str, recorded: int = -1) -> None:
        """`client_id` uses the subscription's light queue. `recorded`: a shared group's position as a session
        record holds it (SharedSubscriptions.use)."""
        users = self.queue_users.get(sub.queue)
        if users is None:
            users = self.queue_users[sub.queue] = set()
            self.registry.add(self.membership.group, sub.queue, sub.topic_filter, sub.share_group)
        users.add(client_id)
        if sub.share_group is not None:
            self.shared.use(sub, client_id, recorded)

    def _release_queue(self, sub: Subscription, client_id: str) -> None:
        users = self.queue_users.get(sub.queue)
        if users is None:
            return
        users.discard(client_id)
        self._drop_reader(sub.queue, client_id)
        self.shared.release(sub.queue, client_id, last_user=not users)
        if not users:
            del self.queue_users[sub.queue]
            self.membership.release(sub.queue)
            if not self.registry.in_use(sub.queue):
                self.broker.delete_light_queue(sub.queue)

    def let_go(self, session: Session) -> None:
        """The session went to another node: its light queues are let go here (announced released when this group
        has no other user), and nothing is deleted: its offsets are the other node's now."""
        for sub in list(session.subscriptions.values()):
            users = self.queue_users.get(sub.queue)
            if users is None:
                continue
            users.discard(session.client_id)
            self._drop_reader(sub.queue, session.client_id)
            if not users:
                del self.queue_users[sub.queue]
                self.membership.release(sub.queue)

    def end(self, session: Session) -> None:
        """The session ends: its subscriptions go, with the light queues nobody else uses, and its consumer group's
        offsets."""
        for sub in list(session.subscriptions.values()):
            self._release_queue(sub, session.client_id)
        session.subscriptions.clear()
        self.broker.delete_group_offsets(session_group(session.client_id, session.generation))

    async def subscribe(self, link: Link, packet: mqtt5.SubscribePacket) -> None:
        """SUBSCRIBE: the session rules plan it; a persistent session's record is stored with the new subscriptions
        before they are made (if the core refuses it, the SUBACK says failure and nothing changes); then the light
        queues are used, the SUBACK sent, and retained messages queued."""
        session = link.session
        assert session is not None
        client_id = session.client_id
        rules = self.sessions.rules
        plan = rules.plan_subscribe(
            client_id, packet, link.conn.version, lambda pattern: self.access.allowed(link, pattern, Access.SUBSCRIBE)
        )
        for pattern, why in plan.refusals:
            log.info("client %r: SUBSCRIBE to %r: %s", client_id, pattern, why)
        # On a cluster, a filter new to this group is announced to every group before the SUBACK, and the new
        # subscriptions start at the end of their queues there (if a group cannot be told, they are refused).
        announce = [
            sub for sub, old, _ in plan.made
            if old is None and sub.queue not in self.queue_users and not self.membership.announced(sub.queue)
        ]  # fmt: skip
        remote_starts: dict[str, int] = {}
        if plan.made and not await self.membership.announce(announce):
            plan.refused()
            for sub in announce:  # told to some groups: taken back
                if sub.queue not in self.queue_users:
                    self.membership.release(sub.queue)
        elif self.membership.clustered:
            remote_starts = await self.membership.starts(
                [sub.queue for sub, old, _ in plan.made if old is None and sub.share_group is None], session
            )
        # Where a new subscription starts reading: the end of its filter's queue now (and on the other groups).
        starts = {
            sub.queue: self.broker.max_offset(sub.queue, 0)
            for sub, old, _ in plan.made
            if old is None and sub.share_group is None and sub.queue not in session.read_offsets
        }
        if session.persistent and plan.made:
            subscriptions = {**session.subscriptions, **{sub.key: sub for sub, _, _ in plan.made}}
            record = self.sessions.record_of(session, subscriptions, {**starts, **remote_starts})
            if not await self.sessions.store_now(session, record):
                plan.refused()  # not recorded, so not made ([MQTT-3.9.3]: the SUBACK says failure)
        retained = rules.subscribed(client_id, plan)
        for sub, old, _ in plan.made:
            if old is None:
                self._use_queue(sub, client_id)
                if sub.queue in starts:
                    session.read_offsets[sub.queue] = starts[sub.queue]
                self._add_reader(sub.queue, client_id)
        session.read_offsets.update(remote_starts)
        link.conn.acknowledge_subscribe(packet.packet_id, plan.codes)
        for sub in retained:
            self.retained.queue_for(link, sub, lambda topic: self.access.allowed(link, topic, Access.READ))
        link.wake()

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
        if session.persistent and not await self.sessions.store_now(session):
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
        consumer_group = session_group(session.client_id, session.generation)
        if session.persistent and sub.queue in session.read_offsets:
            self.broker.commit_offset(consumer_group, sub.queue, 0, session.committed(sub.queue))
        session.read_offsets.pop(sub.queue, None)
        for group in self.membership.other_groups():
            key = remote_key(sub.queue, group)
            if session.persistent and key in session.read_offsets:
                self.membership.commit(group, consumer_group, sub.queue, session.committed(key))
            session.read_offsets.pop(key, None)
        self._release_queue(sub, session.client_id)
