"""The real sink task with Spark, SIGKILLed while committing a batch: after a restart every record is in the
table exactly once."""

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connectors.api import TaskContext
from spark_sink.connector import SparkSinkTask
from spark_sink.table_commit import META_DIR, read_manifest
from spark_sink.table_reader import read_table
from tests.spark_sink.sink_crash_child import BATCH_SIZE, KILL_POINTS, synthetic_records, task_config

CHILD = Path(__file__).with_name("sink_crash_child.py")
ROOT = Path(__file__).parents[2]


@pytest.mark.slow
async def test_killed_while_committing(spark: Any, tmp_path: Path) -> None:
    # One child per kill point, run at once: each starts its own Spark.
    children = {
        point: subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path / point), point],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for point in KILL_POINTS
    }
    for point, child in children.items():
        out, err = child.communicate(timeout=240)
        assert child.returncode == -9, f"{point}: {out}{err[-3000:]}"
    for point in KILL_POINTS:
        await check_restart(spark, tmp_path / point, point)


async def check_restart(spark: Any, table: Path, kill_point: str) -> None:
    manifest = read_manifest(table)
    staged = list((table / META_DIR / "staging").iterdir())
    assert staged, "the child died before its second batch was staged"
    assert manifest.batch == (1 if kill_point == "staged" else 2)

    # Restart: the task opens the table (recovery), the runtime resumes at its stored offsets.
    records = synthetic_records(3 * BATCH_SIZE)
    task = SparkSinkTask()
    await task.start(task_config(table), TaskContext("crash", 0))
    try:
        stored = await task.stored_offsets(sorted({r.queue for r in records}, key=lambda q: q.queue_id))
        assert 0 < sum(stored.values()) <= len(records)
        assert list((table / META_DIR / "staging").iterdir()) == []
        await task.put([r for r in records if r.queue_offset >= stored[r.queue]])
        await task.flush({})
    finally:
        await task.stop()

    rows = read_table(spark, table).select("queue_id", "queue_offset", "body").collect()
    assert Counter((r.queue_id, r.queue_offset, bytes(r.body)) for r in rows) == Counter(
        (r.queue_id, r.queue_offset, r.body) for r in records
    ), kill_point
