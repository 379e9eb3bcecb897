"""A real HTTP target for tests: an aiohttp server on a free loopback port that parses every request with the
cloudevents SDK and keeps what it received; it can be told to answer with a given status."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Collection, Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http
from cloudevents.core.formats.json import JSONFormat


@dataclass
class Received:
    attributes: dict[str, Any]
    data: Any
    headers: dict[str, str]
    query: str = ""  # the request's query string: tells targets sharing this server apart


@dataclass
class TargetServer:
    status: int = 200
    received: list[Received] = field(default_factory=list)
    requests: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    async def start(self, port: int = 0) -> TargetServer:
        app = web.Application()
        app.router.add_post("/events", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = await request.read()
        if self.status >= 300:
            return web.Response(status=self.status, text="not now")
        event = from_http(HTTPMessage(dict(request.headers), body), JSONFormat())
        self.received.append(
            Received(event.get_attributes(), event.get_data(), dict(request.headers), request.query_string)
        )
        self._arrived.set()
        return web.Response(status=204)

    def ids(self) -> list[str]:
        return [r.attributes["id"] for r in self.received]

    async def wait_for(self, count: int, timeout_s: float = 20.0) -> None:
        """Until `count` requests have arrived, repeats included: for deliveries that cannot repeat (no crash in
        between). Where at-least-once delivery may repeat some, wait_for_all waits for what is expected."""
        async with asyncio.timeout(timeout_s):
            while len(self.received) < count:
                self._arrived.clear()
                await self._arrived.wait()

    async def wait_for_all(
        self, expected: Collection[Hashable], key: Callable[[Received], Hashable], timeout_s: float = 20.0
    ) -> None:
        """Until every item of `expected` has arrived, as `key` of a request, however often each came. A repeat
        does not end the wait; after `timeout_s` an AssertionError says how many are missing."""
        missing = set(expected)
        seen = 0
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    for received in self.received[seen:]:
                        missing.discard(key(received))
                    seen = len(self.received)
                    if not missing:
                        return
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            raise AssertionError(
                f"{len(missing)} of {len(expected)} expected requests missing after {timeout_s} s "
                f"({seen} received), e.g. {sorted(map(str, missing))[:5]}"
            ) from None


@pytest.fixture
async def target() -> AsyncIterator[TargetServer]:
    """A started TargetServer, stopped after the test (import it into a test module to use it)."""
    server = await TargetServer().start()
    yield server
    await server.stop()


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
