"""The Spark sink connector (`spark-sink`): a topic's messages as a partitioned Parquet table, exactly once.

See the package docstring for the design; this module holds the config, the task's record handling (offsets
already in the table are skipped, bad JSON is reported per record) and the Spark job that writes one batch.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectors.api import (
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Connector,
    Importance,
    QueueRef,
    RecordsFailed,
    SinkRecord,
    SinkTask,
    TaskContext,
    at_least,
)
from spark_sink import spark_session
from spark_sink.batch_writer import BatchWriter
from spark_sink.errors import BadRecordError, SchemaError, TableLockedError, TableStateError
from spark_sink.json_fields import converter, parse_ddl
from spark_sink.local_frame import data_frame
from spark_sink.table_commit import Manifest, TableCommitter
from spark_sink.table_schema import RowBuilder, TableLayout

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
# Each batch is one Spark job (~0.1-0.3 s of fixed cost) and a few files per partition: large batches amortise
# both; 20,000 rows of 1 KiB bodies is 20 MiB in memory.
DEFAULT_BATCH_SIZE = 20_000
DEFAULT_BATCH_INTERVAL_MS = 5_000
# Rows waiting for Spark, in batches: while one is written, two more may wait (and are then written as one).
PENDING_BATCHES = 2
DEFAULT_PARTITION_COLUMNS = ["topic", "dt"]
SPARK_PREFIX = "spark."
# On a cluster a task moving to this node may find the table still locked by the node it left, which is finishing its
# last batch (a stop flushes it: a Spark job, seconds). A killed node's lock is released by the kernel at once.
CLUSTER_LOCK_WAIT_S = 60.0
LOCK_POLL_S = 0.5


def _close_if_opened(table: TableCommitter, opening: asyncio.Future[Manifest]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        table.close()


async def _open_table(table: TableCommitter, group: str, lock_wait_s: float) -> Manifest:
    """`table.open` in a thread, tried again while another sink holds the lock, for at most `lock_wait_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + lock_wait_s
    while True:
        opening = asyncio.ensure_future(asyncio.to_thread(table.open, group))
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            # The thread goes on: a table it opens after the stop must not stay locked by nobody.
            opening.add_done_callback(functools.partial(_close_if_opened, table))
            raise
        except TableLockedError:
            if loop.time() >= deadline:
                raise
            log.info("table %s: locked by another sink (the node this task left?); trying again", table.root)
            await asyncio.sleep(LOCK_POLL_S)


def _absolute_path(value: Any) -> None:
    if not str(value).strip():
        raise ValueError("must not be empty")
    if not Path(value).is_absolute():
        raise ValueError("must be an absolute path (the table root, a local or shared POSIX file system)")


def _ddl(value: Any) -> None:
    if str(value).strip():
        parse_ddl(value)


class SparkSinkConnector(Connector):
    kind = "sink"
    version = "1.0"
    config_def = (
        ConfigDef()
        .define(
            ConfigKey(
                "path",
                ConfigType.STRING,
                "table root: a directory on a file system the driver and every executor see (renames are atomic)",
                importance=Importance.HIGH,
                validator=_absolute_path,
            )
        )
        .define(
            ConfigKey(
                "spark.master",
                ConfigType.STRING,
                "Spark master: local[N] (in-process) or spark://host:port; one per mqgate process",
                DEFAULT_MASTER,
                Importance.HIGH,
            )
        )
        .define(
            ConfigKey(
                "batch.size", ConfigType.INT, "rows per Spark job at most", DEFAULT_BATCH_SIZE, validator=at_least(1)
            )
        )
        .define(
            ConfigKey(
                "batch.interval.ms",
                ConfigType.LONG,
                "the longest a row waits for its batch to fill before it is written",
                DEFAULT_BATCH_INTERVAL_MS,
                validator=at_least(1),
            )
        )
        .define(
            ConfigKey(
                "partition.columns",
                ConfigType.LIST,
                "columns the table is partitioned by (dt: the UTC date of store_timestamp, YYYY-MM-DD)",
                DEFAULT_PARTITION_COLUMNS,
            )
        )
        .define(
            ConfigKey(
                "json.schema",
                ConfigType.STRING,
                "Spark DDL of fields parsed from a JSON body into columns, e.g. 'device STRING, temp DOUBLE' "
                "(empty: none); a body that does not fit is a failed record (dead-letter topic)",
                "",
                validator=_ddl,
            )
        )
    )

    def validate(self, values: dict[str, Any]) -> list[ConfigError]:
        try:
            layout(values)
        except SchemaError as exc:
            key = "partition.columns" if str(exc).startswith("partition.columns") else "json.schema"
            return [ConfigError(key, str(exc))]
        return []

    def task_configs(self, values: dict[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        # One task per table: Spark does the parallel work, and one writer owns the table's manifest.
        return [dict(values)]

    def task(self) -> SparkSinkTask:
        return SparkSinkTask()


def task_values(config: dict[str, Any]) -> dict[str, Any]:
    """The declared keys' values from a task config: typed values as the runtime parsed them, strings parsed here
    (a config written by hand), defaults for the rest."""
    definition = SparkSinkConnector.config_def
    typed = {key: value for key, value in config.items() if key in definition.keys and not isinstance(value, str)}
    values, errors = definition.parse({key: value for key, value in config.items() if isinstance(value, str)})
    errors = [error for error in errors if error.key not in typed]
    if errors:
        raise ValueError("spark-sink: " + "; ".join(f"{error.key}: {error.message}" for error in errors))
    return {**values, **typed}


def layout(values: dict[str, Any]) -> TableLayout:
    ddl = str(values.get("json.schema") or "").strip()
    return TableLayout.create(parse_ddl(ddl) if ddl else None, list(values["partition.columns"]))


class SparkSinkTask(SinkTask):
    def __init__(self) -> None:
        self._table: TableCommitter | None = None
        self._writer: BatchWriter | None = None
        self._session: Any = None
        # Per queue, the next offset this task holds (in the table or on its way there); lower ones are skipped.
        self._accepted: dict[QueueRef, int] = {}
        # Records put and refused (bad JSON), until the runtime's flush offsets pass them: they may come again.
        self._refused: set[tuple[QueueRef, int]] = set()
        self._queue_refs: dict[tuple[str, int, str], QueueRef] = {}

    async def start(self, config: dict[str, Any], context: TaskContext) -> None:
        values = task_values(config)
        self._layout = layout(values)
        self._json = converter(self._layout.json_schema) if self._layout.json_schema is not None else None
        self._rows = RowBuilder(self._layout)
        spark_settings = {
            key: str(value)
            for key, value in config.items()
            if key.startswith(SPARK_PREFIX) and key != "spark.master" and key not in values
        }
        table = TableCommitter(Path(values["path"]))
        manifest = await _open_table(table, context.group, CLUSTER_LOCK_WAIT_S if context.cluster else 0.0)
        self._table = table
        self._schema_json = self._layout.table_schema().jsonValue()
        if manifest.schema is not None and (
            manifest.schema != self._schema_json
            or list(manifest.partition_columns) != list(self._layout.partition_columns)
        ):
            table.close()
            self._table = None
            raise TableStateError(
                f"table {values['path']} holds columns {manifest.schema} partitioned by "
                f"{list(manifest.partition_columns)}; this config gives {self._schema_json} partitioned by "
                f"{list(self._layout.partition_columns)}; use a new path for a new layout"
            )
        self._accepted = table.offsets()
        starting = spark_session.acquire_in_background(values["spark.master"], spark_settings)
        try:
            # A stop while the JVM starts cancels this wait at once (the thread gives the session back).
            self._session = await asyncio.wrap_future(starting)
        except BaseException:
            table.close()  # stop() is not called for a task whose start did not finish
            self._table = None
            raise
        self._input_schema = self._layout.input_schema()
        batch_size = int(values["batch.size"])
        self._writer = BatchWriter(
            self._write_batch,
            batch_size,
            int(values["batch.interval.ms"]) / 1000,
            PENDING_BATCHES * batch_size,
            name=f"spark-sink-{context.connector}",
            # A dead JVM does not come back by retrying; the task fails at once and is restarted with a new one.
            retryable=lambda error: spark_session.alive(self._session),
        )
        log.info(
            "Spark sink %s: table %s at batch %d, %d queues",
            context.connector,
            table.root,
            manifest.batch,
            len(self._accepted),
        )

    async def stored_offsets(self, queues: Sequence[QueueRef]) -> dict[QueueRef, int]:
        """Every queue's next offset as the table's manifest has it; 0 (the first message still kept) for a queue
        never written, so the runtime never resumes at an offset the core holds but the table does not."""
        if self._table is None:
            return {}
        stored = self._table.offsets()
        return {queue: stored.get(queue, 0) for queue in queues}

    async def put(self, records: list[SinkRecord]) -> None:
        assert self._writer is not None, "put before start"
        if self._writer.error is not None:
            # The records are not bad: the writer is. Refusing them here would have the runtime dead-letter them
            # one by one; the next flush raises instead and fails the task, and the restarted task gets them again
            # from the manifest, which did not move.
            return
        rows: list[tuple[Any, ...]] = []
        offsets: dict[QueueRef, int] = {}
        failures: list[tuple[SinkRecord, BaseException]] = []
        accepted = self._accepted
        row = self._rows.row
        parse = self._json
        refs = self._queue_refs
        for record in records:
            # One QueueRef per queue, not per record (a frozen dataclass costs a microsecond to build).
            queue = refs.get((record.topic, record.queue_id, record.broker))
            if queue is None:
                queue = refs[(record.topic, record.queue_id, record.broker)] = record.queue
            offset = record.queue_offset
            if offset < accepted.get(queue, 0) and (queue, offset) not in self._refused:
                continue  # already in the table, or on its way there
            if parse is None:
                rows.append(row(record))
            else:
                try:
                    values = parse(json.loads(record.body))
                except (ValueError, BadRecordError) as exc:  # json.JSONDecodeError and UnicodeDecodeError too
                    error = exc if isinstance(exc, BadRecordError) else BadRecordError(f"body is not JSON: {exc}")
                    failures.append((record, error))
                    self._refused.add((queue, offset))
                    continue
                self._refused.discard((queue, offset))
                rows.append(row(record, values))
            offsets[queue] = offset + 1
            if accepted.get(queue, 0) <= offset:
                accepted[queue] = offset + 1
        if rows or offsets:
            try:
                await self._writer.put(rows, offsets)
            except Exception:
                if self._writer.error is None:
                    raise
                return  # as above
        if failures:
            raise RecordsFailed(failures)

    async def flush(self, offsets: dict[QueueRef, int]) -> None:
        """Hand the runtime's offsets (they pass records it dead-lettered) to the writer and return: rows are
        committed in batches of `batch.size` or after `batch.interval.ms`, not at every flush (the runtime flushes
        after every put). The core's offsets may so run ahead of the table; this sink resumes from the table's
        (`stored_offsets`), so nothing is skipped. `commit` waits for the table."""
        assert self._writer is not None, "flush before start"
        self._refused = {(queue, offset) for queue, offset in self._refused if offset >= offsets.get(queue, 0)}
        for queue, offset in offsets.items():
            if self._accepted.get(queue, 0) < offset:
                self._accepted[queue] = offset
        if offsets:
            await self._writer.put([], dict(offsets))

    async def commit(self) -> None:
        """Write and commit everything put and flushed so far; returns once it is in the table."""
        assert self._writer is not None, "commit before start"
        await self._writer.flush()

    async def stop(self) -> None:
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                try:
                    await writer.flush()  # a clean stop leaves nothing to deliver again
                except Exception as exc:
                    log.warning("Spark sink: rows not committed at stop are delivered again at start: %s", exc)
                await asyncio.to_thread(writer.close)
            if self._session is not None:
                self._session = None
                await asyncio.to_thread(spark_session.release)
        finally:
            if self._table is not None:
                self._table.close()
                self._table = None

    # -- writer thread ------------------------------------------------------------------------------------

    def _write_batch(self, rows: list[tuple[Any, ...]], offsets: dict[QueueRef, int]) -> None:
        table = self._table
        assert table is not None
        batch = table.next_batch()
        if rows:
            staging = table.staging_dir(batch)
            frame = self._layout.to_table(data_frame(self._session, rows, self._input_schema))
            writer = frame.write.mode("overwrite").format("parquet")
            if self._layout.partition_columns:
                writer = writer.partitionBy(*self._layout.partition_columns)
            writer.save(str(staging))
            files = table.commit(batch, offsets, self._schema_json, self._layout.partition_columns)
            log.debug("Spark sink: batch %d committed, %d rows in %d files", batch, len(rows), files)
        else:
            table.commit_offsets(offsets)
