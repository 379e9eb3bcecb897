"""The pull consumer over remoting (RocketMQ's DefaultMQPullConsumer on a cluster): core.PullConsumer's calls; the
caller picks queues (of every broker group) and offsets. Those that reach a broker are coroutines here.

Offsets are a clustering group's, kept by the brokers (offset_store.py: in memory, written every 5 s and at
`shutdown`); a broadcasting consumer keeps its own, in memory, as core's pull consumer does. Filters are compiled
here first (a malformed expression fails before any request, with core's FilterExpressionError) and sent with each
pull, for the broker to apply. A reader that runs for a while `join`s its
group, as in process: its heartbeats make it a live member (consume type PULL) on every broker of its topics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from core import (
    ConsumeFromWhere,
    FilterCache,
    IllegalArgumentError,
    MessageFilter,
    MessageModel,
    MessageQueue,
    PullResult,
)
from remote_client.cluster import Cluster, ConsumerEntry
from remote_client.offset_store import PERSIST_INTERVAL_S, RemoteOffsetStore
from remote_client.pull_request import pull_request, pull_result

# Long enough for the longest long poll a broker holds (15 s) and the answer's way back.
PULL_TIMEOUT_MARGIN_S = 5.0


class PullConsumer:
    def __init__(
        self,
        cluster: Cluster,
        group: str,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
    ) -> None:
        if consume_from is ConsumeFromWhere.TIMESTAMP and consume_timestamp_ms is None:
            raise IllegalArgumentError("ConsumeFromWhere.TIMESTAMP needs consume_timestamp_ms")
        self.cluster = cluster
        self.group = group
        self.message_model = message_model
        self.consume_from = consume_from
        broadcasting = message_model is MessageModel.BROADCASTING
        self.offsets = RemoteOffsetStore(cluster, group, consume_from, consume_timestamp_ms, broadcasting)
        self._filters = FilterCache()
        self._persisting: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.cluster.start()
        if self._persisting is None:
            self._persisting = asyncio.get_running_loop().create_task(
                self.offsets.persist_periodically(PERSIST_INTERVAL_S)
            )

    async def join(self, topics: Iterable[str]) -> None:
        """Be a live member of the group, reading `topics`, until leave()."""
        entry = ConsumerEntry(self.group, "CONSUME_ACTIVELY", self.message_model.value,
                              f"CONSUME_FROM_{self.consume_from.name}",
                              {topic: ("TAG", "*") for topic in topics})  # fmt: skip
        self.cluster.remove_consumer(self.group)
        self.cluster.add_consumer(entry)
        await self.cluster.heartbeat()

    async def leave(self) -> None:
        self.cluster.remove_consumer(self.group)
        await self.cluster.unregister_group("consumerGroup", self.group)

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return (await self.cluster.route(topic)).read_queues()

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
        if not (expression_type == "TAG" and expression in ("", "*")):
            self.compile(expression, expression_type)
        request = pull_request(self.group, queue, offset, max_nums, expression or "*", expression_type, long_poll_ms)
        timeout = self.cluster.request_timeout_s + max(long_poll_ms, 0) / 1000 + PULL_TIMEOUT_MARGIN_S
        where = f"broker {queue.broker_name}"
        try:
            reply = await self.cluster.invoke_read(queue, request, timeout)
        except Exception:
            self.cluster.forget_route(queue.topic)
            raise
        return pull_result(reply, where)

    async def committed(self, queue: MessageQueue) -> int:
        """The committed offset of the queue, or -1 if there is none."""
        return await self.offsets.committed(queue)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        self.offsets.commit(queue, offset)

    async def start_offset(self, queue: MessageQueue) -> int:
        return await self.offsets.start_offset(queue)

    async def shutdown(self) -> None:
        """Write the offsets and stop the periodic writes."""
        if self._persisting is not None:
            self._persisting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._persisting
            self._persisting = None
        await self.offsets.persist()
