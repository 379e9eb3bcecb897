"""The Spark sink under the real connector runtime (connectors.worker.Worker, in process): created like any
connector, bad JSON goes to the dead-letter topic while the task keeps running, and the dead-lettered offsets
reach the table's manifest."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.api import PROPERTY_ERROR, PROPERTY_ERROR_ORIGIN
from connectors.plugins import PluginRegistry
from connectors.worker import Worker
from spark_sink.table_commit import read_manifest
from spark_sink.table_reader import read_table
from tests.spark_sink.conftest import produce, sink_records

MESSAGES = 500


def body(index: int) -> bytes:
    if index % 50 == 3:
        return b"temp=21.5"  # not JSON
    if index % 50 == 4:
        return json.dumps({"device": "d1", "temp": [21.5]}).encode()
    return json.dumps({"device": f"d{index % 7}", "temp": index / 4}).encode()


async def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_bad_json_is_dead_lettered_and_the_task_keeps_running(
    spark: Any, make_broker: Any, tmp_path: Path
) -> None:
    broker = await make_broker()
    await produce(broker, "readings", MESSAGES, body=body)
    records = await sink_records(broker, "readings", MESSAGES)
    table = tmp_path / "table"
    worker = Worker(broker, tmp_path / "connect", PluginRegistry.load())
    await worker.start()
    try:
        await worker.create(
            "lake",
            {
                "connector.class": "spark-sink",
                "topics": "readings",
                "path": str(table),
                "json.schema": "device STRING, temp DOUBLE",
                "batch.interval.ms": "200",
                "errors.tolerance": "all",
                "errors.deadletterqueue.topic.name": "readings-dlq",
            },
        )
        await eventually(
            lambda: sum(read_manifest(table).offsets.values()) == MESSAGES, 60, "every offset in the manifest"
        )
        assert [task.state for task in worker.status("lake").tasks] == ["RUNNING"]
    finally:
        await worker.close()

    dead = await sink_records(broker, "readings-dlq", 20)
    bad = {(r.queue_id, r.queue_offset): r.body for r in records if r.body.startswith(b"temp=") or b"[" in r.body}
    assert len(bad) == 20
    origins = {record.properties[PROPERTY_ERROR_ORIGIN] for record in dead}
    assert origins == {f"readings/{queue}/{offset}" for queue, offset in bad}
    errors = {record.properties[PROPERTY_ERROR] for record in dead}
    assert any("body is not JSON" in error for error in errors)
    assert any("field 'temp': expected a number, got an array" in error for error in errors)

    rows = read_table(spark, table).select("queue_id", "queue_offset", "device", "temp").collect()
    assert sorted((r.queue_id, r.queue_offset) for r in rows) == sorted(
        (r.queue_id, r.queue_offset) for r in records if (r.queue_id, r.queue_offset) not in bad
    )
    for row in rows:
        document = json.loads(
            next(r.body for r in records if (r.queue_id, r.queue_offset) == (row.queue_id, row.queue_offset))
        )
        assert (row.device, row.temp) == (document["device"], document["temp"])
