"""The per-message work of one delivery round, as plain functions on plain state (compiled with mypyc): merging what
a session read from its light queues into commit-log order, and sending each message as its subscriptions and the
connection's window allow. delivery.py runs the loop around it (reads, waits, shared subscriptions); nothing here
awaits or touches a socket, so a round is tested byte for byte without one.

A round's batch maps each commit-log offset to (the cached message or None, the (light queue, queue offset)
positions that hold it): a message matching several of the session's filters is one entry, sent once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mqtt_bridge.sessions.session import Outgoing, Session
from mqtt_bridge.wire.protocol import MqttConnection
from mqtt_bridge.wire.protocol_events import CachedMessage

Batch = dict[int, tuple[CachedMessage | None, list[tuple[str, int]]]]


class Writable(Protocol):
    """What a round needs of the link: whether its transport takes more bytes (False while its buffer is full)."""

    writable: bool


class RoundResult:
    """What a round did: whether it moved any position, whether the window or the transport stopped it, how many
    messages it sent, and those counted per core topic (topic, messages, payload bytes), a run of one topic at a
    time: most rounds hold one topic, and a count per message would cost more than it is worth."""

    __slots__ = ("delivered", "progressed", "stopped", "traffic")

    def __init__(self) -> None:
        self.progressed = False
        self.stopped = False
        self.delivered = 0
        self.traffic: list[tuple[str, int, int]] = []


def merge_pulled(batch: Batch, queue: str, pulled: list[tuple[int, int, CachedMessage | None]]) -> None:
    """Add what was read from `queue` ((commit-log offset, queue offset, message) per entry) to the round's batch."""
    for commit_log_offset, queue_offset, cached in pulled:
        entry = batch.get(commit_log_offset)
        if entry is None:
            batch[commit_log_offset] = (cached, [(queue, queue_offset)])
        else:
            entry[1].append((queue, queue_offset))


def send_batch(
    batch: Batch,
    horizon: int | None,
    session: Session,
    conn: MqttConnection,
    link: Writable,
    now: int,
    readable: Callable[[str], bool] | None,
) -> RoundResult:
    """Send the batch's messages in commit-log order, up to `horizon` (past it, another queue may still hold an
    earlier message: read again next round), until the QoS 1/2 window closes or the transport is full.

    A message gone from the log, expired, wanted by no subscription (no_local) or not readable (`readable`, the
    ACL's read check; None: no ACL) is skipped: its positions move on and nothing is sent."""
    result = RoundResult()
    client_id = session.client_id
    # How a message of one queue is delivered depends on its QoS, retain flag and whether this client published
    # it, and on the queue's subscriptions: found once per round for each such kind (most messages sit in one
    # queue only).
    deliveries: dict[tuple[str, int, bool, bool], tuple[int, bool, list[int]] | None] = {}
    counted_topic = ""
    counted = counted_bytes = 0
    traffic = result.traffic
    for commit_offset in sorted(batch):
        if horizon is not None and commit_offset > horizon:
            break
        cached, positions = batch[commit_offset]
        delivery: tuple[int, bool, list[int]] | None = None
        if cached is not None:
            message = cached.message
            expires = message.expires_at_ms
            if expires is None or expires > now:
                if len(positions) == 1:
                    kind = (positions[0][0], message.qos, message.retain, message.client_id == client_id)
                    if kind in deliveries:
                        delivery = deliveries[kind]
                    else:
                        delivery = deliveries[kind] = session.delivery(message, session.matching(positions))
                else:
                    delivery = session.delivery(message, session.matching(positions))
            if delivery is not None and readable is not None and not readable(message.topic):
                delivery = None
        if delivery is None or cached is None:
            session.advance(positions)
            result.progressed = True
            continue
        message = cached.message
        qos, retain, ids = delivery
        if qos and conn.send_window <= 0:
            result.stopped = True
            break
        if not link.writable:
            result.stopped = True
            break
        if qos:
            packet_id = conn.next_packet_id()
            if conn.publish_cached(cached, qos, retain, packet_id, now, ids):
                session.sent(packet_id, Outgoing(message, qos, retain, ids, positions))
        else:
            conn.publish_cached(cached, qos, retain, None, now, ids)
        session.advance(positions)
        if cached.topic is not counted_topic:
            if counted:
                traffic.append((counted_topic, counted, counted_bytes))
            counted_topic, counted, counted_bytes = cached.topic, 0, 0
        counted += 1
        counted_bytes += len(message.payload)
        result.delivered += 1
        result.progressed = True
    if counted:
        traffic.append((counted_topic, counted, counted_bytes))
    return result
