"""The sink runner: reads a sink task's queues as the consumer group `connect-<name>`, hands the records to the
task in batches (`put`), has it make them durable (`flush`), then commits the offsets to the core.

- Offsets: at start a queue is read from the task's `stored_offsets` when it gives one (exactly-once sinks),
  else from the group's committed offset, else from the queue's first message (Kafka Connect's `earliest`).
  An offset is committed only after `flush` returned, so a crash delivers again rather than loses.
- Memory: at most `batch.size` records (default `DEFAULT_BATCH_SIZE`) and one pull's 4 MiB per queue are held.
- Errors: a failing `put` is retried with backoff for `errors.retry.timeout` ms. Then, with `errors.tolerance`
  none, the task fails (its status carries a trace naming the record, RecordFailedError); with all, the records
  of the batch are put one by one (each retried the same way) and those that still fail go to the dead-letter
  topic, with the error in properties (api.PROPERTY_ERROR*, unless errors.deadletterqueue.context.headers.enable
  is false), or are skipped without one, and the task goes on. `errors.log.enable` logs each failing record.
  A `put` that raises must not have written any record of its batch, or raise api.RecordsFailed naming the
  records it could not write (the others count as written). A failing `flush` fails the task after its retries
  whatever the tolerance: records already given to `put` cannot be skipped one by one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from typing import Any

from connectors.api import (
    PROPERTY_ERROR,
    PROPERTY_ERROR_CONNECTOR,
    PROPERTY_ERROR_ORIGIN,
    QueueRef,
    RecordsFailed,
    SinkRecord,
    SinkTask,
    TaskContext,
)
from connectors.errors import RecordFailedError
from connectors.remote_reader import RemoteReader
from connectors.task_runner import Arrivals, Backoff, ErrorPolicy, TaskRunner
from core import (
    MAX_PROPERTIES_LENGTH,
    Broker,
    MessageQueue,
    Producer,
    PullConsumer,
    PullResult,
    PullStatus,
    StoredMessage,
)

log = logging.getLogger(__name__)

# Records handed to one put (Kafka Connect's consumer max.poll.records is 500).
DEFAULT_BATCH_SIZE = 500
# How long an idle runner waits for an arrival before it reads again anyway.
IDLE_WAIT_S = 1.0
# errors.log.include.messages: a logged body is cut to this, so one large record cannot flood the log.
MAX_LOGGED_BODY = 1000
# An error text in a dead-letter record's properties is cut to this (the properties' 64 KiB holds them all).
MAX_ERROR_TEXT = 4000


def sink_group(connector: str) -> str:
    return f"connect-{connector}"


def sink_record(message: StoredMessage, broker: str = "") -> SinkRecord:
    return SinkRecord(
        topic=message.topic,
        queue_id=message.queue_id,
        queue_offset=message.queue_offset,
        body=message.body,
        keys=message.keys,
        tags=message.tags,
        properties=message.public_properties,  # without the core's own: a copy sent again must not carry them
        born_timestamp_ms=message.born_timestamp,
        store_timestamp_ms=message.store_timestamp,
        msg_id=message.unique_id or message.offset_msg_id,
        broker=broker,
    )


def _ref(queue: MessageQueue) -> QueueRef:
    return QueueRef(queue.topic, queue.queue_id, queue.broker_name)


def queue_key(queue: MessageQueue) -> str:
    return f"{queue.broker_name}/{queue.topic}/{queue.queue_id}"


def error_text(exc: BaseException) -> str:
    """The exception as one property value: its type and message, without the store's separators."""
    text = "".join(traceback.format_exception_only(exc)).strip()
    return text.replace("\x01", " ").replace("\x02", " ")[:MAX_ERROR_TEXT]


