"""Run by test_sink_crash.py in a child process: the real Spark sink task writing `synthetic_records`, killed
with SIGKILL in the middle of committing its second batch (argv: table root, kill point)."""

import asyncio
import os
import signal
import sys
from pathlib import Path

from connectors.api import SinkRecord, TaskContext
from spark_sink.connector import SparkSinkConnector, SparkSinkTask
from spark_sink.table_commit import TableCommitter

BATCH_SIZE = 1000
KILL_POINTS = ("staged", "after-manifest", "mid-move")


def synthetic_records(count: int) -> list[SinkRecord]:
    base = 1_795_000_000_000
    return [
        SinkRecord(
            topic="crash",
            queue_id=index % 3,
            queue_offset=index // 3,
            body=f"body {index}".encode(),
            keys=[f"k{index}"],
            tags="t",
            properties={"i": str(index)},
            born_timestamp_ms=base + index,
            store_timestamp_ms=base + index * 60_000,  # spans days: several partitions per batch
            msg_id=f"m{index}",
        )
        for index in range(count)
    ]


def task_config(table: Path) -> dict[str, object]:
    raw = {"path": str(table), "spark.master": "local[2]", "batch.size": str(BATCH_SIZE)}
    values, errors = SparkSinkConnector.config_def.parse(raw)
    assert not errors, errors
    return values


def arm(kill_point: str) -> None:
    """SIGKILL this process at `kill_point` of the second commit."""
    commits = 0
    real_commit, real_replace, real_rename = TableCommitter.commit, os.replace, os.rename

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def commit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal commits
        commits += 1
        if commits == 2 and kill_point == "staged":
            die()  # Spark has written the batch into staging; the manifest does not name it yet
        return real_commit(self, *args, **kwargs)

    def replace(*args, **kwargs):  # type: ignore[no-untyped-def]
        real_replace(*args, **kwargs)
        if commits == 2 and kill_point == "after-manifest":
            die()

    moves = 0

    def rename(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal moves
        if commits == 2:
            moves += 1
            if moves == 2 and kill_point == "mid-move":
                die()
        return real_rename(*args, **kwargs)

    TableCommitter.commit = commit  # type: ignore[method-assign]
    os.replace = replace
    os.rename = rename


async def main() -> None:
    table, kill_point = Path(sys.argv[1]), sys.argv[2]
    arm(kill_point)
    task = SparkSinkTask()
    await task.start(task_config(table), TaskContext("crash", 0))
    records = synthetic_records(3 * BATCH_SIZE)
    for start in range(0, len(records), 250):
        await task.put(records[start : start + 250])
    await task.flush({})
    await task.stop()
    print("not killed")


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    asyncio.run(main())
