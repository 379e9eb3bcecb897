"""The network side of the MQTT gateway: TCP (and TLS) listeners on asyncio.Protocol, and MQTT over WebSocket.

Transport and back-pressure only: bytes go into the connection's `MqttConnection`, its events go to the gateway
(`MqttGateway.handle`) in order (one task per connection, not per packet), and whatever the connection queued is written
back. A connection whose peer breaks the protocol is closed with a log line naming the client and the reason; nothing
else is touched. Reading pauses while a client has many publishes waiting to be stored, and delivery pauses while the
socket's write buffer is full: a slow client slows itself down, not the server. A connection the server ends (its
DISCONNECT, a CONNACK refusing it, a broken packet, a keepalive timeout) is closed with a lingering close: see
DISCONNECT_LINGER_S.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import http
import logging
import ssl
import typing
import urllib.parse
from typing import Any

import mqtt5

from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.gateway import MqttGateway
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sessions.session import Session
from mqtt_bridge.wire.protocol import Event, Limits, MqttConnection, State

log = logging.getLogger(__name__)

# Events waiting for the gateway, per connection, before reading pauses (a pipelining publisher waits for the
# store instead of filling memory).
MAX_PENDING_EVENTS = 1024
# Protocol failures that refuse what the client sent rather than how it spoke, counted as refusals: Packet too large
# (0x95, past max_packet_size) and Receive Maximum exceeded (0x93, a QoS 1/2 PUBLISH past receive_maximum).
REFUSING_DISCONNECTS = frozenset({0x95, 0x93})
# MQTT 3.1.2.10: a client silent for one and a half keepalive periods is disconnected.
KEEPALIVE_FACTOR = 1.5
# Bytes queued for a WebSocket client before delivery to it pauses, and the level at which it resumes: asyncio's
# default write-buffer limits (64 KiB high, a quarter of it low), so a WebSocket client is held back like a TCP one.
WEBSOCKET_HIGH_WATER = 64 * 1024
WEBSOCKET_LOW_WATER = WEBSOCKET_HIGH_WATER // 4
# Queued writes are joined into frames of up to this size (a single larger write still goes as one frame): well
# under the 1 MiB default message limit of the websockets library, which Python MQTT clients build on.
WEBSOCKET_FRAME_BYTES = 64 * 1024
# How long a connection the server ends keeps reading (and dropping) what its client still sends, after the last
# bytes for it (a DISCONNECT, a CONNACK refusal) and the end of its stream (TCP: a FIN, by write_eof). Closing at
# once makes the kernel answer the client's next packets, PUBRELs in flight say, with a reset, and a client whose
# send fails gives up before it reads the reason it was sent (Eclipse Paho's MQTT 5 test test_flow_control2); a
# client that reads the DISCONNECT closes at once, which ends the wait. Apache httpd's lingering close waits 2 s
# the same way (SECONDS_TO_LINGER). TLS cannot half-close, and needs not: closing sends close_notify and then reads
# and drops application data until the client's close_notify or EOF (the event loop's SSL shutdown), for at most
# this long here (ssl_shutdown_timeout; the loop's default is 30 s). WebSocket's closing handshake does the same
# after the server's close frame (close_timeout; the websockets library's default is 10 s).
DISCONNECT_LINGER_S = 2.0


class Wakeup:
    """`asyncio.Event` for a single waiting task, without the Event's deque of waiters.

    A deque allocates a 64-slot block as soon as it exists (about 760 bytes), and each idle connection kept two
    Events and two more deques: a quarter of what an idle connection cost. Here a waiter's future exists only while
    it waits. A second task waiting at the same time is a bug, so it raises rather than one of them hanging.
    """

    __slots__ = ("_flag", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    async def wait(self) -> None:
        if self._flag:
            return
        if self._waiter is not None and not self._waiter.done():
            raise RuntimeError("Wakeup.wait: another task is already waiting")
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            if self._waiter is waiter:
                self._waiter = None


T = typing.TypeVar("T")


class DequeOnDemand(typing.Generic[T]):
    """The part of a deque the gateway uses (append, [0], popleft, truth), allocated on the first append: most
    connections never queue a retained message, and an empty deque costs about 760 bytes."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: collections.deque[T] | None = None

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items) if self._items is not None else 0

    def __getitem__(self, index: int) -> T:
        if self._items is None:
            raise IndexError("DequeOnDemand index out of range")
        return self._items[index]

    def append(self, item: T) -> None:
        if self._items is None:
            self._items = collections.deque()
        self._items.append(item)

    def popleft(self) -> T:
        if not self._items:
            raise IndexError("pop from an empty DequeOnDemand")
        return self._items.popleft()


