"""The gRPC server of the endpoint: grpc.aio on the broker's event loop, plaintext or TLS, serving
proxy.service.MessagingService."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import grpc

from acl.access_control import AccessControl
from core import Broker
from proxy.config import GrpcConfig
from proxy.errors import ProxyError
from proxy.service import MessagingService
from proxy.stubs import AddressScheme, add_MessagingServiceServicer_to_server, definition_pb2

log = logging.getLogger(__name__)

# The proxy's grpcMaxInboundMessageSize: a request up to this size is read and answered in the protocol's words
# (a body over the message size limit gets MESSAGE_BODY_TOO_LARGE); a larger one is cut off by gRPC itself
# (RESOURCE_EXHAUSTED), before it takes more memory.
MAX_INBOUND_BYTES = 130 * 1024 * 1024
# In-flight RPCs finish within this long at a stop; a receive that is long-polling gets cancelled.
STOP_GRACE_S = 2.0


# grpcio sets SO_REUSEPORT on its listening sockets unless told not to, and the kernel then lets a second process of
# the same user listen on the same port and shares the connections between the two: a second `mqgate serve` would
# start on a port the first serves and take half of its clients. Off, a port in use refuses the bind, as it does for
# every other listener of mqgate (asyncio and aiohttp set SO_REUSEADDR only, which Linux does not let share a
# listening port).
SERVER_OPTIONS = (("grpc.so_reuseport", 0),)
# What a failed bind means when a plain socket binds where gRPC could not; gRPC does not say.
BIND_FAILED = "the port is in use, or the host is not an address of this machine"


class EndpointError(ProxyError):
    """The endpoint cannot start as configured (a port in use, a certificate that cannot be read)."""


class PortUnavailableError(EndpointError):
    """The endpoint's address cannot be listened on; `reason` says why (the caller names the setting to change)."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"[grpc] cannot listen on {address}: {reason}")
        self.address = address
        self.reason = reason


class GrpcEndpoint:
    def __init__(
        self, broker: Broker, config: GrpcConfig, *, max_body_bytes: int, access: AccessControl | None = None
    ) -> None:
        self.config = config
        self.service = MessagingService(broker, max_body_bytes=max_body_bytes, access=access)
        self._server: grpc.aio.Server | None = None
        self.port = 0

    @property
    def tls(self) -> bool:
        return bool(self.config.certfile and self.config.keyfile)

    async def start(self) -> str:
        """Listen and serve; returns HOST:PORT as the ready line names it."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_INBOUND_BYTES),
                ("grpc.max_send_message_length", -1),
                *SERVER_OPTIONS,
            ]
        )
        add_MessagingServiceServicer_to_server(self.service, server)
        address = f"{self.config.host}:{self.config.port}"
        try:
            if self.tls:
                credentials = grpc.ssl_server_credentials([_key_and_certificate(self.config)])
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError:  # "Failed to bind to address ...": gRPC gives no reason (it logs one at debug level)
            raise PortUnavailableError(address, bind_error(self.config.host, self.config.port)) from None
        if port == 0:  # older gRPC: 0 instead of the exception
            raise PortUnavailableError(address, bind_error(self.config.host, self.config.port))
        await server.start()
        self._server = server
        self.port = port
        host = self.config.host if self.config.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        self.service.own_endpoints = definition_pb2.Endpoints(
            scheme=AddressScheme.IPv6 if ":" in host else AddressScheme.IPv4,
            addresses=[definition_pb2.Address(host=host, port=port)],
        )
        self.service.start()
        log.info("gRPC endpoint on %s:%d (%s)", self.config.host, port, "TLS" if self.tls else "plaintext")
        return f"{self.config.host}:{port}"

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        await self.service.close()


def bind_error(host: str, port: int) -> str:
    """Why a listener cannot bind host:port, found by binding a plain socket there as gRPC does (SO_REUSEADDR, so a
    port whose connections linger in TIME_WAIT is not taken for one in use): "address already in use", "cannot
    assign requested address" (not an address of this machine), ...; BIND_FAILED if that socket binds."""
    try:
        addresses = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"host {host!r} is not known ({exc.strerror})"
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return BIND_FAILED


def _key_and_certificate(config: GrpcConfig) -> tuple[bytes, bytes]:
    assert config.certfile and config.keyfile
    files = {}
    for key, path in (("certfile", config.certfile), ("keyfile", config.keyfile)):
        try:
            files[key] = Path(path).read_bytes()
        except OSError as exc:
            raise EndpointError(f"[grpc] {key} {path}: cannot be read ({exc.strerror or exc})") from None
    return files["keyfile"], files["certfile"]
