"""Shared subscriptions on a cluster (pure, no I/O): one stream spread over the members on every node.

Each node that has members of a shared subscription `$share/<group>/<filter>` (its light queue S; the filter
registry's Use.groups: connected or persistent members) has a partition of S in every broker group: the light
queue `S%<node>` (`partition_queue`). The send hook of the group that stores a message names one partition of each
shared subscription it matches, the nodes taken in turn (`FilterRegistry.partitioned_queues_for`): so the node a
device publishes to spreads its stream over the members of every node, one message to one partition, in the same
append that stores it (nothing to arbitrate afterwards).

A node hands out its own partitions, in every group, to its members (a consumer group per partition, committed on
the partition's group, as SharedGroup does for one queue). A node without members any more (its last member left)
gets no new messages; what its partitions still hold is handed out by one node that has members, chosen by a hash
of the node's name (`dispatched_by`), from the position committed there.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Iterable, Sequence

from core import MAX_TOPIC_LENGTH

PARTITION_SEPARATOR = "%"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_NODE_DIGEST = 8


def partition_queue(queue: str, node: str) -> str:
    """The partition of shared queue `queue` for the node of broker group `node` (a name the core takes: the
    node's name in the characters core names allow, or a hash of it when the whole would be too long)."""
    safe = _UNSAFE.sub("_", node)
    if len(queue) + 1 + len(safe) > MAX_TOPIC_LENGTH or safe != node:
        safe = hashlib.blake2b(node.encode(), digest_size=_NODE_DIGEST).hexdigest()
    return f"{queue}{PARTITION_SEPARATOR}{safe}"


def partition_base(queue: str, shared_prefix: str) -> str | None:
    """The shared queue a partition belongs to; None for a queue that is not a partition (a shared queue's name
    has exactly three '%' after the light-queue prefix; a partition one more)."""
    if not queue.startswith(shared_prefix):
        return None
    base, separator, _ = queue.rpartition(PARTITION_SEPARATOR)
    if not separator or base.count(PARTITION_SEPARATOR) != shared_prefix.count(PARTITION_SEPARATOR) + 1:
        return None
    return base


def dispatched_by(node: str, users: Sequence[str], known: Iterable[str]) -> list[str]:
    """The nodes whose partitions `node` hands out: its own while it has members (it is one of `users`, the nodes
    with members), and those of known nodes without members that fall to it by a hash of their name (none when
    nobody has members)."""
    if node not in users:
        return []
    ordered = sorted(users)
    owned = [node]
    for other in sorted(set(known) - set(users)):
        if ordered[zlib.crc32(other.encode()) % len(ordered)] == node:
            owned.append(other)
    return owned
