"""Spark sink benchmark: the sink task writing records to a Parquet table, against plain PySpark writing the same
rows from memory to Parquet, in the same run, the same Spark session (local[2]) and the same partitioning.

    python bench/spark_sink.py [--quick] [--rounds N]

* plain_pyspark: the rows, already built as tuples in memory, go through `createDataFrame(rows, schema)` (no
  per-row verification), the timestamps are converted in Spark, and one job writes them with
  `partitionBy("topic", "dt")`: what a PySpark user would write by hand. Clock: the job.
* spark_sink: SinkRecords (as the runtime pulls them) are `put` in chunks of 500 (the runtime's put size) into a
  SparkSinkTask, which builds the rows, writes batches of `batch.size` through Spark into staging and commits
  each (fsync of the files and the manifest, renames); the clock stops when the last batch is committed.
The records are 3 topics' worth of telemetry: a ~200 B JSON body, 2 keys, a tag and 2 properties. Each figure is
the median of --rounds runs, after one untimed warm-up of each (the JVM's JIT); the ratio is the median of
per-round ratios. Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from connectors.api import QueueRef, SinkRecord, TaskContext
from spark_sink import spark_session
from spark_sink.connector import DEFAULT_BATCH_SIZE, SparkSinkConnector, SparkSinkTask, layout
from spark_sink.table_schema import RowBuilder

PUT_SIZE = 500
BASE_MS = 1_795_000_000_000


def make_records(count: int) -> list[SinkRecord]:
    records = []
    for index in range(count):
        device = index % 1000
        body = json.dumps({"device": f"d{device}", "temp": 20 + index % 70 / 7, "seq": index, "fw": "1.4.2-rc1"})
        records.append(
            SinkRecord(
                topic=f"site{index % 3}",
                queue_id=index % 4,
                queue_offset=index // 12,
                body=body.encode() + b" " * (200 - len(body)),
                keys=[f"d{device}", f"seq-{index}"],
                tags="telemetry",
                properties={"MQTT_TOPIC": f"site{index % 3}/d{device}/telemetry", "UNIQ_KEY": f"u{index:012d}"},
                born_timestamp_ms=BASE_MS + index * 10,
                store_timestamp_ms=BASE_MS + index * 10 + 3,
                msg_id=f"u{index:012d}",
            )
        )
    return records


def config(path: Path, batch_size: int) -> dict[str, Any]:
    raw = {"path": str(path), "spark.master": "local[2]", "batch.size": str(batch_size)}
    values, errors = SparkSinkConnector.config_def.parse(raw)
    assert not errors, errors
    return values


def plain_pyspark(spark: Any, records: list[SinkRecord], out: Path, batch_size: int) -> float:
    table_layout = layout(config(out, batch_size))
    builder = RowBuilder(table_layout)
    rows = [builder.row(record) for record in records]  # "from memory": built before the clock starts
    schema = table_layout.input_schema()
    started = time.perf_counter()
    frame = table_layout.to_table(spark.createDataFrame(rows, schema, verifySchema=False))
    frame.write.mode("overwrite").partitionBy("topic", "dt").parquet(str(out))
    return time.perf_counter() - started


async def spark_sink(records: list[SinkRecord], out: Path, batch_size: int) -> float:
    task = SparkSinkTask()
    await task.start(config(out, batch_size), TaskContext("bench", 0))
    try:
        started = time.perf_counter()
        offsets: dict[QueueRef, int] = {}
        for start in range(0, len(records), PUT_SIZE):
            chunk = records[start : start + PUT_SIZE]
            await task.put(chunk)
            for record in chunk:
                offsets[record.queue] = record.queue_offset + 1
            await task.flush(dict(offsets))
        await task.commit()
        return time.perf_counter() - started
    finally:
        await task.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 3 rounds (default 400,000, 3 rounds)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="the sink's batch.size")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    count = 100_000 if args.quick else 400_000
    records = make_records(count)
    spark = spark_session.acquire("local[2]")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-sink-"))
    try:
        plain_pyspark(spark, records[:20_000], work / "warm-plain", args.batch_size)
        asyncio.run(spark_sink(records[:20_000], work / "warm-sink", args.batch_size))
        plain, sink, ratios = [], [], []
        for round_number in range(args.rounds):
            p = plain_pyspark(spark, records, work / f"plain-{round_number}", args.batch_size)
            s = asyncio.run(spark_sink(records, work / f"sink-{round_number}", args.batch_size))
            plain.append(count / p)
            sink.append(count / s)
            ratios.append(p / s)
            shutil.rmtree(work / f"plain-{round_number}")
            shutil.rmtree(work / f"sink-{round_number}")
    finally:
        spark_session.release()
        shutil.rmtree(work, ignore_errors=True)
    print(f"spark_sink.rows={count}")
    print(f"spark_sink.batch_size={args.batch_size}")
    print(f"plain_pyspark.rows_per_s={statistics.median(plain):.0f}")
    print(f"spark_sink.rows_per_s={statistics.median(sink):.0f}")
    print(f"spark_sink.ratio_to_plain_pyspark={statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
