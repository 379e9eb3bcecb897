"""The cluster's subscription filters (pure, no I/O): for each light queue, its filter and the broker groups whose
sessions use it. The trie holds every filter used by any group: the send hook names the light queues of those a
message's topic matches, so each message stored on a group waits in the queues read by sessions anywhere.

On one node there is one group, this one. On a cluster each group's node announces the filters its sessions use
(filter_records.py) and hears the others' in its own store, before the announcing node answers SUBACK.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtt_bridge.cluster.share_partitions import partition_queue
from mqtt_bridge.topics.topic_trie import SubscriptionTrie


@dataclass(slots=True)
class Use:
    """A light queue's filter (without a $share prefix), its shared group if any, and the groups that use it."""

    topic_filter: str
    share_group: str | None
    groups: set[str] = field(default_factory=set)
    # A shared queue's partitions by node (share_partitions.py), the groups with members in order, and whose turn
    # the next message is.
    partitions: tuple[str, ...] = ()
    turn: int = 0

    def spread(self, queue: str, live: frozenset[str] | None) -> None:
        """The partitions new messages go to: the live nodes' with members (all of them when none is live: the
        messages wait for one)."""
        if self.share_group is not None:
            nodes = sorted(self.groups if live is None else (self.groups & live) or self.groups)
            self.partitions = tuple(partition_queue(queue, group) for group in nodes)


class FilterRegistry:
    def __init__(self) -> None:
        self.trie: SubscriptionTrie[str, None] = SubscriptionTrie()
        self.uses: dict[str, Use] = {}
        # The live groups (on a cluster, as the NameServers list them); None: every group counts as live.
        self.live: frozenset[str] | None = None
        # The light queues of the filters a topic name matches (a new list, the caller's to extend).
        self.queues_for = self.trie.match_keys

    def partitioned_queues_for(self, topic: str) -> list[str]:
        """On a cluster: as `queues_for`, but a shared subscription's queue is one of its partitions, the nodes
        with members taken in turn (share_partitions.py)."""
        queues = self.trie.match_keys(topic)
        uses = self.uses
        for index, queue in enumerate(queues):
            use = uses[queue]
            partitions = use.partitions
            if partitions:
                use.turn += 1
                queues[index] = partitions[use.turn % len(partitions)]
        return queues

    def __len__(self) -> int:
        return len(self.uses)

    def in_use(self, queue: str) -> bool:
        return queue in self.uses

    def used_by(self, group: str, queue: str) -> bool:
        use = self.uses.get(queue)
        return use is not None and group in use.groups

    def add(self, group: str, queue: str, topic_filter: str, share_group: str | None) -> bool:
        """`group` uses `queue`; True if the group did not before."""
        use = self.uses.get(queue)
        if use is None:
            use = self.uses[queue] = Use(topic_filter, share_group)
            self.trie.add(topic_filter, queue, None)
        if group in use.groups:
            return False
        use.groups.add(group)
        use.spread(queue, self.live)
        return True

    def remove(self, group: str, queue: str) -> bool:
        """`group` no longer uses `queue`; True if it did. The filter leaves the trie with its last group."""
        use = self.uses.get(queue)
        if use is None or group not in use.groups:
            return False
        use.groups.discard(group)
        use.spread(queue, self.live)
        if not use.groups:
            del self.uses[queue]
            self.trie.remove(use.topic_filter, queue)
        return True

    def set_live(self, groups: frozenset[str]) -> None:
        """The live groups changed: shared subscriptions' messages go to the live nodes' partitions only."""
        self.live = groups
        for queue, use in self.uses.items():
            use.spread(queue, groups)

    def live_users(self, queue: str) -> list[str]:
        """The live groups with members of `queue`, in order (none live: all of them)."""
        use = self.uses.get(queue)
        if use is None:
            return []
        live = self.live
        return sorted(use.groups if live is None else (use.groups & live) or use.groups)

    def of_group(self, group: str) -> dict[str, Use]:
        """The light queues `group` uses, with their filters."""
        return {queue: use for queue, use in self.uses.items() if group in use.groups}

    def replace_group(self, group: str, queues: dict[str, tuple[str, str | None]]) -> None:
        """What `group` uses is exactly `queues` (queue: (filter, share group)), as its set record says."""
        for queue in [queue for queue, use in self.uses.items() if group in use.groups and queue not in queues]:
            self.remove(group, queue)
        for queue, (topic_filter, share_group) in queues.items():
            self.add(group, queue, topic_filter, share_group)

    def to_json(self) -> dict[str, dict[str, list[str | None]]]:
        """The registry as a snapshot: {group: {queue: [filter, share group]}}."""
        groups: dict[str, dict[str, list[str | None]]] = {}
        for queue, use in self.uses.items():
            for group in use.groups:
                groups.setdefault(group, {})[queue] = [use.topic_filter, use.share_group]
        return groups

    def load_json(self, data: object) -> None:
        """Read back a snapshot (`to_json`); raises ValueError if it is not one."""
        if not isinstance(data, dict):
            raise ValueError("expected an object of groups")
        for group, queues in data.items():
            if not isinstance(queues, dict):
                raise ValueError(f"group {group!r}: expected an object of queues")
            for queue, use in queues.items():
                if not (isinstance(use, list) and len(use) == 2 and isinstance(use[0], str)):
                    raise ValueError(f"group {group!r}, queue {queue!r}: expected [filter, share group]")
                self.add(str(group), str(queue), use[0], str(use[1]) if use[1] is not None else None)