class ClientLink(abc.ABC):
    """One client connection, whatever the transport: what the gateway talks to."""

    def __init__(self, gateway: MqttGateway, limits: Limits, peer: str) -> None:
        self.gateway = gateway
        self.conn = MqttConnection(limits, gateway.traffic)
        gateway.traffic.sockets += 1
        self.peer = peer
        self.client_id = ""
        self.username: str | None = None
        self.session: Session | None = None
        self.taken_over = False
        self.retained: DequeOnDemand[tuple[MqttMessage, int, int | None]] = DequeOnDemand()
        self.woken = Wakeup()
        self.writable = True
        # Events not yet handed to the gateway; the worker takes the whole list at once.
        self._events: list[Event] = []
        self._has_events = Wakeup()
        self._loop = asyncio.get_running_loop()
        self._worker = self._loop.create_task(self._work())
        self._delivery: asyncio.Task[None] | None = None
        self._keepalive: asyncio.TimerHandle | None = None
        self._keepalive_s = gateway.config.connect_timeout_s
        self._last_heard = self._loop.time()
        self._closed = False
        self._graceful = False
        self._arm_keepalive(self._keepalive_s)

    # --- transport hooks (implemented by the subclasses) ---

    @abc.abstractmethod
    def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def close_transport(self, linger: bool) -> None:
        """Close after what was written; with `linger` (the server ends the connection), keep reading and
        dropping what the client sends for DISCONNECT_LINGER_S, or until it closes, so that it reads the end."""

    @abc.abstractmethod
    def pause_reading(self) -> None: ...

    @abc.abstractmethod
    def resume_reading(self) -> None: ...

    # --- input ---

    def received(self, data: bytes) -> None:
        if self._closed:  # read while the connection lingers (DISCONNECT_LINGER_S): dropped, never acted upon
            return
        self._last_heard = self._loop.time()
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            self._protocol_failure(exc)
            return
        except Exception as exc:  # a codec bug must cost one connection, not the server
            log.exception("client %r (%s): packet handling failed", self.client_id, self.peer)
            self._protocol_failure(ProtocolError(f"internal error: {exc}", 0x83))
            return
        if events:
            self._events.extend(events)
            self._has_events.set()
            if len(self._events) > MAX_PENDING_EVENTS:
                self.pause_reading()
        self.flush()

    def _protocol_failure(self, exc: ProtocolError) -> None:
        log.warning("client %r (%s) disconnected: %s", self.client_id or "?", self.peer, exc)
        if exc.reason_code in REFUSING_DISCONNECTS:  # a PUBLISH (or other packet) refused with the connection
            self.gateway.counters.refusal(exc.reason_code)
        self.flush()
        self.shutdown(publish_will=True)

    async def _work(self) -> None:
        gateway = self.gateway
        try:
            while True:
                await self._has_events.wait()
                self._has_events.clear()
                while self._events:
                    batch, self._events = self._events, []
                    await gateway.handle(self, batch)
                    if self._closed:
                        return
                    batch.clear()  # an idle connection would otherwise hold its last packets (its CONNECT) for good
                error = self.conn.pending_error
                if error is not None:  # a broken packet followed those events: the connection ends now
                    self.conn.fail(error)
                    self._protocol_failure(error)
                    return
                self.resume_reading()
                self.flush()
        except ProtocolError as exc:
            self.conn.fail(exc)
            self._protocol_failure(exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("client %r (%s): dropped after an internal error", self.client_id, self.peer)
            self.close(mqtt5.DisconnectReasonCode.UNSPECIFIED_ERROR)

    @property
    def closed(self) -> bool:
        return self._closed

    def connect_answered(self) -> None:
        if self.conn.state is State.CLOSED:  # refused
            self.flush()
            self.shutdown(publish_will=False)
            return
        self._keepalive_s = self.conn.keep_alive * KEEPALIVE_FACTOR  # the client's, or max_keepalive
        self._arm_keepalive(self._keepalive_s)

    def client_disconnected(self, publish_will: bool) -> None:
        self._graceful = True
        self.shutdown(publish_will=publish_will)

    # --- output ---

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and not self._closed:
            self.write(data)

    def wake(self) -> None:
        self.woken.set()

    def start_delivery(self) -> None:
        self._delivery = self._loop.create_task(self._deliver())

    async def _deliver(self) -> None:
        try:
            await self.gateway.deliver(self)
        except asyncio.CancelledError:
            raise
        except ProtocolError as exc:
            self._protocol_failure(exc)
        except Exception:
            log.exception("client %r: delivery failed", self.client_id)
            self.close(mqtt5.DisconnectReasonCode.UNSPECIFIED_ERROR)

    def stop_delivery(self) -> None:
        if self._delivery is not None and self._delivery is not asyncio.current_task():
            self._delivery.cancel()
        self._delivery = None

    # --- keepalive ---

    def _arm_keepalive(self, seconds: float) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        if seconds > 0:
            self._keepalive = self._loop.call_later(seconds, self._check_keepalive)

    def _check_keepalive(self) -> None:
        idle = self._loop.time() - self._last_heard
        if idle >= self._keepalive_s:
            log.info("client %r (%s): nothing heard for %.1f s; disconnected", self.client_id, self.peer, idle)
            self.close(mqtt5.DisconnectReasonCode.KEEP_ALIVE_TIMEOUT)
        else:
            self._keepalive = self._loop.call_later(self._keepalive_s - idle, self._check_keepalive)

    # --- closing ---

    def close(self, reason: mqtt5.DisconnectReasonCode) -> None:
        """Server-side close: v5 clients get a DISCONNECT with the reason; the will is published (abnormal end)."""
        if self._closed:
            return
        if self.conn.state is State.CONNECTED:
            self.conn.disconnect(reason)
            self.flush()
        self.shutdown(publish_will=reason != mqtt5.DisconnectReasonCode.SESSION_TAKEN_OVER)

    def shutdown(self, publish_will: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._worker is not asyncio.current_task():
            self._worker.cancel()
        self.close_transport(linger=not self._graceful)  # after the client's DISCONNECT it has nothing to read
        if self.session is not None and not self.taken_over:
            self.gateway.disconnected(self, publish_will)
        self.stop_delivery()

    def connection_lost(self) -> None:
        """The transport is gone (peer closed, network error): an abnormal end unless DISCONNECT came first."""
        if not self._closed:
            self.shutdown(publish_will=not self._graceful)


class TcpClient(asyncio.Protocol):
    __slots__ = ("gateway", "limits", "link")  # one per connection; asyncio.Protocol has slots too

    def __init__(self, gateway: MqttGateway, limits: Limits) -> None:
        self.gateway = gateway
        self.limits = limits
        self.link: _TcpLink | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = typing.cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        peer = transport.get_extra_info("peername")
        if self.gateway.connection_count >= self.gateway.config.max_connections:
            log.warning("connection from %s refused: max_connections %d", peer, self.gateway.config.max_connections)
            transport.abort()
            return
        self.gateway.connection_count += 1
        self.link = _TcpLink(self.gateway, self.limits, f"{peer[0]}:{peer[1]}" if peer else "?", transport)

    def data_received(self, data: bytes) -> None:
        if self.link is not None:
            self.link.received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.link is not None:
            self.gateway.connection_count -= 1
            self.link.connection_lost()

    def pause_writing(self) -> None:
        if self.link is not None:
            self.link.writable = False

    def resume_writing(self) -> None:
        if self.link is not None:
            self.link.writable = True
            self.link.wake()


class _TcpLink(ClientLink):
    def __init__(self, gateway: MqttGateway, limits: Limits, peer: str, transport: asyncio.Transport) -> None:
        self.transport = transport
        self._linger: asyncio.TimerHandle | None = None
        super().__init__(gateway, limits, peer)

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def close_transport(self, linger: bool) -> None:
        transport = self.transport
        if transport.is_closing():
            return
        if not linger or not transport.can_write_eof():  # TLS: its close is a lingering one (DISCONNECT_LINGER_S)
            transport.close()
            return
        transport.write_eof()  # a FIN after the buffered bytes
        # The client's EOF closes the transport (eof_received returns None), and connection_lost ends the wait.
        self.resume_reading()
        self._linger = self._loop.call_later(DISCONNECT_LINGER_S, transport.close)

    def connection_lost(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        super().connection_lost()

    def pause_reading(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.transport.resume_reading()


class _WebSocketLink(ClientLink):
    def __init__(self, gateway: MqttGateway, limits: Limits, peer: str, websocket: Any) -> None:
        self.websocket = websocket
        self._outgoing: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0
        self._has_output = asyncio.Event()
        self._closing = False
        super().__init__(gateway, limits, peer)
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    def write(self, data: bytes) -> None:
        self._outgoing.append(data)
        self._queued_bytes += len(data)
        self._has_output.set()
        if self._queued_bytes > WEBSOCKET_HIGH_WATER:
            self.writable = False  # delivery waits, as for a TCP transport's pause_writing

    async def _write_loop(self) -> None:
        from websockets.exceptions import ConnectionClosed

        outgoing = self._outgoing
        try:
            while True:
                await self._has_output.wait()
                self._has_output.clear()
                while outgoing:
                    # What queued up goes out in frames of up to WEBSOCKET_FRAME_BYTES: a frame may carry any cut
                    # of the byte stream, and a send per packet would cost a frame header and a drain each.
                    chunks = [outgoing.popleft()]
                    size = len(chunks[0])
                    while outgoing and size + len(outgoing[0]) <= WEBSOCKET_FRAME_BYTES:
                        size += len(outgoing[0])
                        chunks.append(outgoing.popleft())
                    await self.websocket.send(b"".join(chunks))  # waits while the socket's write buffer is full
                    self._queued_bytes -= size
                    if not self.writable and self._queued_bytes <= WEBSOCKET_LOW_WATER:
                        self.writable = True
                        self.wake()
                if self._closing:
                    await self.websocket.close()
                    return
        except ConnectionClosed:
            return  # the peer went: the handler's read loop ends too and reports it

    def close_transport(self, linger: bool) -> None:
        # The write loop sends what is queued, then starts the closing handshake, which reads until the client's
        # close frame or close_timeout (DISCONNECT_LINGER_S): a lingering close whether or not `linger` is asked.
        self._closing = True
        self._has_output.set()

    # The websockets library reads frames as the handler asks for them; the handler's loop is the only reader,
    # and it waits on received() synchronously, so there is nothing to pause separately.
    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None


def limits_of(gateway: MqttGateway) -> Limits:
    config = gateway.config
    return Limits(
        max_packet_size=config.max_packet_size,
        receive_maximum=config.receive_maximum,
        topic_alias_maximum=config.topic_alias_maximum,
        server_topic_alias_maximum=config.server_topic_alias_maximum,
        max_inflight=config.max_inflight,
        max_keepalive=config.max_keepalive,
    )


async def start_tcp(gateway: MqttGateway, host: str, port: int, tls: ssl.SSLContext | None = None) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    limits = limits_of(gateway)
    # The TLS handshake is part of connecting: a peer that never finishes it is dropped after connect_timeout_s,
    # like one that never sends CONNECT, not after the event loop's default of 60 s.
    handshake_timeout = gateway.config.connect_timeout_s if tls is not None else None
    return await loop.create_server(
        lambda: TcpClient(gateway, limits),
        host,
        port,
        ssl=tls,
        ssl_handshake_timeout=handshake_timeout,
        ssl_shutdown_timeout=DISCONNECT_LINGER_S if tls is not None else None,
        # SO_REUSEADDR: a restart binds while the old connections linger in TIME_WAIT. Never SO_REUSEPORT, with
        # which a second server could listen on the same port (tests/mqgate/test_busy_ports.py).
        reuse_address=True,
    )


async def start_websocket(
    gateway: MqttGateway, host: str, port: int, path: str, tls: ssl.SSLContext | None = None
) -> Any:
    """MQTT over WebSocket (subprotocol `mqtt`, binary frames carrying any cut of the byte stream) at `path`.

    Another path gets HTTP 404 and a connection past max_connections HTTP 503, before the upgrade; the query
    string is not part of the path.
    """
    from websockets.asyncio.server import ServerConnection, serve
    from websockets.http11 import Request, Response
    from websockets.typing import Subprotocol

    limits = limits_of(gateway)
    config = gateway.config

    def admit(connection: ServerConnection, request: Request) -> Response | None:
        if urllib.parse.urlsplit(request.path).path != path:
            return connection.respond(http.HTTPStatus.NOT_FOUND, f"MQTT is served at {path}\n")
        if gateway.connection_count >= config.max_connections:
            log.warning(
                "websocket connection from %s refused: max_connections %d",
                connection.remote_address,
                config.max_connections,
            )
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "too many connections\n")
        return None

    async def handler(websocket: Any) -> None:
        peer = websocket.remote_address
        gateway.connection_count += 1
        link = _WebSocketLink(gateway, limits, f"{peer[0]}:{peer[1]}" if peer else "?", websocket)
        try:
            async for frame in websocket:
                if isinstance(frame, str):
                    link.close(mqtt5.DisconnectReasonCode.PROTOCOL_ERROR)
                    break
                link.received(frame)
        except Exception as exc:  # the websockets library ends iteration with its own errors on a broken peer
            log.info("websocket client %r: %s", link.client_id, exc)
        finally:
            gateway.connection_count -= 1
            link.connection_lost()

    # Only with TLS: the event loop refuses an SSL setting for a plain listener.
    tls_options: dict[str, Any] = {"ssl_shutdown_timeout": DISCONNECT_LINGER_S} if tls is not None else {}
    return await serve(
        handler,
        host,
        port,
        subprotocols=[Subprotocol("mqtt")],
        process_request=admit,
        ssl=tls,
        ssl_handshake_timeout=config.connect_timeout_s if tls is not None else None,
        open_timeout=config.connect_timeout_s,
        close_timeout=DISCONNECT_LINGER_S,
        **tls_options,
        max_size=limits.max_packet_size + 8,
    )
