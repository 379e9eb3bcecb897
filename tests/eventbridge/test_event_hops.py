"""One PutEvents event on its way to an HTTP target, through a real aiohttp server (eventbridge/rest.py) and the
runtime to a real aiohttp target: it is decoded at most once per hop and encoded once for the store and once for the
HTTP body.

The hops: ingress (rest.py, ingress.py, ingress_event.py, event_form.py, event_schema.py, bus.py's put), the router
(the send hook, router.py, inside that put: the event comes with its message) and the target (its task,
targets/target_task.py, reading the delivery queue, and what it calls). Every call of the JSON codecs the gateway
uses (json.loads, json.dumps, JSONEncoder.encode, orjson.loads, orjson.dumps) is observed with a profile hook and
assigned to the hop whose code made it; nothing is replaced."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from core import Broker
from eventbridge.bus import bus_topic
from eventbridge.rest import add_routes
from eventbridge.runtime import EventBridgeRuntime
from eventbridge.targets.http_target import HttpTargetClient
from tests.eventbridge.target_server import TargetServer
from tests.eventbridge.test_runtime import write_rules

ROOT = str(Path(__file__).resolve().parents[2])
PACKAGE = f"{ROOT}/eventbridge/"
# The PutEvents answer (web.json_response in rest.put_events) is JSON too, but not the event.
ANSWER_SITE = "eventbridge/rest.py:put_events"
EVENT = {"specversion": "1.0", "id": "e1", "source": "mqgate/test", "type": "t", "data": {"temp": 3, "note": "ü"}}


class CodecCalls:
    """JSON decodes and encodes made by EventBridge's code, as (hop, site) pairs."""

    def __init__(self) -> None:
        self.decodes: list[tuple[str, str]] = []
        self.encodes: list[tuple[str, str]] = []

    def per_hop(self, calls: list[tuple[str, str]]) -> dict[str, int]:
        return dict(Counter(hop for hop, site in calls if site != ANSWER_SITE))

    @contextmanager
    def observing(self) -> Iterator[None]:
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            if arg is orjson.loads:
                self._record(self.decodes, frame)
            elif arg is orjson.dumps:
                self._record(self.encodes, frame)
            return
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename.endswith(("json/__init__.py", "json/encoder.py")):
            caller = frame.f_back
            if code.co_name == "loads":
                self._record(self.decodes, caller)
            elif code.co_name == "dumps" or (
                code.co_name == "encode" and (caller is None or caller.f_code.co_name != "dumps")
            ):
                self._record(self.encodes, caller)

    @staticmethod
    def _record(calls: list[tuple[str, str]], frame: FrameType | None) -> None:
        site = None
        modules = []
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(PACKAGE):
                module = filename[len(ROOT) + 1 :]
                modules.append(module)
                site = site or f"{module}:{frame.f_code.co_name}"
            frame = frame.f_back
        if site is None:
            return  # not EventBridge's: the test's target server reading what it got
        if "eventbridge/router.py" in modules:
            hop = "router"
        elif "eventbridge/targets/target_task.py" in modules:
            hop = "target"
        else:
            hop = "ingress"
        calls.append((hop, site))


@pytest.fixture
async def gateway(broker: Broker, tmp_path: Path) -> AsyncIterator[tuple[str, TargetServer, EventBridgeRuntime]]:
    """The EventBridge API on a real aiohttp server, its runtime, and two HTTP targets, binary and structured."""
    target = await TargetServer().start()
    rules = "rules:\n" + "".join(
        f"  - name: {mode}\n    pattern: {{source: [mqgate/test], id: [{{prefix: {mode}}}]}}\n    targets:\n"
        f"      - {{id: t, type: http, url: '{target.url}?{mode}', mode: {mode}}}\n"
        for mode in ("binary", "structured")
    )
    write_rules(tmp_path / "rules", "r.yaml", rules)
    client = HttpTargetClient()
    runtime = EventBridgeRuntime(broker, tmp_path / "rules", client, reload_interval_s=0.05)
    await runtime.start()
    app = web.Application()
    add_routes(app, runtime)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/buses/default/events"
    yield url, target, runtime
    await runner.cleanup()
    await runtime.close()
    await client.close()
    await target.stop()


def request_for(ingress: str, event: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    if ingress == "structured":
        return json.dumps(event).encode(), {"Content-Type": "application/cloudevents+json"}
    if ingress == "batch":
        return json.dumps([event]).encode(), {"Content-Type": "application/cloudevents-batch+json"}
    headers = {f"ce-{name}": value for name, value in event.items() if name != "data"}
    return json.dumps(event["data"]).encode(), {**headers, "Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("ingress", "target_mode"), [("structured", "structured"), ("batch", "binary"), ("binary", "structured")]
)
async def test_an_event_is_decoded_at_most_once_per_hop(
    gateway: tuple[str, TargetServer, EventBridgeRuntime], ingress: str, target_mode: str
) -> None:
    url, target, _ = gateway
    event = {**EVENT, "id": f"{target_mode}-1"}
    body, headers = request_for(ingress, event)
    calls = CodecCalls()
    async with aiohttp.ClientSession() as session:
        with calls.observing():
            async with session.post(url, data=body, headers=headers) as response:
                answer = await response.json()
            await target.wait_for(1)
    assert answer == {"FailedEntryCount": 0, "Entries": [{"EventId": event["id"]}]}
    received = target.received[0]
    assert (received.query, received.attributes["id"]) == (target_mode, event["id"])
    assert received.data["data"] == event["data"]  # ORIGINAL: the whole event
    # Ingress decodes the request (in binary mode, its data); the router gets the event with its message; the
    # target's task decodes what it reads from its queue.
    assert calls.per_hop(calls.decodes) == {"ingress": 1, "target": 1}, calls.decodes
    # Once for the store, once for the HTTP body; a batch element is also written once to be measured
    # (MAX_EVENT_BYTES counts its compact JSON).
    assert calls.per_hop(calls.encodes) == {"ingress": 2 if ingress == "batch" else 1, "target": 1}, calls.encodes


async def test_an_event_sent_by_a_core_producer_is_decoded_once_by_the_router(
    gateway: tuple[str, TargetServer, EventBridgeRuntime],
) -> None:
    _, target, runtime = gateway
    calls = CodecCalls()
    with calls.observing():
        await runtime.buses.producer.send(bus_topic("default"), json.dumps({**EVENT, "id": "binary-2"}).encode())
        await target.wait_for(1)
    assert calls.per_hop(calls.decodes) == {"router": 1, "target": 1}, calls.decodes
    assert calls.per_hop(calls.encodes) == {"target": 1}, calls.encodes
