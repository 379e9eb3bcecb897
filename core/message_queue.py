"""MessageQueue: one queue of one topic on one broker, the unit that consumers share out (RocketMQ's MessageQueue)."""

from __future__ import annotations

from dataclasses import dataclass


# Field order is the sort order: topic, then broker, then queue id, as RocketMQ's MessageQueue.compareTo.
@dataclass(slots=True, frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int
