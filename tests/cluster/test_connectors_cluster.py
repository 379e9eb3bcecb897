"""Connectors on a cluster of separate processes (a NameServer and two broker groups, each `mqgate serve` with its
connector worker): a connector created, paused or deleted through one node's REST API is so on both; a file sink's
tasks run one on each node, reading a topic's queues on both groups; when the node running a task is killed with
SIGKILL its task moves to the other node, and every message reaches the files once. The must-show: the Spark sink
writes a table with every message of a topic spread over both groups, exactly once, through a SIGKILL of the node
running its task."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from connectors.cluster import task_work
from core import MessageQueue
from peers.owners import owner
from remote_client import Cluster, Producer
from spark_sink.table_commit import read_manifest
from tests.cluster.processes import CLUSTER, ClusterProcesses
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

GROUPS = ("broker-a", "broker-b")
QUEUES = 4  # per group
# Generous: a task moves HANDOVER_S after its node's death is seen; a Spark sink's new JVM takes seconds more.
MOVE_TIMEOUT_S = 90.0


def url(serve: ServeProcess, path: str) -> str:
    return serve.http_url + path


async def request(session: aiohttp.ClientSession, method: str, serve: ServeProcess, path: str, **kw: Any) -> Any:
    async with session.request(method, url(serve, path), **kw) as response:
        text = await response.text()
        assert response.status < 300, f"{method} {path}: {response.status} {text}"
        return json.loads(text) if text else None


async def status_of(session: aiohttp.ClientSession, serve: ServeProcess, name: str) -> dict[str, Any] | None:
    async with session.get(url(serve, f"/connectors/{name}/status")) as response:
        return await response.json() if response.status == 200 else None


async def eventually(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def placed(
    session: aiohttp.ClientSession, cluster: ClusterProcesses, name: str, expected: list[str], live: tuple[str, ...]
) -> None:
    """Until every live node names `expected` (task number -> broker group) and the owners run their tasks."""

    async def check() -> bool:
        for group in live:
            status = await status_of(session, cluster.brokers[group], name)
            if status is None or [task["worker_id"] for task in status["tasks"]] != expected:
                return False
            for task in status["tasks"]:
                if task["worker_id"] == group and task["state"] != "RUNNING":
                    return False
        return True

    await eventually(check, MOVE_TIMEOUT_S, f"{name}'s tasks placed on {expected} by {live}")


async def send(producer: Producer, topic: str, group: str, bodies: list[bytes]) -> None:
    """Each body to a queue of `group` in turn."""
    await producer.cluster.route(topic, refresh=True)  # the groups' masters, asked again (one may be back)
    for n, body in enumerate(bodies):
        queue = MessageQueue(topic, group, n % QUEUES)
        await producer.send_message(producer.message(topic, body), queue)


def spreading_name(prefix: str, tasks: int) -> str:
    """A connector name whose tasks rendezvous hashing puts on different groups (with both live)."""
    for n in range(1000):
        name = f"{prefix}-{n}"
        if len({owner(task_work(name, task), GROUPS) for task in range(tasks)}) == min(tasks, len(GROUPS)):
            return name
    raise AssertionError("no name spreads")


def create_topic(cluster: ClusterProcesses, topic: str) -> None:
    cluster.admin("topic", "create", topic, "--cluster", CLUSTER, "--queues", str(QUEUES))
    cluster.wait_topic(topic)


class Sender:
    """A remote client producer on the cluster's NameServer."""

    def __init__(self, cluster: ClusterProcesses) -> None:
        self.client = Cluster(cluster.namesrv_addr.split(";"), instance_name="connect-test")
        self.producer = Producer(self.client, "connect-test")

    async def __aenter__(self) -> Producer:
        await self.client.start()
        await self.producer.start()
        return self.producer

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.shutdown()
        await self.client.close()


async def test_a_connector_created_paused_and_deleted_on_one_node_is_so_on_the_other(
    cluster: ClusterProcesses, tmp_path: Path
):
    create_topic(cluster, "shared-lines")
    a, b = cluster.brokers["broker-a"], cluster.brokers["broker-b"]
    config = {"connector.class": "file-sink", "topics": "shared-lines", "file": str(tmp_path / "out.txt")}
    async with aiohttp.ClientSession() as session:
        await request(session, "POST", a, "/connectors", json={"name": "shared", "config": config})
        # In broker-b's table before broker-a's API answered.
        assert "shared" in await request(session, "GET", b, "/connectors")
        assert (await request(session, "GET", b, "/connectors/shared/config"))["file"] == config["file"]
        expected = [owner(task_work("shared", 0), GROUPS)]
        await placed(session, cluster, "shared", expected, GROUPS)
        await request(session, "PUT", b, "/connectors/shared/pause")
        for serve in (a, b):
            status = await status_of(session, serve, "shared")
            assert status is not None and status["connector"]["state"] == "PAUSED", status
        await request(session, "PUT", a, "/connectors/shared/resume")
        await request(session, "DELETE", b, "/connectors/shared")
        assert "shared" not in await request(session, "GET", a, "/connectors")


def file_lines(paths: list[Path]) -> Counter[str]:
    found: Counter[str] = Counter()
    for path in paths:
        if path.exists():
            found.update(path.read_text().splitlines())
    return found


