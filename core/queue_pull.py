"""Pulling a queue (RocketMQ's PullMessageProcessor, in process): the permission checks, the read, and the long
poll that waits for the next message when there is none yet."""

from __future__ import annotations

import asyncio
import functools
from typing import Protocol

from core.broker_config import BrokerConfig
from core.errors import IllegalArgumentError, NoPermissionError
from core.filter import MessageFilter
from core.long_poll import LongPollWaiters
from core.results import PullResult, PullStatus, Route
from core.store.message import is_light_queue
from core.store.message_store import GetStatus, MessageStore
from core.tables.subscription_group import SubscriptionGroupManager
from core.tables.topic_config import TopicConfig
from core.traffic import TopicTraffic


class PullingBroker(Protocol):
    """The broker as pulling sees it (core.broker.Broker is one)."""

    config: BrokerConfig
    groups: SubscriptionGroupManager
    store: MessageStore
    traffic: TopicTraffic

    def topic_config(self, topic: str) -> TopicConfig: ...

    def route(self, topic: str) -> Route: ...

    def has_past(self, topic: str, queue_id: int, offset: int) -> bool: ...


async def pull_queue(
    broker: PullingBroker,
    long_poll: LongPollWaiters | None,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_count: int,
    message_filter: MessageFilter | None,
    long_poll_ms: int,
) -> PullResult:
    """Read messages of a queue from `offset`; if there are none yet, wait up to `long_poll_ms` for one.

    A light queue (a name starting with %LMQ%, RocketMQ's LMQ) has no topic config: it exists while
    messages name it, has one queue (0), and its readers' groups are not registered either.
    """
    light = is_light_queue(topic)
    if light:
        if queue_id != 0:
            raise IllegalArgumentError(f"light queue {topic!r} has one queue, 0; asked for {queue_id}")
    else:
        broker.groups.get_or_auto_create(group)
        broker.topic_config(topic)
        route = broker.route(topic)
        if not route.readable:
            raise NoPermissionError(f"topic {topic!r} is not readable (perm {route.config.perm!r})")
        if not 0 <= queue_id < len(route.read_queues):
            raise IllegalArgumentError(f"topic {topic!r}: queue {queue_id} does not exist")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(long_poll_ms, broker.config.max_long_poll_ms) / 1000
    tag_filter = message_filter.matches_code if message_filter is not None else None
    body_filter = message_filter.matches_message if message_filter is not None else None
    while True:
        got = broker.store.get_messages(topic, queue_id, offset, max_count, tag_filter, body_filter)
        status = got.status
        if status is GetStatus.FOUND:
            if not light:  # a light queue is a front door's own (core.traffic): it counts its deliveries
                messages = got.messages
                broker.traffic.delivered(topic, len(messages), sum([len(m.body) for m in messages]))
            return PullResult(PullStatus.FOUND, got.messages, got.next_begin_offset, got.min_offset, got.max_offset)
        if status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            return PullResult(PullStatus.OFFSET_ILLEGAL, [], got.next_begin_offset, got.min_offset, got.max_offset)
        if offset != 0 and status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
            # A queue that never held a message (or has no consume queue yet) is read from 0: any other offset
            # is moved there, at once (RocketMQ's PullMessageProcessor answers it PULL_OFFSET_MOVED).
            return PullResult(PullStatus.OFFSET_ILLEGAL, [], 0, got.min_offset, got.max_offset)
        # Nothing (more) to read: NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE, NO_MATCHED_LOGIC_QUEUE, or
        # every entry up to the end was filtered out. Wait for the next message, if asked to.
        if status is not GetStatus.NO_MATCHED_LOGIC_QUEUE:
            offset = max(offset, got.next_begin_offset)
        remaining = deadline - loop.time()
        if remaining <= 0 or long_poll is None:
            pull_status = (
                PullStatus.NO_MATCHED_MSG if status is GetStatus.NO_MATCHED_MESSAGE else (PullStatus.NO_NEW_MSG)
            )
            return PullResult(pull_status, [], offset, got.min_offset, got.max_offset)
        arrived = await long_poll.wait(
            topic, queue_id, remaining, functools.partial(broker.has_past, topic, queue_id, offset)
        )
        if not arrived:
            deadline = loop.time()  # one last read, then return empty
