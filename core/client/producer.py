"""The producer (RocketMQ's DefaultMQProducer), in process.

Queue selection: round robin over the topic's write queues by default; a sharding key keeps one key's messages
in one queue, in order (stable CRC32 of the key, not Python's per-process hash()); or the caller's selector.
A topic with one queue gives global order.

Timeouts and retries (core.client.send_retry): a send, retries included, takes at most `send_msg_timeout_ms`
(3000); `send` and `send_batch` try `retry_times_when_send_failed` (2) more times, `send_async`
`retry_times_when_send_async_failed` (2), `send_oneway` never (RocketMQ). The message gets its UNIQ_KEY before
the first attempt and keeps it in every retry; each attempt sends a fresh copy, because the broker rewrites a
delayed or transactional message in place when it parks it, and adds a message's light queues to its properties.
`send` of a plain message under ASYNC_FLUSH makes its first attempt with the message it built (nobody else holds
it) and copies only for a retry, from the properties as they were before that attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import zlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from core.broker import Broker, SendResult, SendStatus
from core.client.message_codec import build_message, local_host
from core.client.send_retry import DEFAULT_RETRY_TIMES, DEFAULT_SEND_TIMEOUT_MS, SendRetryPolicy, send_with_retries
from core.compression import COMPRESS_OVER
from core.errors import IllegalArgumentError, ServiceNotAvailableError
from core.message_queue import MessageQueue
from core.store.message import PROPERTY_UNIQ_KEY, Message
from core.system_topics import PARKING_PROPERTIES

log = logging.getLogger(__name__)

# (queues, message, arg) -> the queue, as RocketMQ's MessageQueueSelector.
QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer:
    def __init__(
        self,
        broker: Broker,
        group: str = "DEFAULT_PRODUCER",
        compress_over: int = COMPRESS_OVER,
        *,
        send_msg_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        retry_times_when_send_async_failed: int = DEFAULT_RETRY_TIMES,
        retry_another_broker_when_not_store_ok: bool = False,
    ) -> None:
        self.broker = broker
        self.group = group
        self.compress_over = compress_over
        self.send_policy = SendRetryPolicy(
            send_msg_timeout_ms, retry_times_when_send_failed, retry_another_broker_when_not_store_ok
        )
        self.send_async_policy = SendRetryPolicy(
            send_msg_timeout_ms, retry_times_when_send_async_failed, retry_another_broker_when_not_store_ok
        )
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
            counter = self._round_robin.get(topic)
            if counter is None:  # not setdefault: that builds a count() every message, to throw it away
                counter = self._round_robin[topic] = itertools.count()
            message.queue_id = next(counter) % len(queues)
        return message

    async def send(self, topic: str, body: bytes, **options: Any) -> SendResult:
        """Send and wait for the broker's answer (under SYNC_FLUSH: until the message is on disk), retrying as
        `send_policy` says. Raises RequestTimeoutError when the time runs out."""
        message = self.message(topic, body, **options)
        broker = self.broker
        properties = message.properties
        if broker.sends_may_wait or not PARKING_PROPERTIES.isdisjoint(properties):
            return await self.send_message(message, self.send_policy)
        # The message is this send's own and the broker answers without suspending (ASYNC_FLUSH), so the first
        # attempt takes the message itself, outside the retry loop: no copy, no deadline, no loop for the usual
        # send, which succeeds at once. The broker adds to a plain message's properties only (its light queues), so
        # a retry, should the first attempt be refused, sends a copy with the properties as they were before it.
        unique_id = self._unique_id(properties)
        before = dict(properties)
        policy = self.send_policy
        try:
            result = await broker.send(message)
        except ServiceNotAvailableError as exc:
            refused: ServiceNotAvailableError | None = exc
            not_ok: SendResult | None = None
        else:
            if result.status is SendStatus.SEND_OK or not policy.retry_when_not_stored_ok:
                return result
            refused, not_ok = None, result
        send = broker.send
        return await send_with_retries(
            lambda: send(_fresh_copy(message, before)),
            policy,
            _stored_ok,
            f"topic {message.topic!r}: message {unique_id}",
            False,
            refused,
            not_ok,
        )

    async def send_message(self, message: Message, policy: SendRetryPolicy | None = None) -> SendResult:
        """Send a message built by `message`, retrying as `policy` (by default `send_policy`) says."""
        policy = policy or self.send_policy
        properties = message.properties
        unique_id = self._unique_id(properties)
        send = self.broker.send
        return await send_with_retries(
            lambda: send(_fresh_copy(message, properties)),
            policy,
            _stored_ok,
            f"topic {message.topic!r}: message {unique_id}",
            self.broker.sends_may_wait,
        )

    def _unique_id(self, properties: dict[str, str]) -> str:
        """The message's UNIQ_KEY, given one now if it has none: it keeps it in every attempt."""
        unique_id = properties.get(PROPERTY_UNIQ_KEY)
        if unique_id is None:
            unique_id = properties[PROPERTY_UNIQ_KEY] = self.broker.ids.next_id()
        return unique_id

    def send_async(
        self, topic: str, body: bytes, callback: SendCallback | None = None, **options: Any
    ) -> asyncio.Task[SendResult]:
        """Send in the background, retrying as `send_async_policy` says. Await the task, or pass
        `callback(result, error)`."""
        message = self.message(topic, body, **options)
        return self._background_task(self.send_message(message, self.send_async_policy), callback)

    def _background_task(
        self, sending: Coroutine[Any, Any, SendResult], callback: SendCallback | None
    ) -> asyncio.Task[SendResult]:
        task = asyncio.get_running_loop().create_task(sending)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if callback is not None:
            task.add_done_callback(lambda t: callback(*_outcome(t)))
        return task

    def send_oneway(self, topic: str, body: bytes, **options: Any) -> None:
        """Send once, without waiting for or hearing about the result (errors are logged; never retried, as
        RocketMQ's oneway sends)."""
        task = self._background_task(self.broker.send(self.message(topic, body, **options)), None)
        task.add_done_callback(_log_failure)

    async def send_batch(self, topic: str, bodies: Sequence[bytes], **options: Any) -> list[SendResult]:
        """Send several messages to one queue in one call (RocketMQ's batch: 4 MiB at most, no delay), retrying the
        batch as `send` does."""
        messages = [self.message(topic, body, **options) for body in bodies]
        queue_id = messages[0].queue_id if messages else 0
        ids = self.broker.ids.next_ids(len(messages))
        for message, unique_id in zip(messages, ids, strict=True):
            message.queue_id = queue_id
            message.properties.setdefault(PROPERTY_UNIQ_KEY, unique_id)
        # The broker adds nothing to a batch's messages that a retry would add twice: no copies needed.
        send_batch = self.broker.send_batch
        return await send_with_retries(
            lambda: send_batch(messages),
            self.send_policy,
            lambda results: all(result.status is SendStatus.SEND_OK for result in results),
            f"topic {topic!r}: batch of {len(messages)} from message {ids[0] if ids else None}",
            self.broker.sends_may_wait,
        )

    async def shutdown(self) -> None:
        """Wait for background sends to finish."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)


def _fresh_copy(message: Message, properties: dict[str, str]) -> Message:
    """A copy for one attempt, with a copy of `properties` of its own (the broker adds to them). Built field by
    field: dataclasses.replace took a tenth of a send."""
    return Message(
        message.topic,
        message.body,
        message.queue_id,
        dict(properties),
        message.flag,
        message.sys_flag,
        message.born_timestamp,
        message.born_host,
        message.reconsume_times,
        message.prepared_transaction_offset,
        message.light_queues,
    )


def _stored_ok(result: SendResult) -> bool:
    return result.status is SendStatus.SEND_OK


def _outcome(task: asyncio.Task[SendResult]) -> tuple[SendResult | None, BaseException | None]:
    if task.cancelled():
        return None, asyncio.CancelledError()
    error = task.exception()
    return (None, error) if error is not None else (task.result(), None)


def _log_failure(task: asyncio.Task[SendResult]) -> None:
    _, error = _outcome(task)
    if error is not None:
        log.warning("oneway send failed: %s", error)
