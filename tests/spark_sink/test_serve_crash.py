"""The must-show: `mqgate serve` running a spark-sink connector (a file in DATA_DIR/connectors) is killed with
SIGKILL 5 times while the sink writes, and restarted: every message is in the table exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from core import Broker, MessageStore, Producer, StoreConfig
from spark_sink.table_commit import read_manifest
from spark_sink.table_reader import read_table
from tests.serve_process import serve_command

ROOT = Path(__file__).resolve().parents[2]
SERVE = serve_command("--log-level", "WARNING")
KILLS = 5
MESSAGES = 30_000
BATCH = 2_000


async def preload(data_dir: Path) -> None:
    """The messages, stored before mqgate starts (the sink is what is under test)."""
    store = MessageStore(StoreConfig(store_dir=data_dir / "store"))  # the defaults, as mqgate serve has them
    store.open()
    broker = Broker(store, data_dir / "config")
    await broker.start()
    producer = Producer(broker)
    for start in range(0, MESSAGES, 500):
        await producer.send_batch("telemetry", [f"reading {i}".encode() for i in range(start, start + 500)])
    await broker.close()
    store.close()


def start(data_dir: Path, log: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*SERVE, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(log, "a"),  # noqa: SIM115
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("ready "), f"no ready line: {line!r}; see {log}"
    return process


def committed(table: Path) -> tuple[int, int]:
    manifest = read_manifest(table)
    return manifest.batch, sum(manifest.offsets.values())


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_serve_killed_mid_sink_writes_each_message_once(spark: Any, tmp_path: Path) -> None:
    data_dir, table = tmp_path / "data", tmp_path / "table"
    asyncio.run(preload(data_dir))
    (data_dir / "connectors").mkdir(parents=True)
    (data_dir / "connectors" / "lake.json").write_text(
        json.dumps(
            {
                "connector.class": "spark-sink",
                "topics": "telemetry",
                "path": str(table),
                "batch.size": str(BATCH),
                "batch.interval.ms": "500",
                "spark.sql.shuffle.partitions": "2",
            }
        )
    )
    log = tmp_path / "serve.stderr"
    rng = random.Random(7)
    process = start(data_dir, log)
    try:
        for kill in range(KILLS):
            # Kill while batches are being committed: after the next commit, at a random point of the one after.
            batch = committed(table)[0]
            wait_for(lambda b=batch: committed(table)[0] > b, 120, f"a commit before kill {kill + 1}; see {log}")
            time.sleep(rng.uniform(0.0, 0.6))
            process.kill()
            process.wait(10)
            assert committed(table)[1] < MESSAGES, "the sink finished before the kills: give it more messages"
            process = start(data_dir, log)
        wait_for(lambda: committed(table)[1] == MESSAGES, 180, f"every message committed; see {log}")
        # A stop, not a kill: the last commit's files may still be moving into the table (a kill there leaves them
        # to the next start to move, and a reader would miss them until then).
        process.terminate()
        assert process.wait(60) == 0, f"mqgate serve did not stop cleanly; see {log}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)

    rows = read_table(spark, table).select("queue_id", "queue_offset", "body").collect()
    counts = Counter((row.queue_id, row.queue_offset) for row in rows)
    assert len(counts) == MESSAGES
    assert [key for key, n in counts.items() if n > 1] == []
    assert sorted(bytes(row.body) for row in rows) == sorted(f"reading {i}".encode() for i in range(MESSAGES))
