"""Sending a failed message back (RocketMQ's consumerSendMessageBack): to the group's retry topic after a growing
delay, or, once it has been consumed again `max_reconsume_times` times, to the group's dead-letter topic.

- `%RETRY%<group>` (the group's `retry_queue_nums` queues, 1 by default): the copy waits delay level
  `3 + reconsume_times` (10 s, 30 s, 1 m, 2 m ... 2 h with the default levels; the last level past the end),
  then the group's members consume it, as they subscribe to their retry topic automatically.
- `%DLQ%<group>` (one queue): consumed by nobody automatically; core.retries.dead_letters lists and resends them.

A copy keeps the original's body, flags, unique id (UNIQ_KEY), keys, tags and properties; it names the topic the
message was first consumed from (RETRY_TOPIC) and the original record (ORIGIN_MESSAGE_ID, its offset message id),
and counts the times it was consumed again in the record's reconsume_times. A consumer sees a retried message
under its first topic again (`as_consumed`), as RocketMQ clients restore it.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Protocol

from core.compression import COMPRESS_OVER, compress_body
from core.errors import IllegalArgumentError
from core.message_queue import MessageQueue
from core.results import SendResult
from core.scheduling.delay_levels import ScheduleService
from core.store.message import INTERNAL_PROPERTIES, SYSFLAG_COMPRESSED, Message, StoredMessage
from core.system_topics import (
    PARKING_PROPERTIES,
    PROPERTY_DELAY_LEVEL,
    PROPERTY_DLQ_REASON,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MOVED_FROM,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    dlq_topic,
    is_retry_topic,
    retry_topic,
)
from core.tables.subscription_group import SubscriptionGroupManager
from core.tables.topic_config import Perm, TopicCreator

# RocketMQ: a message sent back with delay level 0 waits level 3 + reconsume_times.
FIRST_RETRY_LEVEL = 3
DLQ_QUEUE_NUMS = 1
# Properties of the original that must not follow it into a copy: parking and moving are over.
_NOT_COPIED = (
    INTERNAL_PROPERTIES | PARKING_PROPERTIES | {PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_MOVED_FROM}
)


class RetryTopicBroker(TopicCreator, Protocol):
    """The broker as what makes a group's retry and dead-letter topics sees it (core.broker.Broker is one): its
    topics, and the groups' settings (retry_queue_nums)."""

    @property
    def groups(self) -> SubscriptionGroupManager: ...


class SendingBackBroker(RetryTopicBroker, Protocol):
    """The broker as `send_back` sees it (core.broker.Broker is one): its retry topics, their queues, the delay
    levels a retry waits, and sending the copy."""

    @property
    def schedule(self) -> ScheduleService: ...

    def write_queues(self, topic: str) -> list[MessageQueue]: ...

    async def send(self, message: Message) -> SendResult: ...


def ensure_retry_topic(broker: RetryTopicBroker, group: str) -> str:
    """The group's retry topic, created with the group's retry_queue_nums queues if missing."""
    topic = retry_topic(group)
    if not broker.has_topic(topic):
        queues = broker.groups.get_or_auto_create(group).retry_queue_nums
        broker.create_topic(topic, queue_nums=max(1, queues), perm=Perm.READ | Perm.WRITE)
    return topic


def ensure_dlq_topic(broker: TopicCreator, group: str) -> str:
    topic = dlq_topic(group)
    if not broker.has_topic(topic):
        broker.create_topic(topic, queue_nums=DLQ_QUEUE_NUMS, perm=Perm.READ | Perm.WRITE)
    return topic


def first_topic(message: StoredMessage) -> str:
    """The topic a message was first consumed from."""
    return message.properties.get(PROPERTY_RETRY_TOPIC) or message.topic


def as_consumed(message: StoredMessage) -> StoredMessage:
    """A message read from a retry topic as its consumer sees it: under the topic it was first sent to."""
    if is_retry_topic(message.topic):
        origin = message.properties.get(PROPERTY_RETRY_TOPIC)
        if origin:
            return replace(message, topic=origin)
    return message


async def send_back(
    broker: SendingBackBroker,
    message: StoredMessage,
    group: str,
    *,
    delay_level: int = 0,
    max_reconsume_times: int | None = None,
    immediately: bool = False,
    reason: str = "",
) -> SendResult:
    """Send `message`, which `group` failed to consume, back: to the retry topic or the dead-letter topic.

    `message.reconsume_times` is how often it was consumed again before this failure. `delay_level` as RocketMQ
    has it: 0 lets the broker choose (3 + reconsume_times), a positive level is used as given, a negative one sends
    the message to the dead-letter topic at once. `immediately` skips the delay (pop consumption: the invisible
    time already was the wait). `max_reconsume_times` defaults to the group's retry_max_times (16). Raises the
    core's errors when the copy cannot be stored: the caller must then keep the message and try again."""
    group_config = broker.groups.get_or_auto_create(group)
    limit = (
        group_config.retry_max_times if max_reconsume_times is None or max_reconsume_times < 0 else max_reconsume_times
    )
    if not isinstance(limit, int) or limit < 0:
        raise IllegalArgumentError(f"max_reconsume_times {max_reconsume_times!r} must be 0 or more")
    times = message.reconsume_times
    properties = {name: value for name, value in message.properties.items() if name not in _NOT_COPIED}
    properties.setdefault(PROPERTY_RETRY_TOPIC, first_topic(message))
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, message.offset_msg_id)
    properties[PROPERTY_MAX_RECONSUME_TIMES] = str(limit)
    if times >= limit or delay_level < 0:
        topic = ensure_dlq_topic(broker, group)
        properties[PROPERTY_DLQ_REASON] = reason or (
            f"consumed {times + 1} times without success (max_reconsume_times {limit})"
            if delay_level >= 0
            else "sent to the dead-letter topic by its consumer"
        )
        queue_id = 0
    else:
        topic = ensure_retry_topic(broker, group)
        if not immediately:
            level = delay_level if delay_level > 0 else FIRST_RETRY_LEVEL + times
            properties[PROPERTY_DELAY_LEVEL] = str(min(level, broker.schedule.max_level))
        queue_id = zlib.crc32((message.unique_id or "").encode()) % len(broker.write_queues(topic))
    body, sys_flag = message.body, message.sys_flag
    if not sys_flag & SYSFLAG_COMPRESSED:
        body, compressed = compress_body(body, COMPRESS_OVER)
        sys_flag |= compressed
    copy = Message(
        topic=topic,
        body=body,
        queue_id=queue_id,
        properties=properties,
        flag=message.flag,
        sys_flag=sys_flag,
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        reconsume_times=times + 1,
    )
    return await broker.send(copy)
