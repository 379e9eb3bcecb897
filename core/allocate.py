"""How the consumers of a group share the queues of a topic: RocketMQ's allocation strategies as pure functions.

Every consumer of a group runs the same function over the same inputs (all queues, all consumer ids) and keeps
the queues it is given; nobody coordinates. That only works if every consumer computes exactly the same answer,
including Java consumers of the same group, so the results here follow RocketMQ's client bit for bit:

- AVG (AllocateMessageQueueAveragely): consumer i of n gets one contiguous run of the sorted queues; the first
  `len(queues) % n` consumers get one queue more. 8 queues, 3 consumers: [0,1,2], [3,4,5], [6,7].
- AVG_BY_CIRCLE (AllocateMessageQueueAveragelyByCircle): queues dealt out like cards. 8 queues, 3 consumers:
  [0,3,6], [1,4,7], [2,5].
- CONSISTENT_HASH (AllocateMessageQueueConsistentHash): each consumer puts `virtual_nodes` points on a ring of
  32-bit hashes; a queue goes to the first point at or after its own hash. A joining or leaving consumer moves
  only the queues next to its points.

Inputs are sorted and de-duplicated here (RocketMQ's RebalanceImpl sorts both lists before calling the strategy),
so callers may pass sets or lists in any order.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
import logging
from collections.abc import Iterable

from core.message_queue import MessageQueue

log = logging.getLogger(__name__)

# RocketMQ's AllocateMessageQueueConsistentHash() default.
DEFAULT_VIRTUAL_NODES = 10


class AllocateStrategy(enum.Enum):
    """Values are RocketMQ's strategy names (AllocateMessageQueueStrategy.getName())."""

    AVG = "AVG"
    AVG_BY_CIRCLE = "AVG_BY_CIRCLE"
    CONSISTENT_HASH = "CONSISTENT_HASH"


def _java_order(text: str) -> bytes:
    # Java's String.compareTo compares UTF-16 code units; Python compares code points. They disagree for
    # characters above U+FFFF, and a disagreement would make Java and Python consumers pick different queues.
    return text.encode("utf-16-be", "surrogatepass")


def _queue_order(mq: MessageQueue) -> tuple[bytes, bytes, int]:
    return _java_order(mq.topic), _java_order(mq.broker_name), mq.queue_id


def _prepare(
    consumer_group: str, current_cid: str, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> tuple[list[MessageQueue], list[str], int] | None:
    """Sorted queues, sorted consumers and the index of `current_cid`; None when there is nothing to allocate."""
    if not current_cid:
        raise ValueError(f"consumer group {consumer_group!r}: the current consumer id is empty; pass the client id")
    queues = sorted(set(mq_all), key=_queue_order)
    cids = sorted(set(cid_all), key=_java_order)
    if not queues or not cids:
        return None
    try:
        index = cids.index(current_cid)
    except ValueError:
        # Normal for a moment after a consumer (re)connects: the broker's list has not caught up yet.
        log.info(
            "consumer group %r: consumer %r is not among the group's consumers %s; it gets no queues this round",
            consumer_group,
            current_cid,
            cids,
        )
        return None
    return queues, cids, index


def allocate_averagely(
    consumer_group: str, current_cid: str, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> list[MessageQueue]:
    """The contiguous run of queues that `current_cid` owns under RocketMQ's AVG strategy."""
    prepared = _prepare(consumer_group, current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    queues, cids, index = prepared
    mod = len(queues) % len(cids)
    takes_extra = mod > 0 and index < mod
    average = 1 if len(queues) <= len(cids) else len(queues) // len(cids) + int(takes_extra)
    start = index * average if takes_extra else index * average + mod
    count = min(average, len(queues) - start)
    return queues[start : start + count] if count > 0 else []


def allocate_averagely_by_circle(
    consumer_group: str, current_cid: str, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> list[MessageQueue]:
    """Every n-th queue starting at the consumer's index, RocketMQ's AVG_BY_CIRCLE strategy."""
    prepared = _prepare(consumer_group, current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    queues, cids, index = prepared
    return queues[index :: len(cids)]


def _ring_hash(key: str) -> int:
    # RocketMQ's ConsistentHashRouter.MD5Hash: the first four bytes of the MD5 digest, big-endian, unsigned.
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4], "big")


def _ring_key(mq: MessageQueue) -> str:
    # RocketMQ hashes MessageQueue.toString(); the same text puts our queues at the same ring positions.
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def allocate_consistent_hash(
    consumer_group: str,
    current_cid: str,
    mq_all: Iterable[MessageQueue],
    cid_all: Iterable[str],
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
) -> list[MessageQueue]:
    """The queues whose ring position falls to one of `current_cid`'s points, RocketMQ's CONSISTENT_HASH."""
    if virtual_nodes < 1:
        # RocketMQ accepts 0 and then assigns no queue to anybody; a group that consumes nothing is never wanted.
        raise ValueError(f"consumer group {consumer_group!r}: virtual_nodes is {virtual_nodes}; use 1 or more")
    prepared = _prepare(consumer_group, current_cid, mq_all, cid_all)
    if prepared is None:
        return []
    queues, cids, _ = prepared
    ring: dict[int, str] = {}
    for cid in cids:
        for replica in range(virtual_nodes):
            # On a hash collision the later consumer takes the point, as a put into RocketMQ's TreeMap does.
            ring[_ring_hash(f"{cid}-{replica}")] = cid
    points = sorted(ring)
    owned = []
    for mq in queues:
        at = bisect.bisect_left(points, _ring_hash(_ring_key(mq)))
        if ring[points[at % len(points)]] == current_cid:
            owned.append(mq)
    return owned


def allocate(
    strategy: AllocateStrategy,
    consumer_group: str,
    current_cid: str,
    mq_all: Iterable[MessageQueue],
    cid_all: Iterable[str],
) -> list[MessageQueue]:
    """The queues `current_cid` owns under `strategy` (consistent hash with its default virtual nodes)."""
    if strategy is AllocateStrategy.AVG:
        return allocate_averagely(consumer_group, current_cid, mq_all, cid_all)
    if strategy is AllocateStrategy.AVG_BY_CIRCLE:
        return allocate_averagely_by_circle(consumer_group, current_cid, mq_all, cid_all)
    return allocate_consistent_hash(consumer_group, current_cid, mq_all, cid_all)
