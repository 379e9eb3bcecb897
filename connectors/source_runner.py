"""The source runner: polls a source task and appends its records to core topics, as connectors/__init__.py
designs it.

- Each record carries `CONNECT_TASK`, `CONNECT_PARTITION` (the partition key) and `CONNECT_POSITION` in its
  properties, so a record and its position are stored in one append.
- All records of one source partition go to one queue (CRC32 of the partition key over the topic's write queues),
  in poll order.
- Positions are committed to the table `connect-offsets` (position_table.py) with the queue offset they cover,
  every `COMMIT_INTERVAL_S` and when the task stops; a partition's entry is written before its first record.
- At start, each partition's queue is read from the committed offset to its end, and the last position the
  connector's records of that partition carry is the one the task resumes from: nothing lost, nothing repeated.
- A failing `poll` fails the task; a failing append is retried with backoff for `errors.retry.timeout` ms first.
- On a cluster the task runs on its owner's node and appends to that node's group. A partition whose last commit
  was made on another node (the task moved) resumes from that committed position, without a scan (the other group
  may be down): what that node appended after its last commit, up to COMMIT_INTERVAL_S of records, is read from the
  source and appended again (at least once across a node's death; exactly once across a restart of one node).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import zlib
from typing import Any

from connectors.api import (
    PROPERTY_PARTITION,
    PROPERTY_POSITION,
    PROPERTY_TASK,
    SourceRecord,
    SourceTask,
    TaskContext,
    partition_key,
)
from connectors.position_table import CommittedPosition, PositionTable
from connectors.task_runner import ErrorPolicy, TaskRunner
from core import MAX_BATCH_BYTES, Broker, CoreError, Message, PullStatus, build_message

log = logging.getLogger(__name__)

# Positions reach the table this often; a crash costs a scan of what was appended since (not a repeat).
COMMIT_INTERVAL_S = 1.0
# An empty poll is followed by this wait before the next.
IDLE_POLL_S = 0.1
RECOVERY_BATCH = 256
# Recovery reads are nobody's consumer group: this name only labels them.
RECOVERY_GROUP = "CONNECT_SOURCE_RECOVERY"


def queue_of(partition: str, queue_count: int) -> int:
    return zlib.crc32(partition.encode()) % queue_count


class SourceRunner(TaskRunner):
    task: SourceTask

    def __init__(
        self,
        broker: Broker,
        positions: PositionTable,
        connector: str,
        task_id: int,
        task: SourceTask,
        config: dict[str, Any],
        paused: bool = False,
    ) -> None:
        super().__init__(connector, task_id, task, config, paused)
        self.broker = broker
        self.positions = positions
        self.policy = ErrorPolicy.of(config)
        self.task_property = f"{connector}/{task_id}"
        self.group = broker.config.broker_name
        # Where each partition's records go and the position committed; `_pending` holds what is sent, not committed.
        self._entries: dict[str, CommittedPosition] = {}
        self._pending: dict[str, CommittedPosition] = {}

    async def _run(self) -> None:
        self._entries = await self.recover()
        known = {key: entry.position for key, entry in self._entries.items() if entry.position is not None}
        await self.task.start(self.config, TaskContext(self.connector, self.task_id, known))
        self._task_started = True
        loop = asyncio.get_running_loop()
        last_commit = loop.time()
        while True:
            await self._gate()
            async with self._busy:
                if self.paused:
                    continue
                records = await self.task.poll()
                if records:
                    await self._send(records)
                if loop.time() - last_commit >= COMMIT_INTERVAL_S:
                    await self._commit()
                    last_commit = loop.time()
            if not records:
                await asyncio.sleep(IDLE_POLL_S)

    async def _finish(self) -> None:
        try:
            await self._commit()
        except Exception:
            log.exception("%s: positions not committed at stop; they are found again by the scan at start", self.label)
        await super()._finish()

    async def recover(self) -> dict[str, CommittedPosition]:
        """The connector's committed positions, moved on past every record of theirs found in the queues."""
        recovered = {}
        prefix = f"{self.connector}/"
        self.broker.create_groups([RECOVERY_GROUP])  # ours, whatever auto_create_group says
        for key, entry in self.positions.of_connector(self.connector).items():
            if entry.group not in ("", self.group):  # committed on another node: resumed as committed
                recovered[key] = entry
                continue
            position, offset = entry.position, entry.offset
            read = max(offset, self.broker.min_offset(entry.topic, entry.queue_id))
            while True:
                try:
                    got = await self.broker.pull(RECOVERY_GROUP, entry.topic, entry.queue_id, read, RECOVERY_BATCH)
                except CoreError as exc:
                    log.warning(
                        "%s: cannot read %s/%d to recover positions: %s", self.label, entry.topic, entry.queue_id, exc
                    )
                    break
                if got.status is not PullStatus.FOUND:
                    break
                for message in got.messages:
                    properties = message.properties
                    if properties.get(PROPERTY_PARTITION) == key and properties.get(PROPERTY_TASK, "").startswith(
                        prefix
                    ):
                        position = json.loads(properties[PROPERTY_POSITION])
                        offset = message.queue_offset + 1
                read = got.next_begin_offset
            recovered[key] = CommittedPosition(position, entry.topic, entry.queue_id, offset)
            if offset != entry.offset:
                log.info("%s: partition %s recovered to %s (queue offset %d)", self.label, key, position, offset)
        return recovered

    async def _entry(self, key: str, topic: str) -> CommittedPosition:
        """Where the partition's records go; a new partition's entry is committed before its first record."""
        entry = self._pending.get(key) or self._entries.get(key)
        if entry is not None and entry.topic == topic and entry.group in ("", self.group):
            return entry
        queue_id = queue_of(key, len(self.broker.write_queues(topic)))
        entry = CommittedPosition(
            entry.position if entry else None, topic, queue_id, self.broker.max_offset(topic, queue_id), self.group
        )
        await self.positions.commit(self.connector, key, entry)
        self._entries[key] = entry
        self._pending.pop(key, None)
        return entry

    async def _send(self, records: list[SourceRecord]) -> None:
        # Consecutive records for one queue go in one batch append, in poll order.
        runs: list[list[tuple[str, dict[str, Any], Message]]] = []
        run_bytes = 0
        for record in records:
            key = partition_key(record.partition)
            entry = await self._entry(key, record.topic)
            properties = {
                **record.properties,
                PROPERTY_TASK: self.task_property,
                PROPERTY_PARTITION: key,
                PROPERTY_POSITION: json.dumps(record.position, sort_keys=True, separators=(",", ":")),
            }
            message = build_message(
                record.topic,
                record.body,
                tags=record.tags,
                keys=list(record.keys),
                properties=properties,
                queue_id=entry.queue_id,
            )
            last = runs[-1][-1][2] if runs else None
            if (
                last is None
                or (last.topic, last.queue_id) != (message.topic, message.queue_id)
                or run_bytes + len(message.body) > MAX_BATCH_BYTES
            ):
                runs.append([])
                run_bytes = 0
            runs[-1].append((key, record.position, message))
            run_bytes += len(message.body)
        for run in runs:
            messages = [message for _, _, message in run]
            results = await self.policy.retry(
                f"{self.label}: append of {len(messages)} records", functools.partial(self.broker.send_batch, messages)
            )
            for (key, position, message), result in zip(run, results, strict=True):
                self._pending[key] = CommittedPosition(
                    position, message.topic, message.queue_id, result.queue_offset + 1, self.group
                )

    async def _commit(self) -> None:
        pending, self._pending = self._pending, {}
        for key, entry in pending.items():
            await self.positions.commit(self.connector, key, entry)
            self._entries[key] = entry