class SinkRunner(TaskRunner):
    task: SinkTask

    def __init__(
        self,
        broker: Broker,
        arrivals: Arrivals,
        connector: str,
        task_id: int,
        task: SinkTask,
        config: dict[str, Any],
        queues: list[MessageQueue],
        paused: bool = False,
        idle_wait_s: float = IDLE_WAIT_S,
        remote: RemoteReader | None = None,
        clustered: bool = False,
    ) -> None:
        """`queues` may name other broker groups' queues when `remote` reads them (remote_reader.py); the task's
        `stored_offsets` is asked for every queue, each named with its group. `clustered`: the task runs on a
        cluster (TaskContext.cluster)."""
        super().__init__(connector, task_id, task, config, paused)
        # With nothing to read, how long to wait for an arrival before reading again anyway: arrivals wake the
        # runner at once, this only bounds a wake-up that was missed.
        self.idle_wait_s = idle_wait_s
        self.broker = broker
        self.arrivals = arrivals
        self.queues = queues
        self.policy = ErrorPolicy.of(config)
        self.batch_size = max(1, int(config.get("batch.size") or DEFAULT_BATCH_SIZE))
        # The runtime's own group: it exists whatever auto_create_group says (off in production).
        broker.create_groups([sink_group(connector)])
        # Its client id names the task: the group's member list (admin API, dashboard) says who reads it.
        self.consumer = PullConsumer(broker, sink_group(connector), client_id=f"connector {connector} task {task_id}")
        self.producer = Producer(broker, sink_group(connector))
        self.remote = remote
        self.clustered = clustered
        own = self.group = broker.config.broker_name
        self._remote_queues = {queue for queue in queues if queue.broker_name != own} if remote is not None else set()
        # Next offset to read per queue, as committed (after flush); another group's queue is missing until that
        # group answered where to start.
        self.offsets: dict[MessageQueue, int] = {}
        self._unreachable: set[MessageQueue] = set()  # other groups' queues whose last read failed (logged once)
        self.dead_lettered = 0

    async def _run(self) -> None:
        context = TaskContext(self.connector, self.task_id, group=self.group, cluster=self.clustered)
        await self.task.start(self.config, context)
        self._task_started = True
        refs = {_ref(queue): queue for queue in self.queues}
        stored = await self.task.stored_offsets(list(refs))
        if self.remote is not None:
            await self.remote.start()
        for ref, queue in refs.items():
            if queue not in self._remote_queues:
                continue
            if ref in stored:  # an exactly-once sink's: wherever the group's committed offset is
                self.offsets[queue] = stored[ref]
            else:
                await self._start_remote(queue)
        for ref, queue in refs.items():
            if queue in self._remote_queues:
                continue
            if ref in stored:
                offset = stored[ref]
            else:
                offset = self.consumer.committed(queue)
                if offset < 0:
                    offset = self.broker.min_offset(queue.topic, queue.queue_id)
            self.offsets[queue] = offset
            self.consumer.commit(queue, offset)
        log.info("%s reads %s", self.label, {queue_key(q): o for q, o in self.offsets.items()})
        # Set by every arrival in the queues; cleared before each read, so after a read that reached the end of
        # every queue the runner waits only if nothing arrived since (one read per batch, not one more to find
        # the queues empty: with thousands of EventBridge targets of an event or two each, that read doubled
        # the reads).
        arrived = self.arrivals.flag((queue.topic, queue.queue_id) for queue in self.queues)
        if self.remote is not None:
            for queue in self._remote_queues:
                self.remote.watch(queue, self.offsets_of, arrived)
        # A task that keeps SinkTask's flush (nothing to make durable: each put delivered its records) is not
        # called for it after every batch.
        flushes = type(self.task).flush is not SinkTask.flush
        # A live member of its group while it reads (paused too: it keeps its positions), not once stopped or failed.
        self.consumer.join(sorted({queue.topic for queue in self.queues}))
        try:
            while True:
                await self._gate()
                async with self._busy:
                    if self.paused:
                        continue
                    arrived.clear()
                    records, next_offsets, more = await self._fetch()
                    if records:
                        await self._deliver(records)
                        if flushes:
                            flushed = {_ref(q): o for q, o in next_offsets.items()}
                            await self.policy.retry(f"{self.label}: flush", functools.partial(self.task.flush, flushed))
                        for queue, offset in next_offsets.items():
                            if offset != self.offsets.get(queue):
                                self._commit(queue, offset)
                        self.offsets = next_offsets
                    if self.remote is not None:
                        self.remote.read.set()
                if not more and not arrived.is_set():
                    await arrived.wait(self.idle_wait_s)
        finally:
            self.consumer.leave()
            arrived.close()
            if self.remote is not None:
                await self.remote.close()

    def offsets_of(self, queue: MessageQueue) -> int | None:
        return self.offsets.get(queue)

    def _commit(self, queue: MessageQueue, offset: int) -> None:
        if queue in self._remote_queues:
            assert self.remote is not None
            self.remote.commit(queue, offset)
        else:
            self.consumer.commit(queue, offset)

    async def _start_remote(self, queue: MessageQueue) -> bool:
        """Where another group's queue is read from (its committed offset there); False while it does not answer."""
        assert self.remote is not None
        try:
            self.offsets[queue] = await self.remote.start_offset(queue)
        except Exception as exc:  # down or electing: its messages wait there
            self._unreachable_now(queue, exc)
            return False
        return True

    def _unreachable_now(self, queue: MessageQueue, exc: Exception) -> None:
        if queue not in self._unreachable:
            self._unreachable.add(queue)
            log.warning("%s: %s on broker group %s not read for now: %s",
                        self.label, queue.topic, queue.broker_name, exc)  # fmt: skip

    async def _pull(self, queue: MessageQueue, offset: int, count: int) -> PullResult | None:
        if queue not in self._remote_queues:
            return await self.consumer.pull(queue, offset, count)
        assert self.remote is not None
        try:
            got = await self.remote.pull(queue, offset, count)
        except Exception as exc:
            self._unreachable_now(queue, exc)
            return None
        if queue in self._unreachable:
            self._unreachable.discard(queue)
            log.info("%s: %s on broker group %s read again from %d", self.label, queue.topic, queue.broker_name, offset)
        return got

    async def _fetch(self) -> tuple[list[SinkRecord], dict[MessageQueue, int], bool]:
        """Up to batch_size records from the queues, in queue order per queue, the offsets past them, and whether
        a queue has more than was read (past the batch, or past what one read returns)."""
        records: list[SinkRecord] = []
        offsets = dict(self.offsets)
        more = False
        for queue in self.queues:
            room = self.batch_size - len(records)
            if room <= 0:
                more = True  # this queue was not read
                break
            if queue not in offsets:
                if not await self._start_remote(queue):
                    continue
                offsets[queue] = self.offsets[queue]
            got = await self._pull(queue, offsets[queue], room)
            if got is None:
                continue
            if got.status is PullStatus.FOUND:
                records.extend(sink_record(message, queue.broker_name) for message in got.messages)
                offsets[queue] = got.next_begin_offset
                more = more or got.next_begin_offset < got.max_offset
            elif got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset != offsets[queue]:
                log.warning(
                    "%s: %s/%d offset %d is out of range (retention?); going on from %d",
                    self.label,
                    queue.topic,
                    queue.queue_id,
                    offsets[queue],
                    got.next_begin_offset,
                )
                offsets[queue] = got.next_begin_offset
                more = True  # read again from there
        # Queues read first get a turn last next time, so one busy queue does not starve the others.
        if len(self.queues) > 1:
            self.queues = self.queues[1:] + self.queues[:1]
        return records, offsets, more

    async def _deliver(self, records: list[SinkRecord]) -> None:
        failed, named = await self._put(records)
        if not failed:
            return
        if not self.policy.tolerate_all:
            record, exc = failed[0]
            self._log_failure(record, exc)
            raise RecordFailedError(self.connector, self.task_id, _origin(record), error_text(exc)) from exc
        if not named and len(failed) > 1:
            # The whole batch failed: find the records that fail alone.
            isolated = []
            for record in records:
                isolated += (await self._put([record]))[0]
            failed = isolated
        for record, exc in failed:
            await self._dead_letter(record, exc)

    async def _put(self, records: list[SinkRecord]) -> tuple[list[tuple[SinkRecord, BaseException]], bool]:
        """Put with retries; the records that still fail with their errors, and whether the task named them
        (api.RecordsFailed) rather than failing the whole call."""
        started = asyncio.get_running_loop().time()
        backoff: Backoff | None = None  # made on the first failure: most puts succeed at once
        remaining = records
        while True:
            try:
                await self.task.put(remaining)
                return [], False
            except RecordsFailed as exc:
                failed, named = exc.failures, True
            except Exception as exc:
                failed, named = [(record, exc) for record in remaining], False
            if backoff is None:
                backoff = Backoff(self.policy, started)
            wait = backoff.next_wait()
            if wait is None:
                return failed, named
            remaining = [record for record, _ in failed]
            log.warning(
                "%s: put of %d records failed (attempt %d; again in %.2f s): %s",
                self.label,
                len(remaining),
                backoff.attempts,
                wait,
                failed[0][1],
            )
            await asyncio.sleep(wait)

    async def _dead_letter(self, record: SinkRecord, exc: BaseException) -> None:
        self.dead_lettered += 1
        self._log_failure(record, exc)
        topic = self.policy.dead_letter_topic
        if not topic:
            log.debug("%s: record %s skipped (errors.tolerance=all, no dead-letter topic)", self.label, _origin(record))
            return
        properties = dict(record.properties)
        if self.policy.dead_letter_context:
            properties[PROPERTY_ERROR_CONNECTOR] = self.connector
            properties[PROPERTY_ERROR_ORIGIN] = _origin(record)
            room = MAX_PROPERTIES_LENGTH - sum(len(k) + len(v) + 2 for k, v in properties.items()) - 64
            properties[PROPERTY_ERROR] = error_text(exc)[: max(0, room)]
        await self.producer.send(topic, record.body, properties=properties)
        log.debug("%s: record %s sent to dead-letter topic %r", self.label, _origin(record), topic)

    def _log_failure(self, record: SinkRecord, exc: BaseException) -> None:
        """errors.log.enable: one ERROR line per failing record (Kafka Connect's LogReporter)."""
        if not self.policy.log_errors:
            return
        where = (
            "task fails"
            if not self.policy.tolerate_all
            else (f"sent to {self.policy.dead_letter_topic!r}" if self.policy.dead_letter_topic else "skipped")
        )
        details = ""
        if self.policy.log_messages:
            details = f"; body {record.body[:MAX_LOGGED_BODY]!r}, properties {record.properties}"
        log.error("%s: record %s failed (%s): %s%s", self.label, _origin(record), where, error_text(exc), details)


def _origin(record: SinkRecord) -> str:
    return f"{record.topic}/{record.queue_id}/{record.queue_offset}"
