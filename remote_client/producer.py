"""The producer over remoting (RocketMQ's DefaultMQProducer on a cluster): core.Producer's calls, each send going
to the master of the broker group that owns the queue chosen.

Queue choice: round robin over the topic's write queues on every group (topic_route.py), passing over the groups
that failed or answered slowly (latency_fault.py, RocketMQ's sendLatencyFaultEnable, on by default here); a
sharding key or a selector fixes the queue, as in process (a fixed queue is never moved to another group: that
would break the key's order). A topic not created yet is sent to on the auto-create template's groups.

Retries (RocketMQ's sendDefaultImpl): within `send_msg_timeout_ms` in all, `retry_times_when_send_failed` more
attempts, each on another group than the one that just failed, after a failure a retry may cure: a broker that
cannot be reached or does not answer in time, or refuses with TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR
or NO_PERMISSION (RocketMQ's retryResponseCodes: another group may take it). An attempt that timed out may have been
stored: its retry stores the message again, with the same UNIQ_KEY (at least once, as RocketMQ). A message the
broker refuses as such (MESSAGE_ILLEGAL) fails at once. Only a SEND_OK (or, without retry_another_broker_when_not_
store_ok, another stored status) is answered: nothing the caller is told was stored was not.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from core import (
    COMPRESS_OVER,
    DEFAULT_RETRY_TIMES,
    DEFAULT_SEND_TIMEOUT_MS,
    PROPERTY_UNIQ_KEY,
    BrokerError,
    IllegalArgumentError,
    Message,
    MessageQueue,
    NoPermissionError,
    RequestTimeoutError,
    SendResult,
    SendRetryPolicy,
    SendStatus,
    ServiceNotAvailableError,
    TopicNotFoundError,
    UniqueIdGenerator,
    build_message,
)
from remote_client.cluster import Cluster, local_ip
from remote_client.latency_fault import LatencyFaults
from remote_client.send_request import batch_request, send_request, send_result

log = logging.getLogger(__name__)

# Refusals another group may not give (RocketMQ's retryResponseCodes, with the errors the core raises for them);
# a broker that cannot be reached or does not answer is ServiceNotAvailableError or RequestTimeoutError.
RETRIED = (ServiceNotAvailableError, RequestTimeoutError, TopicNotFoundError, NoPermissionError)

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
SendCallback = Callable[[SendResult | None, BaseException | None], None]


def _retried(error: Exception) -> bool:
    # BrokerError is SYSTEM_ERROR's (and every other unnamed code's) class; its subclasses are named refusals.
    return isinstance(error, RETRIED) or type(error) is BrokerError


def _now_ms() -> float:
    return time.monotonic() * 1000


class Producer:
    def __init__(
        self,
        cluster: Cluster,
        group: str = "DEFAULT_PRODUCER",
        compress_over: int = COMPRESS_OVER,
        *,
        send_msg_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        retry_times_when_send_async_failed: int = DEFAULT_RETRY_TIMES,
        retry_another_broker_when_not_store_ok: bool = False,
        send_latency_fault_enable: bool = True,
    ) -> None:
        self.cluster = cluster
        self.group = group
        self.compress_over = compress_over
        self.send_policy = SendRetryPolicy(
            send_msg_timeout_ms, retry_times_when_send_failed, retry_another_broker_when_not_store_ok
        )
        self.send_async_policy = SendRetryPolicy(
            send_msg_timeout_ms, retry_times_when_send_async_failed, retry_another_broker_when_not_store_ok
        )
        self.faults = LatencyFaults() if send_latency_fault_enable else None
        self.host = local_ip()
        self._ids = UniqueIdGenerator(self.host)
        self._round_robin = itertools.count()
        self._background: set[asyncio.Task[Any]] = set()
        cluster.add_producer(group)
        self._started = False

    async def start(self) -> None:
        """Make the group known to the brokers (a heartbeat); sends start the cluster's routes on their own."""
        await self.cluster.start()
        if not self._started:
            self._started = True
            await self.cluster.heartbeat()

    # --- building ---

    def message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | list[str] | None = None,
        properties: Mapping[str, str] | None = None,
        sharding_key: str | None = None,
    ) -> Message:
        """Build a message with its UNIQ_KEY (the queue is chosen when it is sent)."""
        message = build_message(
            topic, body, tags=tags, keys=keys, properties=properties, born_host=self.host,
            compress_over=self.compress_over, message_group=sharding_key,
        )  # fmt: skip
        message.properties.setdefault(PROPERTY_UNIQ_KEY, self._ids.next_id())
        return message

    async def _fixed_queue(
        self, message: Message, sharding_key: str | None, selector: QueueSelector | None, selector_arg: Any
    ) -> MessageQueue | None:
        if selector is None and sharding_key is None:
            return None
        queues = await self._write_queues(message.topic)
        if selector is not None:
            chosen = selector(queues, message, selector_arg)
            if chosen.topic != message.topic or chosen not in queues:
                raise IllegalArgumentError(
                    f"selector chose {chosen}, which is not a write queue of topic {message.topic!r}"
                )
            return chosen
        assert sharding_key is not None
        return queues[zlib.crc32(sharding_key.encode()) % len(queues)]

    async def _write_queues(self, topic: str) -> list[MessageQueue]:
        route = await self.cluster.route_or_template(topic)
        queues = route.write_queues()
        if not queues:
            # RocketMQ's tryToFindTopicPublishInfo: a route with no writable queue is asked for again, as a group's
            # new master (elected under automatic failover, or restarted) may have registered since.
            self.cluster.forget_route(topic)
            queues = (await self.cluster.route_or_template(topic)).write_queues()
        if not queues:
            raise ServiceNotAvailableError(f"topic {topic!r} has no writable queue on a broker group with a master")
        return queues

    # --- sending ---

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        sharding_key: str | None = None,
        selector: QueueSelector | None = None,
        selector_arg: Any = None,
        **options: Any,
    ) -> SendResult:
        """Send and wait for the broker's answer, retrying as the module docstring says. Raises RequestTimeoutError
        when the time runs out."""
        message = self.message(topic, body, sharding_key=sharding_key, **options)
        fixed = await self._fixed_queue(message, sharding_key, selector, selector_arg)
        return await self.send_message(message, fixed)

    async def send_message(
        self, message: Message, queue: MessageQueue | None = None, policy: SendRetryPolicy | None = None
    ) -> SendResult:
        """Send a message built by `message`, to `queue` if given, else to the queues of its topic in turn, retrying
        as `policy` (by default `send_policy`) says."""

        def request(chosen: MessageQueue) -> Any:
            return send_request(self.group, chosen, message)

        unique_id = message.unique_id or ""
        results = await self._send_with_retries(
            message.topic, f"message {unique_id}", queue, policy or self.send_policy, request, [unique_id]
        )
        return results[0]

    def send_async(
        self, topic: str, body: bytes, callback: SendCallback | None = None, **options: Any
    ) -> asyncio.Task[SendResult]:
        """Send in the background, retrying `retry_times_when_send_async_failed` times. Await the task, or pass
        `callback(result, error)`."""

        async def sending() -> SendResult:
            sharding_key = options.pop("sharding_key", None)
            selector, selector_arg = options.pop("selector", None), options.pop("selector_arg", None)
            message = self.message(topic, body, sharding_key=sharding_key, **options)
            fixed = await self._fixed_queue(message, sharding_key, selector, selector_arg)
            return await self.send_message(message, fixed, self.send_async_policy)

        task = asyncio.get_running_loop().create_task(sending())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if callback is not None:
            task.add_done_callback(lambda t: callback(*_outcome(t)))
        return task

    def send_oneway(self, topic: str, body: bytes, **options: Any) -> None:
        """Send once as a oneway request: no reply comes, so nothing is known of the result (a failure to reach
        the broker is logged; never retried), as RocketMQ's sendOneway."""

        async def sending() -> None:
            sharding_key = options.pop("sharding_key", None)
            selector, selector_arg = options.pop("selector", None), options.pop("selector_arg", None)
            message = self.message(topic, body, sharding_key=sharding_key, **options)
            queue = await self._fixed_queue(message, sharding_key, selector, selector_arg)
            if queue is None:
                queues = await self._write_queues(topic)
                counter = next(self._round_robin)
                now = _now_ms()
                queue = self.faults.choose(queues, counter, None, now) if self.faults else queues[counter % len(queues)]
            await self.cluster.oneway(queue.broker_name, send_request(self.group, queue, message))

        task = asyncio.get_running_loop().create_task(sending())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)

    async def send_batch(
        self, topic: str, bodies: Sequence[bytes], *, sharding_key: str | None = None, **options: Any
    ) -> list[SendResult]:
        """Several messages to one queue in one request (RocketMQ's batch: 4 MiB at most, no delay), retried as
        `send` is."""
        if not bodies:
            raise IllegalArgumentError("a batch needs at least one message")
        messages = [self.message(topic, body, sharding_key=sharding_key, **options) for body in bodies]
        fixed = await self._fixed_queue(messages[0], sharding_key, None, None)

        def request(chosen: MessageQueue) -> Any:
            return batch_request(self.group, chosen, messages)

        unique_ids = [message.unique_id or "" for message in messages]
        what = f"batch of {len(messages)} from message {unique_ids[0]}"
        return await self._send_with_retries(topic, what, fixed, self.send_policy, request, unique_ids)

    async def _send_with_retries(
        self,
        topic: str,
        which: str,
        fixed: MessageQueue | None,
        policy: SendRetryPolicy,
        request: Callable[[MessageQueue], Any],
        unique_ids: list[str],
    ) -> list[SendResult]:
        what = f"topic {topic!r}: {which}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.timeout_ms / 1000
        attempts = policy.retries + 1
        last_failed: str | None = None
        error: Exception | None = None
        not_ok: list[SendResult] | None = None
        for number in range(1, attempts + 1):
            left = deadline - loop.time()
            if left <= 0:
                raise _timed_out(what, policy.timeout_ms, number - 1, error, not_ok is not None)
            if fixed is not None:
                queue = fixed
            else:
                queues = await self._write_queues(topic)
                counter = next(self._round_robin)
                if self.faults is not None:
                    queue = self.faults.choose(queues, counter, last_failed, _now_ms())
                else:
                    queue = _avoiding(queues, counter, last_failed)
            began = _now_ms()
            try:
                reply = await self.cluster.invoke(queue.broker_name, request(queue), left)
                results = send_result(reply, queue, unique_ids, f"broker {queue.broker_name}")
            except Exception as exc:
                if self.faults is not None:
                    self.faults.update(queue.broker_name, _now_ms() - began, True, _now_ms())
                if not _retried(exc):
                    raise
                error, last_failed = exc, queue.broker_name
                if not isinstance(exc, RequestTimeoutError | TopicNotFoundError | NoPermissionError):
                    self.cluster.forget_route(topic)  # the group may be gone: ask the NameServers again
                if number < attempts:
                    log.warning("%s: attempt %d of %d failed on broker %s (%s); trying again", what, number,
                                attempts, queue.broker_name, exc)  # fmt: skip
                continue
            if self.faults is not None:
                self.faults.update(queue.broker_name, _now_ms() - began, False, _now_ms())
            if all(r.status is SendStatus.SEND_OK for r in results) or not policy.retry_when_not_stored_ok:
                return results
            not_ok, last_failed = results, queue.broker_name
        if not_ok is not None:
            return not_ok
        assert error is not None
        if attempts == 1:
            raise error
        times = f"{attempts} times"
        if isinstance(error, RequestTimeoutError):
            raise RequestTimeoutError(f"{what}: tried {times}, the last time: {error}; the message may have been"
                                      " stored: look it up by its UNIQ_KEY before sending it again")  # fmt: skip
        final = type(error)(f"{what}: tried {times}, the last time: {error}") if type(error) in RETRIED else error
        raise final

    async def shutdown(self) -> None:
        """Wait for background sends to finish, and leave the cluster's heartbeats."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.cluster.remove_producer(self.group)


def _avoiding(queues: Sequence[MessageQueue], counter: int, last_failed: str | None) -> MessageQueue:
    for step in range(len(queues)):
        queue = queues[(counter + step) % len(queues)]
        if queue.broker_name != last_failed:
            return queue
    return queues[counter % len(queues)]


def _timed_out(what: str, timeout_ms: int, attempts: int, error: Exception | None, stored: bool) -> Exception:
    if stored:
        outcome = "it was stored but not confirmed: look it up by its UNIQ_KEY before sending it again"
    elif error is not None:
        outcome = f"the last attempt failed: {error}"
    else:
        outcome = "it was not sent"
    return RequestTimeoutError(f"{what}: send_msg_timeout_ms {timeout_ms} ran out after {attempts} attempts; {outcome}")


def _outcome(task: asyncio.Task[SendResult]) -> tuple[SendResult | None, BaseException | None]:
    if task.cancelled():
        return None, asyncio.CancelledError()
    error = task.exception()
    return (None, error) if error is not None else (task.result(), None)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("oneway send failed: %s", task.exception())
