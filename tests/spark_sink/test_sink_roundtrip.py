"""The Spark sink driven directly with records from a real broker, read back with Spark."""

import datetime as dt
import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connectors.api import QueueRef, RecordsFailed, SinkRecord, TaskContext
from spark_sink.connector import SparkSinkConnector, SparkSinkTask
from spark_sink.table_reader import read_table
from tests.spark_sink.conftest import MASTER, next_offsets, produce, sink_records

ROOT = Path(__file__).resolve().parents[2]


def task_config(path: Path, **overrides: str) -> dict[str, Any]:
    raw = {"name": "lake", "connector.class": "spark-sink", "path": str(path), "spark.master": MASTER, **overrides}
    values, errors = SparkSinkConnector.config_def.parse(raw)
    assert errors == []
    assert SparkSinkConnector().validate(values) == []
    return {**raw, **values}


async def run_task(config: dict[str, Any], records: list[SinkRecord], chunk: int = 1000) -> SparkSinkTask:
    task = SparkSinkTask()
    await task.start(config, TaskContext("lake", 0))
    try:
        for start in range(0, len(records), chunk):
            await task.put(records[start : start + chunk])
        await task.flush(next_offsets(records))
    finally:
        await task.stop()
    return task


def expected_row(record: SinkRecord) -> tuple[Any, ...]:
    day = dt.datetime.fromtimestamp(record.store_timestamp_ms / 1000, dt.UTC).date().isoformat()
    return (
        record.topic,
        record.queue_id,
        record.queue_offset,
        tuple(record.keys),
        record.tags,
        tuple(sorted(record.properties.items())),
        record.born_timestamp_ms,
        record.store_timestamp_ms,
        bytes(record.body),
        day,
    )


def table_rows(spark: Any, path: Path) -> Counter[tuple[Any, ...]]:
    frame = read_table(spark, path)
    rows = frame.selectExpr(
        "topic",
        "queue_id",
        "queue_offset",
        "keys",
        "tags",
        "properties",
        "unix_millis(born_timestamp) AS born",
        "unix_millis(store_timestamp) AS stored",
        "body",
        "dt",
    ).collect()
    return Counter(
        (
            row.topic,
            row.queue_id,
            row.queue_offset,
            tuple(row["keys"]),
            row.tags,
            tuple(sorted(row.properties.items())),
            row.born,
            row.stored,
            bytes(row.body),
            row.dt,
        )
        for row in rows
    )


@pytest.mark.slow
async def test_50000_messages_to_parquet_and_back(spark: Any, make_broker: Any, tmp_path: Path) -> None:
    broker = await make_broker()
    await produce(broker, "telemetry", 50_000)
    records = await sink_records(broker, "telemetry", 50_000)
    table = tmp_path / "table"
    await run_task(task_config(table, **{"batch.size": "15000"}), records)

    assert table_rows(spark, table) == Counter(expected_row(record) for record in records)
    schema = read_table(spark, table).schema
    assert schema["dt"].dataType.simpleString() == "string"  # not inferred as a date
    assert schema["store_timestamp"].dataType.simpleString() == "timestamp"
    assert sorted(p.name for p in table.iterdir()) == ["_mqgate", "topic=telemetry"]
    manifest = json.loads((table / "_mqgate" / "manifest.json").read_text())
    assert manifest["offsets"] == {f"{q.topic}/{q.queue_id}": n for q, n in next_offsets(records).items()}
    assert manifest["batch"] >= 2  # 15,000 rows or more per batch
    assert list((table / "_mqgate" / "staging").iterdir()) == []


async def test_records_put_again_are_skipped(spark: Any, make_broker: Any, tmp_path: Path) -> None:
    broker = await make_broker()
    await produce(broker, "orders", 400)
    records = await sink_records(broker, "orders", 400)
    table = tmp_path / "table"
    config = task_config(table, **{"partition.columns": "dt"})
    await run_task(config, records[:300])
    # A runtime that resumes from an older offset hands over records already in the table.
    task = SparkSinkTask()
    await task.start(config, TaskContext("lake", 0))
    queues = [QueueRef("orders", q) for q in range(4)] + [QueueRef("other", 0)]
    # Queues the table has no rows of start at 0 (records[:300] are queues 0-2: they come in queue order).
    assert await task.stored_offsets(queues) == {**dict.fromkeys(queues, 0), **next_offsets(records[:300])}
    await task.put(records[:200])
    await task.put(records)
    await task.put(records[250:])
    await task.flush(next_offsets(records))
    await task.stop()
    assert table_rows(spark, table) == Counter(expected_row(record) for record in records)
    assert [p.name for p in table.iterdir() if not p.name.startswith("_")] == [f"dt={expected_row(records[0])[-1]}"]


