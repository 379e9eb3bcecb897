"""Outbound delivery: each connected session's loop reads its light queues from its own positions, through the
message cache (the one read path of the gateway: recent messages from memory, the rest through `Broker.pull`),
merges them in commit-log order, and sends what its window allows (planning in session.py, the round in
delivery_round.py, the encoding in the connection's protocol object); shared subscriptions take from their group
(shared_group.py); acknowledgements move the positions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from core import Broker, PullStatus
from mqtt_bridge.access.access_control import AccessControl
from mqtt_bridge.access.acl_file import Access
from mqtt_bridge.cluster.membership import Membership
from mqtt_bridge.cluster.remote_queues import RemoteQueues
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.counters import GatewayCounters
from mqtt_bridge.delivery_round import Batch, merge_pulled, send_batch
from mqtt_bridge.link import Link
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import now_ms
from mqtt_bridge.sessions.session import Outgoing, Subscription, remote_key, session_group, split_key
from mqtt_bridge.sessions.session_table import SessionTable
from mqtt_bridge.shared_group import TAKE_BATCH, SharedGroup
from mqtt_bridge.shared_subscriptions import SharedSubscriptions

log = logging.getLogger("mqtt_bridge.gateway")

# Messages read from one light queue per round of a session's delivery loop.
READ_BATCH = 64


class Delivery:
    def __init__(
        self,
        broker: Broker,
        config: MqttConfig,
        access: AccessControl,
        sessions: SessionTable,
        shared: SharedSubscriptions,
        cache: MessageCache,
        counters: GatewayCounters,
        membership: Membership,
    ) -> None:
        self.broker = broker
        self.membership = membership
        self.config = config
        self.access = access
        self.sessions = sessions
        self.shared = shared
        self.cache = cache
        self.counters = counters

    async def deliver(self, link: Link) -> None:
        """The delivery loop of one connected session (cancelled when the connection goes)."""
        session = link.session
        assert session is not None
        conn = link.conn
        broker = self.broker
        counters = self.counters
        limit = self.config.max_queued_messages
        # A BLAKE2b hash: once per connection, not per read.
        group = session_group(session.client_id, session.generation)
        while True:
            link.woken.clear()
            progressed = self._send_retained(link)
            batch: Batch = {}
            # Queues are read READ_BATCH entries at a time. When one has more past what was read, a message of
            # another queue stored later than the last one read here may not go first: the round delivers up to
            # the lowest such commit-log offset (the horizon) and reads the rest again next round, so overlapping
            # subscriptions keep the publish order.
            horizon: int | None = None
            for queue in list(session.own_queues()):
                offset = session.read_offsets.get(queue)
                if offset is None:
                    continue
                high = broker.max_offset(queue, 0)
                if high - offset > limit:
                    skipped = high - limit - offset
                    session.dropped += skipped
                    counters.dropped += skipped
                    log.warning(
                        "client %r: %d queued messages dropped (max_queued_messages %d)", link.client_id, skipped, limit
                    )
                    offset = session.read_offsets[queue] = high - limit
                if offset >= high:
                    continue
                got = await self.cache.pull(group, queue, offset, READ_BATCH)
                if got.status is PullStatus.OFFSET_ILLEGAL:
                    session.read_offsets[queue] = got.next_begin_offset
                    progressed = True
                    continue
                merge_pulled(batch, queue, got.messages)
                if not got.messages and got.next_begin_offset > offset:  # only holes or corrupt entries: skip them
                    session.read_offsets[queue] = got.next_begin_offset
                if got.messages and got.next_begin_offset < high:
                    last = got.messages[-1][0]
                    horizon = last if horizon is None else min(horizon, last)
            # The messages themselves: delivery_round.py (compiled), an ACL read check per message if there is an ACL.
            readable = None if self.access.acl is None else partial(self.access.allowed, link, access=Access.READ)
            done = send_batch(batch, horizon, session, conn, link, now_ms(), readable)
            if done.progressed:
                progressed = True
            stopped = done.stopped
            if done.delivered:
                counters.delivered += done.delivered
                for topic, count, size in done.traffic:
                    broker.traffic.delivered(topic, count, size)
            took = False
            remote = self.membership.remote
            if remote is not None and not stopped:
                took, stopped = await self._deliver_remote(link, remote, readable)
            if not stopped:
                took_shared, stopped = await self._deliver_shared(link)
                took = took or took_shared
            link.flush()
            if not stopped and ((progressed and batch) or took):
                continue
            await link.woken.wait()

    async def _deliver_remote(
        self, link: Link, remote: RemoteQueues, readable: Callable[[str], bool] | None
    ) -> tuple[bool, bool]:
        """A round over the session's queues on the other broker groups, one group at a time (a group's commit-log
        offsets order its messages, not another's); returns (moved any position, window closed)."""
        session = link.session
        assert session is not None
        moved = False
        for group in self.membership.other_groups():
            batch: Batch = {}
            horizon: int | None = None
            for queue in list(session.own_queues()):
                key = remote_key(queue, group)
                offset = session.read_offsets.get(key)
                try:
                    if offset is None:  # a group that joined, or did not answer at SUBSCRIBE: from its end now
                        offset = session.read_offsets[key] = await remote.peers.max_offset(group, queue)
                    got = await remote.pull(group, queue, offset, READ_BATCH)
                except Exception as exc:  # a group that is down: the others go on
                    log.debug("client %r: %s on broker group %s not read: %s", link.client_id, queue, group, exc)
                    continue
                if got.status is PullStatus.OFFSET_ILLEGAL:
                    session.read_offsets[key] = got.next_begin_offset
                    moved = True
                    continue
                merge_pulled(batch, key, got.messages)
                if not got.messages and got.next_begin_offset > offset:
                    session.read_offsets[key] = got.next_begin_offset
                if len(got.messages) >= READ_BATCH:
                    last = got.messages[-1][0]
                    horizon = last if horizon is None else min(horizon, last)
            if not batch:
                continue
            done = send_batch(batch, horizon, session, link.conn, link, now_ms(), readable)
            if done.delivered:
                self.counters.delivered += done.delivered
                for topic, count, size in done.traffic:
                    self.broker.traffic.delivered(topic, count, size)
            moved = moved or done.progressed
            if done.stopped:
                return moved, True
        return moved, False

    async def _deliver_shared(self, link: Link) -> tuple[bool, bool]:
        """Send what the session's shared subscriptions let it take (on a cluster, from the partitions this node
        hands out, on every group: Membership.shared_partitions); returns (took anything, window closed)."""
        session = link.session
        assert session is not None
        shared = self.shared
        remote = self.membership.remote
        took = False
        for sub in list(session.subscriptions.values()):
            group = shared.groups.get(sub.queue) if sub.share_group is not None else None
            if group is None:
                continue
            took_here, stopped = await self._take(link, sub, group)
            took = took or took_here
            if stopped:
                return took, True
            if remote is None:
                continue
            wanted = self.membership.shared_partitions(sub.queue)
            keys = {partition if where is None else remote_key(partition, where) for partition, where in wanted}
            for key in shared.partitions_of(sub.queue):
                if key not in keys:
                    shared.drop_partition(key)
            for partition, where in wanted:
                other = await shared.partition_group(sub.queue, partition, where)
                if other is None:
                    continue
                took_here, stopped = await self._take(link, sub, other)
                took = took or took_here
                if stopped:
                    return took, True
        return took, False

    async def _take(self, link: Link, sub: Subscription, group: SharedGroup) -> tuple[bool, bool]:
        """Take and send what `group` hands this member (its queue, on broker group `where` when it is another's
        than this one: QUEUE@GROUP); returns (took anything, window closed)."""
        session = link.session
        assert session is not None
        conn = link.conn
        shared = self.shared
        queue, where = split_key(group.queue)
        if where is None:
            high = self.broker.max_offset(queue, 0)
            low = self.broker.min_offset(queue, 0)
        else:
            assert self.membership.remote is not None
            known = self.membership.remote.high(where, queue)
            if known is None:
                return False, False  # its long poll has not answered yet
            high, low = known, 0
        skipped = group.skip_to(max(low, high - self.config.max_queued_messages))
        if skipped:
            group.dropped += skipped
            self.counters.dropped += skipped
            log.warning("%s: %d queued messages dropped (max_queued_messages)", sub.key, skipped)
        backlog = group.backlog(high)
        if not backlog:
            return False, False
        # A fair share of the backlog among the connected members, so one burst is spread over them.
        ready = shared.connected_members(group) or 1
        count = min(TAKE_BATCH, -(-backlog // ready))
        if sub.qos:
            count = min(count, conn.send_window)
        if count <= 0 or not link.writable:
            return False, True
        offsets = group.take(session.client_id, high, count)
        if where is None:
            found = await self.cache.read(group.consumer_group, queue, offsets)
        else:
            assert self.membership.remote is not None
            try:
                found = await self.membership.remote.read(where, queue, offsets)
            except Exception as exc:  # the group went: what was taken goes back
                log.debug("%s on broker group %s not read: %s", sub.key, where, exc)
                group.give_back(offsets)
                return False, False
        now = now_ms()
        for index, offset in enumerate(offsets):
            cached = found.get(offset)
            message = cached.message if cached is not None else None
            delivery = None
            if (
                message is not None
                and (message.expires_at_ms is None or message.expires_at_ms > now)
                and self.access.allowed(link, message.topic, Access.READ)
            ):
                delivery = session.delivery(message, [sub])
            if delivery is None or message is None or cached is None:
                group.settle(offset)  # gone from the queue, expired or not readable: nobody gets it
                continue
            qos, retain, ids = delivery
            if (qos and conn.send_window <= 0) or not link.writable or session.client_id not in group.members:
                group.give_back(offsets[index:])
                shared.commit(group)
                shared.wake_members(group)
                return True, True
            packet_id = conn.next_packet_id() if qos else None
            if conn.publish_cached(cached, qos, retain, packet_id, now, ids) and qos:
                session.sent(packet_id, Outgoing(message, qos, retain, ids, [(group.queue, offset)]))  # type: ignore[arg-type]
            else:
                group.settle(offset)
            self.counters.delivered += 1
            self.broker.traffic.delivered(cached.topic, 1, len(message.payload))
        shared.commit(group)
        return True, False

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
        """The client's PUBACK or PUBCOMP: the positions the publish stood for move (session_rules.acknowledged)."""
        session = link.session
        if session is None:
            return
        outgoing = self.sessions.rules.acknowledged(session.client_id, packet_id)
        if outgoing is not None:
            self.shared.settle(outgoing.positions)
            if session.persistent:
                # Only the queues this publish stood for can have moved (per acknowledgement: keep it small).
                self.sessions.commit(session, {queue for queue, _ in outgoing.positions})
            link.wake()

    def received(self, link: Link, packet_id: int) -> None:
        if link.session is not None:
            self.sessions.rules.received(link.session.client_id, packet_id)
