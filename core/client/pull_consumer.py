"""The pull consumer (RocketMQ's DefaultMQPullConsumer): the caller picks queues and offsets.

Clustering groups commit offsets to the broker, which keeps them across restarts; broadcasting consumers keep
their offsets here, as RocketMQ's LocalFileOffsetStore does on the client. Filter expressions are compiled once
per (type, expression) and checked in the broker, on the consume-queue tag code first.

A reader that runs for a while (a connector's sink task) `join`s its group while it reads and `leave`s it when it
stops, so the group shows it as a live member (consume type PULL), as RocketMQ's pull consumers heartbeat; a one-off
read (a replay, a listing) does not.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable

from core.broker import Broker, PullResult
from core.client.message_codec import ConsumeFromWhere, MessageModel, local_host
from core.client.offset_store import OffsetStore
from core.compression import decode_for_consumer
from core.consumer_registry import ConsumeType
from core.errors import IllegalArgumentError
from core.filter import FilterCache, MessageFilter
from core.message_queue import MessageQueue

_instances = itertools.count()


class PullConsumer:
    def __init__(
        self,
        broker: Broker,
        group: str,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        client_id: str | None = None,
    ) -> None:
        if consume_from is ConsumeFromWhere.TIMESTAMP and consume_timestamp_ms is None:
            raise IllegalArgumentError("ConsumeFromWhere.TIMESTAMP needs consume_timestamp_ms")
        self.broker = broker
        self.group = group
        self.client_id = client_id or f"{local_host()}@{os.getpid()}@pull-{next(_instances)}"
        self.message_model = message_model
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.offsets = OffsetStore(broker, group, message_model, consume_from, consume_timestamp_ms)
        self._filters = FilterCache()
        broker.groups.get_or_auto_create(group)

    def join(self, topics: Iterable[str]) -> None:
        """Be a live member of the group, reading `topics`, until leave(); meanwhile an offset reset of the group is
        refused, since this reader would commit its own positions over it."""
        self.broker.join_group(self.group, self.client_id, topics, ConsumeType.PULL)

    def leave(self) -> None:
        self.broker.leave_group(self.group, self.client_id)

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self.broker.read_queues(topic)

    def compile(self, expression: str = "*", expression_type: str = "TAG") -> MessageFilter:
        """The filter for a subscription; a malformed expression raises FilterExpressionError (with position)."""
        return self._filters.compile(expression, expression_type)

    async def pull(
        self,
        queue: MessageQueue,
        offset: int,
        max_nums: int = 32,
        expression: str = "*",
        expression_type: str = "TAG",
        long_poll_ms: int = 0,
    ) -> PullResult:
        message_filter = (
            None if expression_type == "TAG" and expression in ("", "*") else self.compile(expression, expression_type)
        )
        result = await self.broker.pull(
            self.group, queue.topic, queue.queue_id, offset, max_nums, message_filter, long_poll_ms
        )
        result.messages = [decode_for_consumer(message) for message in result.messages]
        return result

    def committed(self, queue: MessageQueue) -> int:
        """The committed offset of the queue, or -1 if there is none."""
        return self.offsets.committed(queue)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        self.offsets.commit(queue, offset)

    def start_offset(self, queue: MessageQueue) -> int:
        """Where to read from: the committed offset, else where ConsumeFromWhere says."""
        return self.offsets.start_offset(queue)
