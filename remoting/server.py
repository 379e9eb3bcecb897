"""The remoting server: a TCP listener whose connections are channels (channel.py), and the table of what serves
each request code (RocketMQ's processor table). A code nobody serves is answered REQUEST_CODE_NOT_SUPPORTED with a
remark naming it; a request a handler refuses (RemotingRequestError) is answered with its code and message; a handler
that fails otherwise answers SYSTEM_ERROR with what failed, its traceback logged; the connection goes on.

Both the broker's remoting port and the NameServer are such a server with their own handlers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from remoting.channel import Channel, RequestHandler
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError

log = logging.getLogger(__name__)


class RemotingServer:
    def __init__(self, name: str) -> None:
        """`name`: what the logs call it ("broker", "namesrv")."""
        self.name = name
        self._handlers: dict[int, RequestHandler] = {}
        self.channels: set[Channel] = set()
        self._closed_listeners: list[Callable[[Channel], None]] = []
        self._server: asyncio.Server | None = None

    def register(self, code: int, handler: RequestHandler) -> None:
        self._handlers[code] = handler

    def add_close_listener(self, listener: Callable[[Channel], None]) -> None:
        """`listener` hears of every connection that closes (a client or broker gone)."""
        self._closed_listeners.append(listener)

    async def start(self, host: str, port: int) -> asyncio.Server:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._channel, host, port, reuse_address=True)
        return self._server

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for channel in list(self.channels):
            channel.close()
        if self._server is not None:
            await self._server.wait_closed()

    def _channel(self) -> Channel:
        channel = Channel(self._serve, self._gone)
        self.channels.add(channel)
        return channel

    def _gone(self, channel: Channel) -> None:
        self.channels.discard(channel)
        for listener in self._closed_listeners:
            listener(channel)

    async def _serve(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(request.code)
        if handler is None:
            log.info("%s: request code %d from %s is not supported", self.name, request.code, channel.peer)
            return request.reply(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {request.code} is not supported by mqgate"
            )
        try:
            return await handler(channel, request)
        except asyncio.CancelledError:
            raise
        except RemotingRequestError as exc:
            log.info("%s: request code %d from %s refused: %s", self.name, request.code, channel.peer, exc)
            return request.reply(exc.code, str(exc), ext_fields=exc.ext_fields)
        except Exception as exc:
            log.exception("%s: request code %d from %s failed", self.name, request.code, channel.peer)
            return request.reply(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