async def test_a_file_sink_s_tasks_run_on_both_nodes_and_move_off_a_killed_one_each_message_written_once(
    tmp_path: Path,
):
    (tmp_path / "cluster").mkdir()
    cluster = ClusterProcesses(tmp_path / "cluster")
    try:
        create_topic(cluster, "lines")
        name = spreading_name("lines", 2)
        files = [tmp_path / f"out-{task}.txt" for task in range(2)]
        file = str(tmp_path / "out-{task}.txt")
        config = {"connector.class": "file-sink", "topics": "lines", "file": file, "tasks.max": "2"}
        expected_placement = [owner(task_work(name, task), GROUPS) for task in range(2)]
        async with aiohttp.ClientSession() as session, Sender(cluster) as producer:
            await request(session, "PUT", cluster.brokers["broker-b"], f"/connectors/{name}/config", json=config)
            await placed(session, cluster, name, expected_placement, GROUPS)
            before = {group: [f"before {group} {n}".encode() for n in range(300)] for group in GROUPS}
            for group in GROUPS:
                await send(producer, "lines", group, before[group])
            everything = [body.decode() for bodies in before.values() for body in bodies]

            async def all_written() -> bool:
                return set(file_lines(files)) >= set(everything)

            await eventually(all_written, 60, "the messages of both groups in the files")
            # Each task read queues of both groups: its file holds lines sent to each.
            for path in files:
                text = path.read_text()
                assert all(f"before {group} " in text for group in GROUPS), path

            killed = expected_placement[0]
            survivor = next(group for group in GROUPS if group != killed)
            cluster.brokers[killed].kill()  # SIGKILL: its task's batch in flight with it
            await placed(session, cluster, name, [survivor, survivor], (survivor,))
            after = [f"after {n}".encode() for n in range(200)]
            await send(producer, "lines", survivor, after)
            everything += [body.decode() for body in after]
            # The killed node is back: its queues' messages are written too, and task 0 goes back to it.
            cluster.start_broker(killed)
            cluster.wait_registered(GROUPS)
            await placed(session, cluster, name, expected_placement, GROUPS)
            await eventually(all_written, 60, "every message in the files")
            await asyncio.sleep(2.0)  # nothing more comes
            written = file_lines(files)
            assert sorted(written) == sorted(everything)
            assert [line for line, count in written.items() if count > 1] == [], "each message once"
    finally:
        cluster.stop()


def committed_rows(table: Path, group: str = "") -> int:
    """The rows committed to the table (of `group`'s queues only, if given)."""
    offsets = read_manifest(table).offsets
    return sum(offset for key, offset in offsets.items() if not group or key.startswith(f"{group}/"))


async def test_the_spark_sink_writes_every_message_of_both_groups_once_through_a_sigkill_of_its_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    table = tmp_path / "table"
    (tmp_path / "cluster").mkdir()
    cluster = ClusterProcesses(tmp_path / "cluster")
    try:
        create_topic(cluster, "telemetry")
        config = {
            "connector.class": "spark-sink", "topics": "telemetry", "path": str(table), "batch.size": "200",
            "batch.interval.ms": "500", "spark.sql.shuffle.partitions": "2",
        }  # fmt: skip
        async with aiohttp.ClientSession() as session, Sender(cluster) as producer:
            first = {group: [f"reading {group} {n}".encode() for n in range(1500)] for group in GROUPS}
            for group in GROUPS:
                await send(producer, "telemetry", group, first[group])
            total = sum(len(bodies) for bodies in first.values())
            await request(session, "PUT", cluster.brokers["broker-a"], "/connectors/lake/config", json=config)
            running = owner(task_work("lake", 0), GROUPS)
            assert running is not None
            await placed(session, cluster, "lake", [running], GROUPS)

            async def some_committed() -> bool:
                return 0 < committed_rows(table) < total

            await eventually(some_committed, 120, "a batch committed")
            cluster.brokers[running].kill()  # SIGKILL while batches are being committed
            assert committed_rows(table) < total, "the sink finished before the kill: give it more messages"
            survivor = next(group for group in GROUPS if group != running)
            await placed(session, cluster, "lake", [survivor], (survivor,))
            later = [f"reading later {n}".encode() for n in range(500)]
            await send(producer, "telemetry", survivor, later)
            total += len(later)

            async def survivor_s_committed() -> bool:
                return committed_rows(table, survivor) == len(first[survivor]) + len(later)

            # The survivor runs the task now: it opened the table the killed node held and commits to it.
            await eventually(survivor_s_committed, 180, f"{survivor}'s messages committed by {survivor}")
            cluster.start_broker(running)  # its group's messages are read again, by whichever node runs the task
            cluster.wait_registered(GROUPS)

            async def all_committed() -> bool:
                return committed_rows(table) == total

            await eventually(all_committed, 240, f"all {total} messages committed")
            manifest = read_manifest(table)
            assert {key.split("/", 1)[0] for key in manifest.offsets} == set(GROUPS)
    finally:
        cluster.stop()  # a clean stop: the last batch's files are moved into place

    bodies = table_bodies(table)
    expected = [body for bodies_of in first.values() for body in bodies_of] + later
    assert sorted(bodies) == sorted(expected)
    assert [body for body, count in bodies.items() if count > 1] == [], "each message once"


def table_bodies(table: Path) -> Counter[bytes]:
    """How many times each message body is in the Spark sink's table, read with Spark (started here, once needed)."""
    from spark_sink import spark_session
    from spark_sink.table_reader import read_table

    spark = spark_session.acquire("local[1]")
    try:
        rows = read_table(spark, table).select("body").collect()
    finally:
        spark_session.release()
    return Counter(bytes(row.body) for row in rows)
