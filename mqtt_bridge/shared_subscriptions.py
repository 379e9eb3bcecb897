"""The shared subscriptions' groups (shared_group.py plans each), by light queue, and what they are in the core: a
consumer group per shared subscription, whose connected members are live members and whose committed offset is
the group's position. Wakes the connected members when their queue gets messages, a different one first each time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from core import Broker
from mqtt_bridge.cluster.membership import Membership
from mqtt_bridge.link import Link
from mqtt_bridge.sessions.session import Session, Subscription, remote_key, split_key
from mqtt_bridge.shared_group import SharedGroup, shared_group_name


class SharedSubscriptions:
    def __init__(self, broker: Broker, links: Mapping[str, Link], membership: Membership | None = None) -> None:
        self.broker = broker
        self._links = links  # the connected clients (SessionTable's), read only
        self.membership = membership
        self.groups: dict[str, SharedGroup] = {}
        # On a cluster, the groups handed out here for other broker groups' queues (Membership.shared_owned), by
        # QUEUE@GROUP: same members as the local group of the queue, positions committed on that broker group.
        self.remote_groups: dict[str, SharedGroup] = {}

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
            for key in [key for key in self.remote_groups if split_key(key)[0] == queue]:
                self.drop_remote(key)
            self.broker.delete_group_offsets(group.consumer_group)

    def commit(self, group: SharedGroup) -> None:
        queue, where = split_key(group.queue)
        if where is None:
            self.broker.commit_offset(group.consumer_group, queue, 0, group.committed())
        elif self.membership is not None:
            self.membership.commit(where, group.consumer_group, queue, group.committed())

    def commit_all(self) -> None:
        for group in [*self.groups.values(), *self.remote_groups.values()]:
            self.commit(group)

    async def remote_group(self, queue: str, where: str) -> SharedGroup | None:
        """The group this node hands out for `queue` on broker group `where`, made on first use at the position
        committed there (else that queue's end); None while `where` does not answer."""
        key = remote_key(queue, where)
        found = self.remote_groups.get(key)
        local = self.groups.get(queue)
        if found is not None or local is None or self.membership is None or self.membership.peers is None:
            return found
        peers = self.membership.peers
        try:
            start = await peers.committed(where, shared_group_name(queue), queue)
            if start < 0:
                start = await peers.max_offset(where, queue)
        except Exception:  # a group that is down: asked again next round
            return None
        found = self.remote_groups.get(key)
        if found is None and queue in self.groups:
            found = self.remote_groups[key] = SharedGroup(key, local.share_name, local.topic_filter, start)
            found.members = local.members  # one set: the members are the node's, whichever queue they take from
        return found

    def drop_remote(self, key: str) -> None:
        """This node no longer hands out that queue (its group's node has members now): what it took goes back
        through the committed position, which the node that hands it out next resumes from."""
        group = self.remote_groups.pop(key, None)
        if group is not None:
            self.commit(group)

    def _group(self, queue: str) -> SharedGroup | None:
        return self.groups.get(queue) or self.remote_groups.get(queue)

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
            held = [group, *(g for key, g in self.remote_groups.items() if split_key(key)[0] == sub.queue)]
            for one in held:
                if one.give_back_member(session.client_id):
                    self.commit(one)
                    self.wake_members(one)
