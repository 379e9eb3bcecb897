"""The connector REST API: round trips with an aiohttp client against the real application, worker, broker and
store (in process, so a test can also send to topics), and one against a real `mqgate serve`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from connectors.plugins import PluginRegistry
from connectors.rest import add_routes
from connectors.worker import Worker
from core import Producer
from mqgate.http.app import build_app
from mqgate.http.config import HttpConfig
from tests.core.conftest import make_broker  # noqa: F401  (the in-process broker fixture)
from tests.serve_process import ServeProcess

WAIT_S = 20.0


class Api:
    def __init__(self, client: TestClient, worker: Worker) -> None:
        self.client = client
        self.worker = worker

    async def call(self, method: str, path: str, body: Any = None, raw: str | None = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"json": body} if raw is None else {"data": raw}
        if body is None and raw is None:
            kwargs = {}
        response = await self.client.request(method, path, **kwargs)
        text = await response.text()
        if response.status != 204 and text:
            assert response.content_type == "application/json", text
            return response.status, await response.json()
        return response.status, None


@pytest.fixture
async def api(tmp_path: Path, make_broker: Callable[..., Any]) -> AsyncIterator[Api]:  # noqa: F811
    broker = await make_broker()
    worker = Worker(broker, tmp_path / "connect", PluginRegistry.load())
    await worker.start()
    app = build_app(HttpConfig())
    add_routes(app, worker)
    async with TestClient(TestServer(app)) as client:
        yield Api(client, worker)
    await worker.close()


def sink_config(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": "file-sink", "topics": "orders", "file": str(tmp_path / "out.txt"), **extra}


async def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_plugins_are_listed(api: Api):
    status, plugins = await api.call("GET", "/connector-plugins")
    assert status == 200
    by_name = {plugin["name"]: plugin for plugin in plugins}
    assert by_name["file-sink"] == {
        "class": "connectors.file_sink.FileSinkConnector",
        "name": "file-sink",
        "type": "sink",
        "version": by_name["file-sink"]["version"],
    }
    assert by_name["file-source"]["type"] == "source"


async def test_a_file_sink_created_through_the_api_writes_paused_and_resumed(api: Api, tmp_path: Path):
    out = tmp_path / "out.txt"
    status, info = await api.call("POST", "/connectors", {"name": "orders-to-file", "config": sink_config(tmp_path)})
    assert status == 201
    assert info == {
        "name": "orders-to-file",
        "config": {**sink_config(tmp_path), "name": "orders-to-file"},
        "tasks": [{"connector": "orders-to-file", "task": 0}],
        "type": "sink",
    }
    assert await api.call("GET", "/connectors") == (200, ["orders-to-file"])
    assert await api.call("GET", "/connectors/orders-to-file") == (200, info)
    assert await api.call("GET", "/connectors/orders-to-file/config") == (200, info["config"])
    status, tasks = await api.call("GET", "/connectors/orders-to-file/tasks")
    assert status == 200
    assert [task["id"] for task in tasks] == [{"connector": "orders-to-file", "task": 0}]
    assert tasks[0]["config"]["file"] == str(out)

    producer = Producer(api.worker.broker)
    for number in range(5):
        await producer.send("orders", f"order {number}".encode())
    await wait_for(lambda: len(lines(out)) == 5, "5 lines in the file")
    assert sorted(lines(out)) == [f"order {number}" for number in range(5)]  # 4 queues: any order between them
    status, body = await api.call("GET", "/connectors/orders-to-file/status")
    assert status == 200
    assert body == {
        "name": "orders-to-file",
        "connector": {"state": "RUNNING", "worker_id": "mqgate"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "mqgate"}],
        "type": "sink",
    }

    assert await api.call("PUT", "/connectors/orders-to-file/pause") == (202, None)
    _, body = await api.call("GET", "/connectors/orders-to-file/status")
    assert body["connector"]["state"] == "PAUSED"
    assert [task["state"] for task in body["tasks"]] == ["PAUSED"]
    for number in range(5, 8):
        await producer.send("orders", f"order {number}".encode())
    await asyncio.sleep(1.0)
    assert len(lines(out)) == 5  # nothing written while paused

    assert await api.call("PUT", "/connectors/orders-to-file/resume") == (202, None)
    await wait_for(lambda: len(lines(out)) == 8, "the 3 lines sent while paused")
    assert sorted(lines(out)) == [f"order {number}" for number in range(8)]
    _, body = await api.call("GET", "/connectors/orders-to-file/status")
    assert body["connector"]["state"] == "RUNNING"

    assert await api.call("DELETE", "/connectors/orders-to-file") == (204, None)
    assert await api.call("GET", "/connectors") == (200, [])
    status, body = await api.call("GET", "/connectors/orders-to-file")
    assert status == 404
    assert body["error_code"] == 404
    assert "connector 'orders-to-file' does not exist" in body["message"]


async def test_an_invalid_config_is_a_400_naming_each_key(api: Api, tmp_path: Path):
    config = {"connector.class": "file-sink", "tasks.max": "0", "topics": "orders"}
    status, body = await api.call("POST", "/connectors", {"name": "bad", "config": config})
    assert status == 400
    assert body["error_code"] == 400
    assert {error["key"]: error["message"] for error in body["errors"]} == {
        "tasks.max": "invalid value '0': must be at least 1",
        "file": "missing required configuration",
    }
    assert "tasks.max" in body["message"] and "file" in body["message"]
    status, body = await api.call("POST", "/connectors", {"name": "bad", "config": {"connector.class": "nope"}})
    assert status == 400
    assert body["errors"][0]["key"] == "connector.class"
    assert "installed: " in body["errors"][0]["message"] and "file-sink" in body["errors"][0]["message"]
    status, body = await api.call("POST", "/connectors", {"name": "a b", "config": sink_config(tmp_path)})
    assert status == 400
    assert [error["key"] for error in body["errors"]] == ["name"]
    assert await api.call("GET", "/connectors") == (200, [])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"name": "x", "config": {', "invalid JSON body: Expecting property name enclosed in double quotes: line 1"),
        ('{"name": "x" "config": {}}', "invalid JSON body: Expecting ',' delimiter: line 1 column 14 (char 13)"),
        ("", "the request body is empty; expected JSON"),
        ("[1]", 'expected {"name": ..., "config": {...}}, got an array'),
        ('{"config": {}}', 'the body needs "name"'),
        ('{"name": "x"}', 'the body needs "config"'),
        (
            '{"name": "x", "config": {"topics": ["a"]}}',
            "\"config\": config key 'topics': expected a string, got an array",
        ),
        ('{"name": "x", "config": 5}', '"config": expected a JSON object of config keys, got a number'),
    ],
)
async def test_bad_bodies_are_400_naming_the_problem(api: Api, raw: str, message: str):
    status, body = await api.call("POST", "/connectors", raw=raw)
    assert status == 400
    assert body["error_code"] == 400
    assert message in body["message"]


async def test_numbers_and_booleans_are_taken_as_strings(api: Api, tmp_path: Path):
    config: dict[str, Any] = {**sink_config(tmp_path), "tasks.max": 2, "x.flag": True}
    status, info = await api.call("POST", "/connectors", {"name": "typed", "config": config})
    assert status == 201
    assert info["config"]["tasks.max"] == "2"
    assert info["config"]["x.flag"] == "true"


async def test_duplicates_conflict_and_put_creates_or_replaces(api: Api, tmp_path: Path):
    assert (await api.call("POST", "/connectors", {"name": "s", "config": sink_config(tmp_path)}))[0] == 201
    status, body = await api.call("POST", "/connectors", {"name": "s", "config": sink_config(tmp_path)})
    assert status == 409
    assert "connector 's' already exists" in body["message"]

    status, info = await api.call("PUT", "/connectors/t/config", sink_config(tmp_path, file=str(tmp_path / "t.txt")))
    assert status == 201
    assert info["config"]["name"] == "t"
    status, info = await api.call("PUT", "/connectors/t/config", sink_config(tmp_path, file=str(tmp_path / "u.txt")))
    assert status == 200
    assert info["config"]["file"] == str(tmp_path / "u.txt")
    # PUT /connectors/{name} takes the REST body shape too.
    status, info = await api.call("PUT", "/connectors/t", {"name": "t", "config": sink_config(tmp_path)})
    assert (status, info["config"]["file"]) == (200, str(tmp_path / "out.txt"))
    status, body = await api.call("PUT", "/connectors/t", {"name": "other", "config": sink_config(tmp_path)})
    assert (status, body["message"]) == (400, "the body names 'other', the path 't'")
    status, body = await api.call("PUT", "/connectors/t/config", {**sink_config(tmp_path), "name": "other"})
    assert status == 400
    assert body["errors"] == [{"key": "name", "message": "'other' differs from the connector's name 't'"}]

    status, expanded = await api.call("GET", "/connectors?expand=status&expand=info")
    assert status == 200
    assert sorted(expanded) == ["s", "t"]
    assert expanded["t"]["status"]["connector"]["state"] == "RUNNING"
    assert expanded["t"]["info"]["config"]["file"] == str(tmp_path / "out.txt")
    status, only_info = await api.call("GET", "/connectors?expand=info")
    assert set(only_info["s"]) == {"info"}
    status, body = await api.call("GET", "/connectors?expand=everything")
    assert (status, body["message"]) == (400, "expand='everything': expected status or info")


async def test_restart(api: Api, tmp_path: Path):
    await api.call("POST", "/connectors", {"name": "r", "config": sink_config(tmp_path)})
    assert await api.call("POST", "/connectors/r/restart") == (204, None)
    status, body = await api.call("POST", "/connectors/r/restart?includeTasks=true&onlyFailed=false")
    assert status == 202
    assert body["connector"]["state"] == "RUNNING"
    assert [task["id"] for task in body["tasks"]] == [0]
    status, body = await api.call("POST", "/connectors/r/restart?includeTasks=yes")
    assert (status, body["message"]) == (400, "query parameter includeTasks='yes': expected true or false")
    status, body = await api.call("POST", "/connectors/missing/restart")
    assert status == 404


async def test_validate_answers_kafka_connects_config_infos(api: Api, tmp_path: Path):
    path = "/connector-plugins/file-sink/config/validate"
    status, body = await api.call("PUT", path, sink_config(tmp_path, name="v"))
    assert status == 200
    assert (body["name"], body["error_count"]) == ("connectors.file_sink.FileSinkConnector", 0)
    assert body["groups"] == ["Common", "Error Handling", "file-sink"]
    status, body = await api.call("PUT", path, {"name": "v", "topics": "orders", "tasks.max": "many"})
    assert (status, body["error_count"]) == (200, 2)
    errors = {entry["value"]["name"]: entry["value"]["errors"] for entry in body["configs"] if entry["value"]["errors"]}
    assert errors == {
        "tasks.max": ["invalid value 'many': expected an integer"],
        "file": ["missing required configuration"],
    }
    # The class path names the plugin as well.
    status, body = await api.call(
        "PUT", "/connector-plugins/connectors.file_sink.FileSinkConnector/config/validate", {}
    )
    assert status == 200 and body["error_count"] == 3  # name, topics and file; connector.class comes from the path
    status, body = await api.call("PUT", "/connector-plugins/kafka-sink/config/validate", {})
    assert status == 404 and "no connector plugin 'kafka-sink'" in body["message"]
    status, body = await api.call("PUT", path, {"connector.class": "file-source"})
    assert status == 400 and "'file-source' in the body is not the plugin 'file-sink'" in body["message"]
    status, body = await api.call("PUT", path, raw="{nope")
    assert status == 400 and body["message"].startswith("invalid JSON body: Expecting property name")


async def test_unknown_connectors_are_404_on_every_route(api: Api):
    for method, path in [
        ("GET", "/connectors/ghost"),
        ("DELETE", "/connectors/ghost"),
        ("GET", "/connectors/ghost/config"),
        ("GET", "/connectors/ghost/status"),
        ("GET", "/connectors/ghost/tasks"),
        ("PUT", "/connectors/ghost/pause"),
        ("PUT", "/connectors/ghost/resume"),
    ]:
        status, body = await api.call(method, path)
        assert (status, body["error_code"]) == (404, 404), (method, path)
        assert body["message"].startswith("connector 'ghost' does not exist"), (method, path)


async def test_round_trip_against_mqgate_serve_with_a_token(tmp_path: Path):
    config = tmp_path / "mqgate.toml"
    config.write_text('[http]\ntoken = "rest-token"\n')
    server = ServeProcess(tmp_path / "data", "--config", config)
    try:
        headers = {"Authorization": "Bearer rest-token"}
        async with aiohttp.ClientSession(base_url=server.http_url) as session:
            async with session.get("/connectors") as response:
                assert response.status == 401
            body = {"name": "sink", "config": sink_config(tmp_path)}
            async with session.post("/connectors", json=body, headers=headers) as response:
                assert response.status == 201, await response.text()
            async with session.get("/connectors/sink/status", headers=headers) as response:
                assert (await response.json())["connector"]["state"] == "RUNNING"
        assert server.stop() == 0
        # The connector outlives the process: it is kept in the core.
        server = ServeProcess(tmp_path / "data", "--config", config)
        async with (
            aiohttp.ClientSession(base_url=server.http_url, headers=headers) as session,
            session.get("/connectors") as response,
        ):
            assert await response.json() == ["sink"]
    finally:
        server.stop()
