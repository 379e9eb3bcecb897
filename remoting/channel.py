"""One remoting connection, either end (Netty's channel in RocketMQ): frames in, commands dispatched; commands out.

Both ends of the protocol send requests: a client asks a broker, and a broker asks its clients (a transaction's
check-back, a group's changed members). So the same class serves both: a reply (flag bit 0) completes the request
it answers, matched by opaque (`invoke`); a request goes to the channel's `on_request`, each in a task of its own,
so that a request that waits (a long-polled pull) holds up nothing else on the connection. Its reply, if it has one,
is written when it is ready; replies may leave out of order, as in RocketMQ.

Reading pauses while MAX_PENDING_REQUESTS requests of the connection are being served. A peer that breaks the
protocol (frame.py says how) is disconnected with a log line naming it and what was wrong; other connections go on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

from remoting.command import ONEWAY_FLAG, RemotingCommand
from remoting.errors import RemotingError, RemotingProtocolError
from remoting.frame import FrameReader, encode_frame

log = logging.getLogger(__name__)

# Requests of one connection served at once before reading pauses: a client pipelining sends waits for the store
# instead of filling memory (Netty's server in RocketMQ bounds its executors' queues the same way).
MAX_PENDING_REQUESTS = 1024

# What serves a request that came on a channel: its reply, or None for none (a oneway request, or a reply sent
# later by other means).
RequestHandler = Callable[["Channel", RemotingCommand], Awaitable[RemotingCommand | None]]

# Opaques of the requests this process sends (RocketMQ: one AtomicInteger per process).
_opaques = itertools.count(1)


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No reply came in time."""


class ChannelClosedError(RemotingError, ConnectionError):
    """The connection closed before a reply came (or before the request could be sent)."""


class Channel(asyncio.Protocol):
    def __init__(self, on_request: RequestHandler, on_close: Callable[[Channel], None] | None = None) -> None:
        self._on_request = on_request
        self._on_close = on_close
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._paused = False
        self._out: list[bytes] = []  # frames to write at the end of this turn of the loop
        self.peer = "?"
        self.peer_address: tuple[str, int] = ("0.0.0.0", 0)  # the other end's IP address and port
        self.closed = asyncio.get_running_loop().create_future()

    # --- asyncio.Protocol ---

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if peer:
            self.peer_address = (str(peer[0]), int(peer[1]))

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            for command in self._reader.commands():
                if command.is_response:
                    waiter = self._pending.pop(command.opaque, None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(command)
                    continue
                task = asyncio.get_running_loop().create_task(self._serve(command))
                self._serving.add(task)
                task.add_done_callback(self._served)
                if len(self._serving) >= MAX_PENDING_REQUESTS and not self._paused and self._transport is not None:
                    self._paused = True
                    self._transport.pause_reading()
        except RemotingProtocolError as exc:
            log.warning("remoting peer %s disconnected: %s", self.peer, exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(ChannelClosedError(f"connection to {self.peer} closed before the reply"))
        self._pending.clear()
        for task in list(self._serving):
            task.cancel()
        if not self.closed.done():
            self.closed.set_result(None)
        if self._on_close is not None:
            self._on_close(self)

    # --- serving requests ---

    async def _serve(self, request: RemotingCommand) -> None:
        reply = await self._on_request(self, request)
        if reply is not None:
            self.send(reply)

    def _served(self, task: asyncio.Task[None]) -> None:
        self._serving.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("remoting request from %s failed", self.peer, exc_info=task.exception())
        if self._paused and len(self._serving) < MAX_PENDING_REQUESTS // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    # --- sending ---

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def send(self, command: RemotingCommand) -> None:
        """Write a command (a reply, or a request whose reply nobody waits for); dropped if the connection is gone.

        Frames written in one turn of the event loop leave in one write: a client with many sends outstanding gets
        its replies in one system call instead of one each (what the echo server of bench/remoting.py does)."""
        if not self.is_open:
            return
        self._out.append(encode_frame(command))
        if len(self._out) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request and wait for its reply (RemotingClient.invokeSync). Raises RemotingTimeoutError or
        ChannelClosedError."""
        if not self.is_open:
            raise ChannelClosedError(f"connection to {self.peer} is closed")
        request.opaque = next(_opaques) & 0x7FFFFFFF
        waiter: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[request.opaque] = waiter
        self.send(request)
        try:
            async with asyncio.timeout(timeout_s):  # not wait_for, which can swallow a cancel in Python 3.11
                return await waiter
        except TimeoutError:
            raise RemotingTimeoutError(
                f"no reply from {self.peer} to request code {request.code} within {timeout_s} s"
            ) from None
        finally:
            self._pending.pop(request.opaque, None)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a request that gets no reply (RemotingClient.invokeOneway)."""
        request.opaque = next(_opaques) & 0x7FFFFFFF
        request.flag |= ONEWAY_FLAG
        self.send(request)

    def close(self) -> None:
        if self._transport is not None:
            if self._out:
                self._flush()  # what was sent before the close leaves before it
            self._transport.close()