async def test_json_fields_and_bad_json(spark: Any, make_broker: Any, tmp_path: Path) -> None:
    def body(index: int) -> bytes:
        if index % 50 == 7:
            return b"{not json"
        if index % 50 == 9:
            return json.dumps({"device": "d1", "temp": "hot"}).encode()  # wrong type
        document = {
            "device": f"d{index % 5}",
            "temp": index / 10,
            "seen": [index, index + 1],
            "at": 1_795_000_000_000 + index,
            "meta": {"fw": f"1.{index % 3}"},
        }
        if index % 4 == 0:
            del document["temp"]
        return json.dumps(document).encode()

    broker = await make_broker()
    await produce(broker, "readings", 1000, body=body)
    records = await sink_records(broker, "readings", 1000)
    table = tmp_path / "table"
    config = task_config(
        table,
        **{"json.schema": "device STRING, temp DOUBLE, seen ARRAY<BIGINT>, at TIMESTAMP, meta STRUCT<fw: STRING>"},
    )
    task = SparkSinkTask()
    await task.start(config, TaskContext("lake", 0))
    refused: list[tuple[SinkRecord, BaseException]] = []
    for start in range(0, len(records), 100):
        try:
            await task.put(records[start : start + 100])
        except RecordsFailed as failed:
            refused.extend(failed.failures)
    bad_bodies = {b"{not json", json.dumps({"device": "d1", "temp": "hot"}).encode()}
    assert sorted(r.queue_offset for r, _ in refused) == sorted(r.queue_offset for r in records if r.body in bad_bodies)
    assert len(refused) == 40
    messages = {str(error) for _, error in refused}
    assert any(message.startswith("body is not JSON") for message in messages)
    assert "field 'temp': expected a number, got a string 'hot'" in messages
    # The runtime retries a refused record: refused again, not skipped as a duplicate.
    with pytest.raises(RecordsFailed):
        await task.put([refused[0][0]])
    # Then dead-letters it and flushes offsets past it: they reach the table's manifest.
    await task.flush(next_offsets(records))
    await task.commit()
    assert await task.stored_offsets([r.queue for r, _ in refused]) == {
        q: n for q, n in next_offsets(records).items() if q in {r.queue for r, _ in refused}
    }
    await task.stop()

    frame = read_table(spark, table)
    assert frame.columns[-2:] == ["topic", "dt"]
    rows = frame.selectExpr(
        "queue_offset", "queue_id", "device", "temp", "seen", "unix_millis(at) AS at", "meta.fw AS fw", "body"
    ).collect()
    assert len(rows) == 960
    by_position = {(r.queue_id, r.queue_offset): r for r in records}
    for row in rows:
        document = json.loads(by_position[(row.queue_id, row.queue_offset)].body)
        assert (row.device, row.temp, row.seen, row.at, row.fw) == (
            document["device"],
            document.get("temp"),
            document["seen"],
            document["at"],
            document["meta"]["fw"],
        )


async def test_example_query_counts_messages_per_device_and_hour(spark: Any, make_broker: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("spark_query", ROOT / "examples" / "spark_query.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    broker = await make_broker()
    await produce(broker, "devices", 650)  # MQTT_TOPIC devices/d<i % 13>/telemetry
    records = await sink_records(broker, "devices", 650)
    table = tmp_path / "table"
    await run_task(task_config(table), records)
    read_table(spark, table).createOrReplaceTempView("messages")
    query = f"SELECT device, unix_millis(hour) AS hour_ms, messages FROM ({example.QUERY})"  # no local time zone
    rows = spark.sql(query, args={"since": "2000-01-01"}).collect()

    expected: Counter[tuple[str, int]] = Counter()
    for record in records:
        hour = record.store_timestamp_ms // 3_600_000 * 3_600_000
        expected[(record.properties["MQTT_TOPIC"].split("/")[1], hour)] += 1
    got = Counter({(row.device, row.hour_ms): row.messages for row in rows})
    assert got == expected
    assert len({device for device, _ in got}) == 13
