"""Where pop consumption keeps each group's state, and how it starts: per (group, topic) the queues read so far and
a queue's state from the group's committed offset (core.pop.service's module docstring says where a group starts and
why).
The base of PopService, kept apart so that core.pop.service holds the pop, ack and send-back rules only."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from core.broker import Broker
from core.pop.queue_state import PopQueueState
from core.pop.request import PopInitMode

log = logging.getLogger("core.pop.service")


@dataclass(slots=True)
class TopicState:
    """One group's state in one topic."""

    queues: dict[int, PopQueueState] = field(default_factory=dict)
    rotation: int = 0  # the queue the next pop starts at, so that every queue gets its turn first
    changed: asyncio.Event | None = None  # set, then replaced, when an ack or change frees a message


class PopGroupState:
    def __init__(self, broker: Broker, init_mode: PopInitMode) -> None:
        self.broker = broker
        self.init_mode = init_mode
        self._topics: dict[tuple[str, str], TopicState] = {}

    def _topic(self, group: str, topic: str) -> TopicState:
        key = (group, topic)
        topic_state = self._topics.get(key)
        if topic_state is None:
            topic_state = self._topics[key] = TopicState()
        return topic_state

    def _queue_state(self, group: str, topic: str, queue_id: int, topic_state: TopicState) -> PopQueueState:
        state = topic_state.queues.get(queue_id)
        if state is not None:
            return self._current(group, topic, queue_id, state)
        return self._start(group, topic, queue_id, topic_state)

    def _current(self, group: str, topic: str, queue_id: int, state: PopQueueState) -> PopQueueState:
        """`state`, unless the committed offset was moved by someone else (an admin reset, a deleted group):
        then the queue starts over from there and what was in flight is forgotten."""
        committed = self.broker.query_offset(group, topic, queue_id)
        if committed == state.committed:
            return state
        log.info(
            "group %r, topic %r, queue %d: committed offset moved from %d to %d outside pop; "
            "%d unacked messages are forgotten and delivery goes on from the new offset",
            group,
            topic,
            queue_id,
            state.committed,
            committed,
            len(state.entries),
        )
        return self._start(group, topic, queue_id, self._topic(group, topic))

    def _start(self, group: str, topic: str, queue_id: int, topic_state: TopicState) -> PopQueueState:
        broker = self.broker
        committed = broker.query_offset(group, topic, queue_id)
        low, high = broker.min_offset(topic, queue_id), broker.max_offset(topic, queue_id)
        if committed >= 0:
            offset = min(max(committed, low), high)
        elif self.init_mode is PopInitMode.MIN or low == 0:
            offset = low
        else:
            offset = max(high - 1, low)
        state = topic_state.queues[queue_id] = PopQueueState(queue_id, offset)
        # Committed at once, as RocketMQ's getInitOffset does, so that the start does not drift with the
        # queue's end until the first ack.
        broker.commit_offset(group, topic, queue_id, offset)
        return state

    def _commit(self, group: str, topic: str, state: PopQueueState) -> None:
        low = state.low_water
        if low != state.committed:
            self.broker.commit_offset(group, topic, state.queue_id, low)
            state.committed = low


def notify(topic_state: TopicState) -> None:
    if topic_state.changed is not None:
        topic_state.changed.set()
        topic_state.changed = None
