"""Which node runs each piece of work that must run on one node at a time (an EventBridge target's delivery, a
connector task): the live broker group with the highest hash of (work, group), rendezvous hashing (Thaler and
Ravishankar's highest random weight). Every node computes the same owner from the same live groups, without a
coordinator; a group that comes or goes moves only the work it gains or held (about 1/N of it), not a reshuffle of
everything, as a modulo over the sorted groups would."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

# A node starts work it gained this long after it saw the live groups change: the previous owner sees the change
# within peers.live_groups.LIVE_INTERVAL_S and stops (an EventBridge target's batch in flight delivered, a connector
# task's flushed, their offsets written) before the new owner reads.
HANDOVER_S = 3.0


def weight(work: str, group: str) -> int:
    # blake2b, not hash(): the same on every node and every run (str hashes are salted per process).
    digest = hashlib.blake2b(f"{work}\x00{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(work: str, groups: Sequence[str]) -> str | None:
    """The group whose node runs `work` among `groups` (None for none)."""
    if not groups:
        return None
    return max(groups, key=lambda group: (weight(work, group), group))


def owned(works: Iterable[str], groups: Sequence[str], group: str) -> set[str]:
    """The works of `works` that `group` runs among `groups`."""
    return {work for work in works if owner(work, groups) == group}
