"""The RocketMQ doors of `mqgate serve`: the broker's remoting port and its NameServer registration, the embedded
NameServer, and the RocketMQ 5 gRPC endpoint joined to its cluster. Each start function returns its ready-line
part and is closed by the exit stack it is given."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging

from acl.access_control import AccessControl
from acl.acl_file import load_acl_file
from acl.errors import AclFileError
from broker_remoting.door import BrokerRemoting
from core import Broker, BrokerConfig
from mqgate.config.settings import ConfigError, Settings
from mqgate.listen_errors import ROCKETMQ_BUSY_HINT, cannot_listen, listen_reason
from namesrv.server import NameServer
from proxy.cluster_view import ClusterView
from proxy.server import EndpointError, GrpcEndpoint, PortUnavailableError
from remote_client import Cluster

log = logging.getLogger(__name__)


def door_acl(section: str, acl_file: str | None) -> AccessControl | None:
    """The access control of a door's acl_file, None without one; ConfigError naming the section when unusable."""
    if not acl_file:
        return None
    try:
        return load_acl_file(acl_file)
    except OSError as exc:
        raise ConfigError(f"[{section}] acl_file {acl_file}: cannot be read ({exc.strerror or exc})") from None
    except AclFileError as exc:
        raise ConfigError(f"[{section}] acl_file: {exc}") from None


async def start_grpc(settings: Settings, broker: Broker, stack: contextlib.AsyncExitStack) -> tuple[str, GrpcEndpoint]:
    """Start the RocketMQ 5 gRPC endpoint; return its ready-line part and itself. Closed by `stack`."""
    config = settings.grpc
    access = door_acl("grpc", config.acl_file)
    endpoint = GrpcEndpoint(broker, config, max_body_bytes=settings.store.max_message_size, access=access)
    try:
        address = await endpoint.start()
    except PortUnavailableError as exc:
        raise cannot_listen("grpc", "port", "--grpc-port", config.host, config.port, exc.reason) from None
    except EndpointError as exc:  # a certificate or key that cannot be read: the message names the key
        raise ConfigError(str(exc)) from None
    stack.push_async_callback(endpoint.close)
    return f"grpc={address}", endpoint


async def join_grpc_to_cluster(
    settings: Settings,
    door: BrokerRemoting,
    endpoint: GrpcEndpoint,
    embedded_namesrv: str | None,
    stack: contextlib.AsyncExitStack,
) -> None:
    """Make the gRPC endpoint one of its cluster's (RocketMQ 5's proxy in local mode): the broker's remoting port
    tells other groups where it is, and its routes name every group of the NameServers the broker registers
    with, each at its own endpoint (proxy/cluster_view.py)."""
    bound = settings.grpc.host
    host = door.store_host[0] if bound in ("", "0.0.0.0", "::") else bound
    door.grpc_endpoint = f"{host}:{endpoint.port}"
    addresses = registration_addresses(settings.broker, embedded_namesrv)
    if not addresses:
        return
    cluster = Cluster(addresses, instance_name=f"grpc-{settings.broker.broker_name}")
    await cluster.start()
    stack.push_async_callback(cluster.close)
    endpoint.service.cluster_view = ClusterView(cluster, settings.broker.broker_name, lambda: endpoint.port)


def _port_refused(section: str, host: str, port: int, exc: OSError) -> Exception:
    """The error of a remoting or NameServer port that cannot be listened on, naming its section and flag."""
    return cannot_listen(section, "port", f"--{section}-port", host, port, listen_reason(exc), ROCKETMQ_BUSY_HINT)


async def start_namesrv(settings: Settings, stack: contextlib.AsyncExitStack) -> tuple[str, str]:
    """Start the embedded NameServer; return its ready-line part and the address the broker reaches it at. Closed
    by `stack`."""
    config = settings.namesrv
    namesrv = NameServer()
    try:
        port = await namesrv.start(config.host, config.port)
    except OSError as exc:
        await namesrv.close()
        raise _port_refused("namesrv", config.host, config.port, exc) from None
    stack.push_async_callback(namesrv.close)
    log.info("NameServer on %s:%d", config.host, port)
    return f"namesrv={config.host}:{port}", f"{loopback_to(config.host)}:{port}"


async def start_remoting(
    settings: Settings, broker: Broker, stack: contextlib.AsyncExitStack, embedded_namesrv: str | None
) -> tuple[str, BrokerRemoting]:
    """Start the broker's remoting port, registering with [broker] namesrv_addr, or else with the embedded
    NameServer at `embedded_namesrv`; return its ready-line part. Closed by `stack`."""
    config = settings.remoting
    addresses = registration_addresses(settings.broker, embedded_namesrv)
    if not addresses:
        log.warning(
            "the broker's remoting port registers with no NameServer, so RocketMQ 4 clients will not find its topics:"
            " set [broker] namesrv_addr (--namesrv-addr), or [namesrv] embedded = true"
        )
    access = door_acl("remoting", config.acl_file)
    door = BrokerRemoting(broker, config, max_body_bytes=settings.store.max_message_size, access=access)
    try:
        address = await door.start(addresses)
    except OSError as exc:
        await door.close()
        raise _port_refused("remoting", config.host, config.port, exc) from None
    stack.push_async_callback(door.close)
    log.info(
        "remoting port on %s, known to clients as %s, registering with %s",
        address,
        door.address,
        ", ".join(addresses) or "no NameServer",
    )
    return f"remoting={address}", door


def runs_embedded_namesrv(settings: Settings) -> bool:
    """Whether `mqgate serve` runs a NameServer in its process: [namesrv] embedded when set, else when the broker
    is given no NameServer ([broker] namesrv_addr): a broker joining a cluster uses the cluster's."""
    embedded = settings.namesrv.embedded
    return embedded if embedded is not None else not settings.broker.namesrv_addr


def registration_addresses(config: BrokerConfig, embedded_namesrv: str | None) -> list[str]:
    """The NameServers the broker registers with: [broker] namesrv_addr when given (an embedded one is then only
    for clients that ask it), else the embedded NameServer's address, else none."""
    return list(config.namesrv_addr) or ([embedded_namesrv] if embedded_namesrv else [])


def loopback_to(host: str) -> str:
    """Where this process reaches a server bound to `host`: loopback for a wildcard address, else `host` itself."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "127.0.0.1"  # a host name; "" binds every address, as the wildcard does
    if address.is_unspecified:
        # asyncio binds an IPv6 wildcard IPv6 only (IPV6_V6ONLY): reach it over IPv6.
        return "::1" if address.version == 6 else "127.0.0.1"
    return str(address)


async def registered(door: BrokerRemoting, timeout_s: float = 10.0) -> None:
    """Until the broker is registered with every NameServer (a NameServer down: at most `timeout_s`)."""
    if door.registration is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(door.registration.registered.wait(), timeout_s)
