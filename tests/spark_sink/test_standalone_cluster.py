"""The sink against a real standalone Spark cluster: a master and a worker started from the pyspark installation
(`spark-class ...deploy.master.Master` / `...deploy.worker.Worker`) on loopback, on free ports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from connectors.api import TaskContext
from spark_sink import spark_session
from spark_sink.connector import SparkSinkConnector, SparkSinkTask
from spark_sink.table_reader import read_table
from tests.spark_sink.conftest import next_offsets, produce, sink_records

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def master_state(web_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """spark://127.0.0.1:PORT of a running master with one registered worker, and the master's web port."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_CLASS.parents[1])}
    port, web_port = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            subprocess.Popen(
                [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                 str(port), "--webui-port", str(web_port)],
                env=env, stdout=open(logs / "master.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            )
        )  # fmt: skip
        wait_for(lambda: master_state(web_port)["status"] == "ALIVE", 60, f"the master; see {logs}")
        processes.append(
            subprocess.Popen(
                [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                 str(free_port()), "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g",
                 "--work-dir", str(logs / "work"), url],
                env=env, stdout=open(logs / "worker.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            )
        )  # fmt: skip
        wait_for(lambda: master_state(web_port)["aliveworkers"] == 1, 60, f"the worker to register; see {logs}")
        yield url, web_port
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.mark.slow
async def test_sink_on_a_standalone_cluster(cluster: tuple[str, int], make_broker: Any, tmp_path: Path) -> None:
    url, web_port = cluster
    broker = await make_broker()
    await produce(broker, "telemetry", 5000)
    records = await sink_records(broker, "telemetry", 5000)
    table = tmp_path / "table"
    raw = {
        "path": str(table),
        "spark.master": url,
        "batch.size": "2000",
        "spark.executor.memory": "512m",
        "spark.driver.host": "127.0.0.1",
    }
    values, errors = SparkSinkConnector.config_def.parse(raw)
    assert errors == []
    task = SparkSinkTask()
    await task.start({**raw, **values}, TaskContext("lake", 0))
    try:
        apps = master_state(web_port)["activeapps"]
        assert [app["name"] for app in apps] == [spark_session.APP_NAME]
        for start in range(0, len(records), 500):
            await task.put(records[start : start + 500])
        await task.flush(next_offsets(records))
        await task.commit()
        spark = spark_session.acquire(url)  # the task's session: one Spark per process
        try:
            assert spark.sparkContext.master == url
            rows = read_table(spark, table).select("queue_id", "queue_offset", "body").collect()
        finally:
            spark_session.release()
    finally:
        await task.stop()
    assert Counter((r.queue_id, r.queue_offset, bytes(r.body)) for r in rows) == Counter(
        (r.queue_id, r.queue_offset, r.body) for r in records
    )
    # The jobs ran on the cluster's executor, not in the driver.
    completed = master_state(web_port)["completedapps"]
    assert [app["name"] for app in completed] == [spark_session.APP_NAME]
