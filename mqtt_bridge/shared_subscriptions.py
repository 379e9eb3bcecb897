"""The shared subscriptions' groups (shared_group.py plans each), by light queue, and what they are in the core: a
consumer group per shared subscription, whose connected members are live members and whose committed offset is
the group's position. Wakes the connected members when their queue gets messages, a different one first each time.

On a cluster a shared subscription's messages wait in its partitions (cluster/share_partitions.py): this node hands
out those of its own (and of nodes without members that fall to it) on every group, each a group of its own in
`partitions`, keyed by its queue (this group's) or QUEUE@GROUP, with the same members as the subscription's group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core import LIGHT_QUEUE_PREFIX, Broker
from mqtt_bridge.cluster.membership import Membership
from mqtt_bridge.cluster.share_partitions import partition_base
from mqtt_bridge.link import Link
from mqtt_bridge.sessions.session import Session, Subscription, remote_key, split_key
from mqtt_bridge.shared_group import SharedGroup, shared_group_name

# A shared subscription's light queue starts so (sessions.session.light_queue_name).
SHARED_PREFIX = f"{LIGHT_QUEUE_PREFIX}S%"


class SharedSubscriptions:
    def __init__(self, broker: Broker, links: Mapping[str, Link], membership: Membership | None = None) -> None:
        self.broker = broker
        self._links = links  # the connected clients (SessionTable's), read only
        self.membership = membership
        self.groups: dict[str, SharedGroup] = {}
        # On a cluster, the partitions handed out here (Membership.shared_partitions), by their queue in this group
        # or QUEUE@GROUP: same members as the subscription's group, positions committed on the partition's group.
        self.partitions: dict[str, SharedGroup] = {}

    def __len__(self) -> int:
        return len(self.groups)

    def __contains__(self, queue: str) -> bool:
        return queue in self.groups

    def get(self, queue: str) -> SharedGroup | None:
        return self.groups.get(queue)

    def of(self, sub: Subscription) -> SharedGroup | None:
        """The group of a shared subscription, None for a plain one."""
        return self.groups.get(sub.queue) if sub.share_group is not None else None

    def use(self, sub: Subscription, client_id: str, recorded: int = -1) -> None:
        """`client_id` is a member of the shared subscription `sub`. `recorded`: the group's position as a session
        record holds it (at start; never ahead of the truth), in case its consumer offset was not written before a
        crash."""
        group = self.groups.get(sub.queue)
        if group is None:
            assert sub.share_group is not None
            group = SharedGroup(sub.queue, sub.share_group, sub.topic_filter, 0)
            # Resume where the group left off (a restart), or start with the messages published from now.
            broker = self.broker
            committed = max(broker.query_offset(group.consumer_group, sub.queue, 0), recorded)
            if committed < 0:
                committed = broker.max_offset(sub.queue, 0)
            group.next_offset = max(committed, broker.min_offset(sub.queue, 0))
            self.groups[sub.queue] = group
        group.members.add(client_id)
        if client_id in self._links:  # connected: it reads the group from now on (at start, nobody is)
            self.join(sub.queue, client_id)

    def join(self, queue: str, client_id: str) -> None:
        """A connected member of a shared subscription is a live member of its consumer group."""
        group = self.groups.get(queue)
        if group is not None:
            self.broker.join_group(group.consumer_group, client_id, (queue,))

    def leave(self, queue: str, client_id: str) -> None:
        group = self.groups.get(queue)
        if group is not None:
            self.broker.leave_group(group.consumer_group, client_id)

    def release(self, queue: str, client_id: str, last_user: bool) -> None:
        """`client_id` no longer subscribes to the queue's shared subscription; with `last_user`, the group goes."""
        group = self.groups.get(queue)
        if group is None:
            return
        group.members.discard(client_id)
        self.leave(queue, client_id)
        if group.give_back_member(client_id):
            self.wake_members(group)
        if last_user:
            del self.groups[queue]
            for key in self.partitions_of(queue):
                self.drop_partition(key)
            self.broker.delete_group_offsets(group.consumer_group)

    def commit(self, group: SharedGroup) -> None:
        queue, where = split_key(group.queue)
        if where is None:
            self.broker.commit_offset(group.consumer_group, queue, 0, group.committed())
        elif self.membership is not None:
            self.membership.commit(where, group.consumer_group, queue, group.committed())

    def commit_all(self) -> None:
        for group in [*self.groups.values(), *self.partitions.values()]:
            self.commit(group)

    def partitions_of(self, queue: str) -> list[str]:
        """The keys of the partitions of shared queue `queue` handed out here."""
        return [key for key in self.partitions if partition_base(split_key(key)[0], SHARED_PREFIX) == queue]

    async def partition_group(self, queue: str, partition: str, where: str | None) -> SharedGroup | None:
        """The group this node hands out for `partition` (of shared queue `queue`) on broker group `where` (None:
        this one), made on first use at the position committed there (else the partition's first message: it
        holds only what was meant for its node); None while `where` does not answer."""
        key = partition if where is None else remote_key(partition, where)
        found = self.partitions.get(key)
        local = self.groups.get(queue)
        if found is not None or local is None or self.membership is None or self.membership.peers is None:
            return found
        name = shared_group_name(partition)
        if where is None:
            start = self.broker.query_offset(name, partition, 0)
            if start < 0:
                start = self.broker.min_offset(partition, 0)
        else:
            try:
                start = max(0, await self.membership.peers.committed(where, name, partition))
            except Exception:  # a group that is down: asked again next round
                return None
        found = self.partitions.get(key)
        if found is None and queue in self.groups:
            found = self.partitions[key] = SharedGroup(key, local.share_name, local.topic_filter, start)
            found.members = local.members  # one set: the members are the node's, whichever queue they take from
            if where is not None:
                self.membership.watch(partition)
        return found

    def drop_partition(self, key: str) -> None:
        """This node no longer hands out that partition (its node has members again, or this one has none): what
        it took goes back through the committed position, which the node that hands it out next resumes from."""
        group = self.partitions.pop(key, None)
        if group is not None:
            self.commit(group)
            partition = split_key(key)[0]
            if self.membership is not None and not any(split_key(k)[0] == partition for k in self.partitions):
                self.membership.not_reading(partition)

    def _group(self, queue: str) -> SharedGroup | None:
        return self.groups.get(queue) or self.partitions.get(queue)

    def of_partition(self, queue: str) -> SharedGroup | None:
        """The subscription's group of a partition's queue (its members), None for a queue that is not one."""
        base = partition_base(queue, SHARED_PREFIX)
        return self.groups.get(base) if base is not None else None

    def settle(self, positions: Iterable[tuple[str, int]]) -> None:
        """Acknowledged: the group positions a publish stood for are settled and committed."""
        for queue, offset in positions:
            group = self._group(queue)
            if group is not None:
                group.settle(offset)
                self.commit(group)

    def positions(self, subscriptions: Iterable[Subscription]) -> dict[str, int]:
        """The committed positions of the groups of these subscriptions, for a session record."""
        return {sub.queue: group.committed() for sub in subscriptions if (group := self.of(sub)) is not None}

    def connected_members(self, group: SharedGroup) -> int:
        return sum(1 for member in group.members if member in self._links)

    def wake_members(self, group: SharedGroup) -> None:
        """Wake the connected members, a different one first each time: the first to run takes the new messages,
        so a trickle of single messages goes round the members instead of always to the same one."""
        links = [link for member in sorted(group.members) if (link := self._links.get(member)) is not None]
        if not links:
            return
        group.rotation = (group.rotation + 1) % len(links)
        for link in links[group.rotation :] + links[: group.rotation]:
            link.wake()

    def give_back(self, session: Session) -> None:
        """The connection went: what it holds of shared subscriptions goes to the other members (MQTT 5 4.8.2).

        A QoS 2 publish the client has PUBREC'd is its own (the session resends only the PUBREL); everything else
        it took (in flight, or taken and not sent yet) is handed out again, so a member that never comes back
        holds nothing up."""
        for packet_id, outgoing in list(session.inflight.items()):
            for queue, offset in outgoing.positions:
                group = self._group(queue)
                if group is None:
                    continue
                if outgoing.released:
                    group.settle(offset)
                else:
                    session.acknowledged(packet_id)
        for sub in session.subscriptions.values():
            group = self.of(sub)
            if group is None:
                continue
            held = [group, *(self.partitions[key] for key in self.partitions_of(sub.queue))]
            for one in held:
                if one.give_back_member(session.client_id):
                    self.commit(one)
                    self.wake_members(one)
