"""A body that is not JSON, published over MQTT between JSON ones, against a real `mqgate serve`: the connector of
docs/spark-sink.md (examples/spark-sink.yaml, errors.tolerance=all with a dead-letter topic) writes the good rows
and puts the bad one in the dead-letter topic with its reason; the same connector without the errors.* keys fails
its task with a trace naming the record."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from core import Broker, MessageStore, StoreConfig
from spark_sink.table_commit import read_manifest
from spark_sink.table_reader import read_table
from tests.connectors.test_worker import drain
from tests.serve_process import ROOT, ServeProcess

WAIT_S = 120.0
BODIES = ['{"temp": 20.5}', "temp=21", '{"temp": 22.5}']


def wait_for(check: Any, what: str, server: ServeProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}; stderr: {server.stderr()[-3000:]}"
        time.sleep(0.2)


def mqgate(*args: str | Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "mqgate.cli", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def task_status(server: ServeProcess, name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{server.http_url}/connectors/{name}/status", timeout=30) as response:
        status: dict[str, Any] = json.load(response)["tasks"][0]
        return status


def committed_offsets(table: Path) -> int:
    try:
        return sum(read_manifest(table).offsets.values())
    except FileNotFoundError:
        return 0


async def dead_letters(data_dir: Path, topic: str) -> list[Any]:
    """The dead-letter topic's messages, read from the store after the server stopped."""
    store = MessageStore(StoreConfig(store_dir=data_dir / "store"))
    store.open()
    broker = Broker(store, data_dir / "config")
    await broker.start()
    try:
        return await drain(broker, topic)
    finally:
        await broker.close()
        store.close()


@pytest.mark.slow
def test_a_bad_body_goes_to_the_dead_letter_topic_or_fails_the_task_naming_it(spark: Any, tmp_path: Path) -> None:
    data_dir, table, strict_table = tmp_path / "data", tmp_path / "lake", tmp_path / "strict"
    server = ServeProcess(data_dir, env={"SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        host, port = server.ready["mqtt"].rsplit(":", 1)
        for body in BODIES:
            subprocess.run(
                ["mosquitto_pub", "-h", host, "-p", port, "-q", "1", "-t", "sensors/d1/temp", "-m", body],
                check=True, timeout=30,
            )  # fmt: skip
        url = ("connect", "--url", server.http_url)
        mqgate(*url, "create", "examples/spark-sink.yaml", f"path={table}")
        mqgate(*url, "create", "--name", "strict", "connector.class=spark-sink", "topics=sensors",
               f"path={strict_table}", "json.schema=temp DOUBLE", "batch.interval.ms=1000")  # fmt: skip
        wait_for(lambda: committed_offsets(table) == len(BODIES), "every offset in the table's manifest", server)
        wait_for(lambda: task_status(server, "strict")["state"] == "FAILED", "the strict task FAILED", server)
        assert task_status(server, "lake")["state"] == "RUNNING"
        trace = task_status(server, "strict")["trace"]
    finally:
        assert server.stop() == 0

    rows = read_table(spark, table).select("temp", "body").collect()
    assert sorted((row.temp, bytes(row.body)) for row in rows) == [(20.5, b'{"temp": 20.5}'), (22.5, b'{"temp": 22.5}')]

    [dead] = asyncio.run(dead_letters(data_dir, "sensors-dlq"))
    assert dead.body == b"temp=21"
    assert dead.properties["CONNECT_ERROR"].startswith("spark_sink.errors.BadRecordError: body is not JSON: ")
    assert dead.properties["CONNECT_ERROR_CONNECTOR"] == "lake"
    assert dead.properties["MQTT_TOPIC"] == "sensors/d1/temp"  # the record's own properties are kept
    origin = dead.properties["CONNECT_ERROR_ORIGIN"]
    # errors.log.enable: the server logged it.
    assert f"connector 'lake' task 0: record {origin} failed (sent to 'sensors-dlq'): " in server.stderr()

    # Without errors.tolerance=all the same record stopped the strict connector's task, and the trace names it.
    assert f"connector 'strict' task 0: record {origin} (topic/queue/offset) failed: " in trace
    assert "BadRecordError: body is not JSON" in trace
    assert "set errors.tolerance=all" in trace
