"""A message's consumption state for one consumer group (RocketMQ's messageTrackDetail and its TrackType).

A message can be stored more than once under one unique id: the original in its topic; when group G fails to
consume it, a copy in G's retry topic (%RETRY%G), perhaps first parked while it waits its delay; after
maxReconsumeTimes, a copy in G's dead-letter topic (%DLQ%G); and a dead letter resent is a new record in the topic
again. Each copy is stored after the one it was made from, and a consumer commits its offset past a message only
once the message is consumed or its retry copy stored. So the newest of these records says where the message
stands for G:

    newest record                    state              because
    in %DLQ%G                        IN_DLQ             nobody consumes the dead-letter topic by itself
    parked for %RETRY%G              IN_RETRY           it waits its delay before it reaches the retry topic
    in %RETRY%G, below G's offset    CONSUMED           the retry succeeded (a failure would have made a newer copy)
    in %RETRY%G, at or past it       IN_RETRY           G has not consumed the retry yet
    in the topic, no offset of G     NO_OFFSET          G never committed an offset in that queue: it never consumed
                                                        from there (or started after the message and has not yet)
    in the topic, below G's offset   CONSUMED
    in the topic, at or past it      NOT_CONSUMED_YET

A group whose live members consume by broadcasting is BROADCASTING: each member keeps its own offsets
(core.client.offset_store), the broker cannot tell (RocketMQ's CONSUME_BROADCASTING). A message a group's
subscription filters out counts as consumed once the offset has passed it (RocketMQ would say
CONSUMED_BUT_FILTERED; the broker does not keep the group's filter here).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from core.compression import decode_for_consumer
from core.consumer_registry import ConsumerRegistry
from core.store.message import StoredMessage
from core.system_topics import dlq_topic, retry_topic
from core.tables.consumer_offsets import NO_OFFSET

# As core.client.message_codec.MessageModel.BROADCASTING.value, the model members register with (kept as text: the
# client package builds on the broker, not the other way round).
_BROADCASTING = "BROADCASTING"


class ConsumeState(enum.Enum):
    CONSUMED = "CONSUMED"
    NOT_CONSUMED_YET = "NOT_CONSUMED_YET"
    IN_RETRY = "IN_RETRY"
    IN_DLQ = "IN_DLQ"
    NO_OFFSET = "NO_OFFSET"
    BROADCASTING = "BROADCASTING"


@dataclass(slots=True, frozen=True)
class MessageTrack:
    """Where a message stands for `group`. `record` is the newest record of the message (decoded as consumers see
    it), the one that decided; `committed_offset` the group's committed offset in that record's queue (-1: none)."""

    group: str
    state: ConsumeState
    record: StoredMessage
    committed_offset: int


class GroupProgress(Protocol):
    """What the broker knows of a group's progress (core.broker.Broker is one): its live members and its committed
    offsets."""

    @property
    def consumers(self) -> ConsumerRegistry: ...

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The group's committed offset in the queue, or -1 if it has none."""
        ...


def track_records(broker: GroupProgress, group: str, topic: str, records: list[StoredMessage]) -> MessageTrack:
    """The state for `group` of the message whose records (the original in `topic`, its retry and dead-letter copies
    of `group`, its resends) are `records`, in store order; at least one."""
    newest = records[-1]
    members = broker.consumers.members(group)
    if members and all(member.message_model == _BROADCASTING for member in members):
        return MessageTrack(group, ConsumeState.BROADCASTING, decode_for_consumer(newest), NO_OFFSET)
    retry = retry_topic(group)
    if newest.topic == dlq_topic(group):
        state = ConsumeState.IN_DLQ
        committed = broker.query_offset(group, newest.topic, newest.queue_id)
    elif newest.topic != topic and newest.topic != retry:
        state = ConsumeState.IN_RETRY  # parked, waiting its delay before it is stored in the retry topic
        committed = broker.query_offset(group, retry, 0)
    else:
        committed = broker.query_offset(group, newest.topic, newest.queue_id)
        if committed > newest.queue_offset:
            state = ConsumeState.CONSUMED
        elif newest.topic == retry:
            state = ConsumeState.IN_RETRY
        elif committed == NO_OFFSET:
            state = ConsumeState.NO_OFFSET
        else:
            state = ConsumeState.NOT_CONSUMED_YET
    return MessageTrack(group, state, decode_for_consumer(newest), committed)


__all__ = ["ConsumeState", "MessageTrack", "track_records"]
