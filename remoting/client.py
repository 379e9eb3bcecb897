"""The remoting client: one channel per address, opened on first use and again after it closed, for what speaks
to NameServers and brokers (a broker registering with its NameServers; a door reaching a remote broker). Requests
the other end sends on the channel (a broker's check-back to a producer) go to `on_request`."""

from __future__ import annotations

import asyncio

from remoting.channel import Channel, ChannelClosedError, RequestHandler
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand

# How long a connection may take to open (RocketMQ's connectTimeoutMillis: 3 s).
CONNECT_TIMEOUT_S = 3.0


async def _not_served(channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
    return request.reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {request.code} is not supported")


class RemotingClient:
    def __init__(self, on_request: RequestHandler = _not_served) -> None:
        self._on_request = on_request
        self._channels: dict[str, Channel] = {}
        self._opening: dict[str, asyncio.Future[Channel]] = {}

    async def channel(self, address: str) -> Channel:
        """The open channel to `address` (HOST:PORT), opened if need be; raises ChannelClosedError if it cannot be."""
        channel = self._channels.get(address)
        if channel is not None and channel.is_open:
            return channel
        opening = self._opening.get(address)
        if opening is not None:
            return await asyncio.shield(opening)
        future: asyncio.Future[Channel] = asyncio.get_running_loop().create_future()
        self._opening[address] = future
        try:
            host, _, port = address.rpartition(":")
            loop = asyncio.get_running_loop()
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancel.
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    _, opened = await loop.create_connection(lambda: Channel(self._on_request), host, int(port))
            except (OSError, TimeoutError, ValueError) as exc:
                error = ChannelClosedError(f"cannot connect to {address}: {exc}")
                future.set_exception(error)
                future.exception()  # retrieved: only the waiters that share it raise
                raise error from None
            self._channels[address] = opened
            future.set_result(opened)
            return opened
        finally:
            del self._opening[address]
            if not future.done():  # cancelled while opening: those sharing the opening are cancelled with it
                future.cancel()

    async def invoke(self, address: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return await (await self.channel(address)).invoke(request, timeout_s)

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        (await self.channel(address)).invoke_oneway(request)

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.close()
        for channel in channels:
            await channel.closed
