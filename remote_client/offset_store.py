"""A consumer's offsets over remoting. Clustering (RocketMQ's RemoteBrokerOffsetStore): kept in memory, written to
each queue's broker every `persist_interval_s` (RocketMQ's persistConsumerOffsetInterval, 5 s) and at close, read
from the broker for a queue not yet seen. Broadcasting (RocketMQ's LocalFileOffsetStore): each member's own, in
memory, and in a local file when given one (core's LocalOffsetFile: loaded at start, written every 5 s and at
close). A process that dies loses at most the last interval's commits: those messages are delivered again (at least
once), as in RocketMQ.

Where a group starts on a queue with no committed offset (ConsumeFromWhere), as core's OffsetStore does: LAST_OFFSET
at the queue's end, FIRST_OFFSET at its first message, TIMESTAMP at the first message stored at or after the time.
The broker is asked with RocketMQ 5's setZeroIfNotFound=false, so that "none" is told apart from offset 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from core import ConsumeFromWhere, CoreError, LocalOffsetFile, MessageQueue
from remote_client.cluster import Cluster
from remote_client.replies import check, refusal
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

log = logging.getLogger(__name__)

PERSIST_INTERVAL_S = 5.0


class RemoteOffsetStore:
    def __init__(
        self,
        cluster: Cluster,
        group: str,
        consume_from: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        broadcasting: bool = False,
        local_file: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.group = group
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.broadcasting = broadcasting
        self._file = LocalOffsetFile(local_file) if local_file is not None else None
        self._offsets: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()
        self._version = 0

    def load(self) -> None:
        """A broadcasting member's file taken and read (IllegalArgumentError when another consumer holds it)."""
        if self._file is not None:
            self._offsets.update(self._file.open())

    async def committed(self, queue: MessageQueue) -> int:
        """The committed offset of the queue, or -1 if there is none."""
        known = self._offsets.get(queue)
        if known is not None or self.broadcasting:
            return -1 if known is None else known
        fields = {"consumerGroup": self.group, "topic": queue.topic, "queueId": str(queue.queue_id),
                  "setZeroIfNotFound": "false"}  # fmt: skip
        reply = await self.cluster.invoke_offsets(
            queue.broker_name, RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=fields)
        )
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if reply.code != ResponseCode.SUCCESS:
            raise refusal(reply, f"broker {queue.broker_name}")
        offset = int(reply.ext_fields.get("offset", "-1"))
        if offset >= 0:
            self._offsets[queue] = offset
        return offset

    def commit(self, queue: MessageQueue, offset: int) -> None:
        if self._offsets.get(queue) != offset:
            self._offsets[queue] = offset
            self._dirty.add(queue)

    async def start_offset(self, queue: MessageQueue) -> int:
        committed = await self.committed(queue)
        if committed >= 0:
            return committed
        if self.consume_from is ConsumeFromWhere.FIRST_OFFSET:
            return await self._queue_offset(RequestCode.GET_MIN_OFFSET, queue)
        if self.consume_from is ConsumeFromWhere.TIMESTAMP and self.consume_timestamp_ms is not None:
            return await self._queue_offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, queue, self.consume_timestamp_ms)
        return await self._queue_offset(RequestCode.GET_MAX_OFFSET, queue)

    async def _queue_offset(self, code: int, queue: MessageQueue, timestamp_ms: int | None = None) -> int:
        fields = {"topic": queue.topic, "queueId": str(queue.queue_id)}
        if timestamp_ms is not None:
            fields["timestamp"] = str(timestamp_ms)
        reply = await self.cluster.call_any(queue.broker_name, RemotingCommand(code, ext_fields=fields))
        return int(reply.ext_fields["offset"])

    async def persist(self, queues: set[MessageQueue] | None = None) -> None:
        """Write the offsets committed since the last write (of `queues`, or all) to their brokers; one that fails
        stays to write."""
        if self.broadcasting:
            if self._file is not None and self._dirty:
                self._dirty = set()
                self._version += 1  # LocalOffsetFile writes a snapshot only over an older one
                await asyncio.to_thread(self._file.write, dict(self._offsets), self._version)
            return
        if queues is None:
            dirty, self._dirty = self._dirty, set()
        else:
            dirty = self._dirty & queues
            self._dirty -= dirty
        failed = set()
        for queue in sorted(dirty):
            fields = {"consumerGroup": self.group, "topic": queue.topic, "queueId": str(queue.queue_id),
                      "commitOffset": str(self._offsets[queue])}  # fmt: skip
            try:
                check(
                    await self.cluster.invoke_offsets(
                        queue.broker_name, RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=fields)
                    ),
                    f"broker {queue.broker_name}",
                )
            except CoreError as exc:
                log.warning("group %s: offset %d of %s not written: %s", self.group, self._offsets[queue], queue, exc)
                failed.add(queue)
        self._dirty |= failed

    async def persist_periodically(self, interval_s: float = PERSIST_INTERVAL_S) -> None:
        while True:
            await asyncio.sleep(interval_s)
            with contextlib.suppress(Exception):
                await self.persist()

    async def close(self) -> None:
        await self.persist()
        if self._file is not None:
            self._file.close()

    async def release(self, queue: MessageQueue) -> None:
        """A queue this consumer no longer holds (a rebalance gave it away): its offset written, then read from the
        broker next time (RocketMQ's removeUnnecessaryMessageQueue)."""
        await self.persist({queue})
        self._offsets.pop(queue, None)
        self._dirty.discard(queue)
