"""Spark's JVM killed (SIGKILL) under a running sink task: the task fails instead of skipping rows, and a new
task (with a new JVM) writes the rest; every record is in the table once."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark import SparkContext

from connectors.api import TaskContext
from spark_sink import spark_session
from spark_sink.connector import SparkSinkConnector, SparkSinkTask
from spark_sink.table_reader import read_table
from tests.spark_sink.conftest import MASTER, produce, sink_records


def config(table: Path) -> dict[str, Any]:
    values, errors = SparkSinkConnector.config_def.parse(
        {"path": str(table), "spark.master": MASTER, "batch.size": "1000"}
    )
    assert errors == []
    return values


@pytest.mark.slow
async def test_jvm_killed_then_task_restarted(make_broker: Any, tmp_path: Path) -> None:
    broker = await make_broker()
    await produce(broker, "telemetry", 6000)
    records = await sink_records(broker, "telemetry", 6000)
    table = tmp_path / "table"

    task = SparkSinkTask()
    await task.start(config(table), TaskContext("lake", 0))
    try:
        await task.put(records[:3000])
        await task.commit()
        gateway: Any = SparkContext._gateway
        os.kill(gateway.proc.pid, signal.SIGKILL)
        gateway.proc.wait()
        with pytest.raises(Exception):  # noqa: B017 (py4j's errors: the JVM is gone)
            await task.put(records[3000:4000])
            await task.commit()
        # The records are not bad, the writer is: put does not refuse them (the runtime would dead-letter them),
        # flush fails the task.
        await task.put(records[4000:])
        with pytest.raises(Exception):  # noqa: B017
            await task.flush({records[-1].queue: records[-1].queue_offset + 1})
    finally:
        await task.stop()

    task = SparkSinkTask()
    await task.start(config(table), TaskContext("lake", 0))  # a new JVM
    try:
        stored = await task.stored_offsets(sorted({r.queue for r in records}, key=lambda q: q.queue_id))
        assert sum(stored.values()) == 3000
        await task.put([r for r in records if r.queue_offset >= stored[r.queue]])
    finally:
        await task.stop()

    spark = spark_session.acquire(MASTER)
    try:
        rows = read_table(spark, table).select("queue_id", "queue_offset", "body").collect()
    finally:
        spark_session.release()
    assert Counter((r.queue_id, r.queue_offset, bytes(r.body)) for r in rows) == Counter(
        (r.queue_id, r.queue_offset, r.body) for r in records
    )
