"""The producer (RocketMQ's DefaultMQProducer), in process.

Queue selection: round robin over the topic's write queues by default; a sharding key keeps one key's messages
in one queue, in order (stable CRC32 of the key, not Python's per-process hash()); or the caller's selector.
A topic with one queue gives global order.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core.broker import Broker, SendResult
from core.client.message_codec import build_message, local_host
from core.compression import COMPRESS_OVER
from core.errors import IllegalArgumentError
from core.message_queue import MessageQueue
from core.store.message import Message

log = logging.getLogger(__name__)

# (queues, message, arg) -> the queue, as RocketMQ's MessageQueueSelector.
QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer:
    def __init__(self, broker: Broker, group: str = "DEFAULT_PRODUCER", compress_over: int = COMPRESS_OVER) -> None:
        self.broker = broker
        self.group = group
        self.compress_over = compress_over
        self.host = local_host()
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._background: set[asyncio.Task[SendResult]] = set()

    def message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | list[str] | None = None,
        properties: Mapping[str, str] | None = None,
        sharding_key: str | None = None,
        selector: QueueSelector | None = None,
        selector_arg: Any = None,
    ) -> Message:
        """Build a message and choose its queue."""
        message = build_message(
            topic,
            body,
            tags=tags,
            keys=keys,
            properties=properties,
            born_host=self.host,
            compress_over=self.compress_over,
            message_group=sharding_key,
        )
        queues = self.broker.write_queues(topic)
        if selector is not None:
            chosen = selector(queues, message, selector_arg)
            if chosen.topic != topic or chosen not in queues:
                raise IllegalArgumentError(f"selector chose {chosen}, which is not a write queue of topic {topic!r}")
            message.queue_id = chosen.queue_id
        elif sharding_key is not None:
            message.queue_id = zlib.crc32(sharding_key.encode()) % len(queues)
        else:
            counter = self._round_robin.setdefault(topic, itertools.count())
            message.queue_id = next(counter) % len(queues)
        return message

    async def send(self, topic: str, body: bytes, **options: Any) -> SendResult:
        """Send and wait for the broker's answer (under SYNC_FLUSH: until the message is on disk)."""
        return await self.broker.send(self.message(topic, body, **options))

    def send_async(
        self, topic: str, body: bytes, callback: SendCallback | None = None, **options: Any
    ) -> asyncio.Task[SendResult]:
        """Send in the background. Await the task, or pass `callback(result, error)`."""
        message = self.message(topic, body, **options)
        task = asyncio.get_running_loop().create_task(self.broker.send(message))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if callback is not None:
            task.add_done_callback(lambda t: callback(*_outcome(t)))
        return task

    def send_oneway(self, topic: str, body: bytes, **options: Any) -> None:
        """Send without waiting for, or hearing about, the result (errors are logged)."""
        task = self.send_async(topic, body, **options)
        task.add_done_callback(_log_failure)

    async def send_batch(self, topic: str, bodies: Sequence[bytes], **options: Any) -> list[SendResult]:
        """Send several messages to one queue in one call (RocketMQ's batch: 4 MiB at most, no delay)."""
        messages = [self.message(topic, body, **options) for body in bodies]
        queue_id = messages[0].queue_id if messages else 0
        for message in messages:
            message.queue_id = queue_id
        return await self.broker.send_batch(messages)

    async def shutdown(self) -> None:
        """Wait for background sends to finish."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


def _outcome(task: asyncio.Task[SendResult]) -> tuple[SendResult | None, BaseException | None]:
    if task.cancelled():
        return None, asyncio.CancelledError()
    error = task.exception()
    return (None, error) if error is not None else (task.result(), None)


def _log_failure(task: asyncio.Task[SendResult]) -> None:
    _, error = _outcome(task)
    if error is not None:
        log.warning("oneway send failed: %s", error)
