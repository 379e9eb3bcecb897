"""The http-sink's `headers` as docs/connectors.md describes them, on a real broker and worker POSTing to a real
aiohttp server: `Name: value` items separated by `|`, values holding commas and colons, the default content
type, and a malformed item refused naming it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from connectors.errors import InvalidConfig
from connectors.plugins import PluginRegistry
from connectors.worker import Worker
from core import Producer

# The example of docs/connectors.md (test_the_example_is_the_documented_one keeps them equal).
DOCUMENTED = "Authorization: Bearer s3cret | Content-Type: application/json | X-Tags: a, b | X-Window: 08:00-18:00"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "connectors.md"


def test_the_example_is_the_documented_one():
    assert f"\n{DOCUMENTED}\n" in DOCS.read_text()


async def receive(make_broker, tmp_path, headers: str | None) -> dict[str, str]:
    """The headers of the one POST the sink makes for one record."""
    received: asyncio.Queue[dict[str, str]] = asyncio.Queue()

    async def handle(request: web.Request) -> web.Response:
        await received.put(dict(request.headers))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    broker = await make_broker()
    worker = Worker(broker, tmp_path / "connect", PluginRegistry.load())
    await worker.start()
    try:
        await Producer(broker).send("events", b'{"n": 1}')
        config = {
            "connector.class": "http-sink",
            "topics": "events",
            "url": f"http://127.0.0.1:{runner.addresses[0][1]}/hook",
        }
        if headers is not None:
            config["headers"] = headers
        await worker.create("hook", config)
        return await asyncio.wait_for(received.get(), 30)
    finally:
        await worker.close()
        await runner.cleanup()


async def test_the_documented_headers_arrive_as_written(make_broker, tmp_path):
    got = await receive(make_broker, tmp_path, DOCUMENTED)
    assert got["Authorization"] == "Bearer s3cret"
    assert got["Content-Type"] == "application/json"
    assert got["X-Tags"] == "a, b"  # a comma is part of the value
    assert got["X-Window"] == "08:00-18:00"  # the first colon ends the name


async def test_without_headers_the_body_goes_as_octet_stream(make_broker, tmp_path):
    got = await receive(make_broker, tmp_path, None)
    assert got["Content-Type"] == "application/octet-stream"
    assert "Authorization" not in got


async def test_a_header_without_a_colon_is_refused_naming_it(make_broker, tmp_path):
    broker = await make_broker()
    worker = Worker(broker, tmp_path / "connect", PluginRegistry.load())
    await worker.start()
    try:
        config = {"connector.class": "http-sink", "topics": "events", "url": "http://127.0.0.1:9/hook",
                  "headers": "X-Team: ops | Bearer abc"}  # fmt: skip
        try:
            await worker.create("hook", config)
        except InvalidConfig as exc:
            assert [(e.key, e.message) for e in exc.errors] == [
                ("headers", "invalid value 'X-Team: ops | Bearer abc': header 'Bearer abc': expected 'Name: value'")
            ]
        else:
            raise AssertionError("a header without a colon was accepted")
    finally:
        await worker.close()
