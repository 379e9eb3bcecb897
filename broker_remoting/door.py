"""The broker's remoting port: a remoting server (remoting/server.py) whose request codes are served on the core,
and the broker's registration with its NameServers. `mqgate serve` builds one, starts it and closes it."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Sequence

from broker_remoting.config import RemotingConfig
from core import Broker
from remoting.server import RemotingServer

log = logging.getLogger(__name__)


class BrokerRemoting:
    def __init__(self, broker: Broker, config: RemotingConfig, *, max_body_bytes: int) -> None:
        self.broker = broker
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.server = RemotingServer("broker")
        self.address = ""  # BROKER_IP:PORT once started: what routes and stored messages name

    async def start(self, namesrv_addresses: Sequence[str] = ()) -> str:
        """Listen, then register with `namesrv_addresses` (HOST:PORT each); the address bound, HOST:PORT."""
        server = await self.server.start(self.config.host, self.config.port)
        host, port = server.sockets[0].getsockname()[:2]
        self.address = f"{broker_ip(self.config)}:{port}"
        return f"{host}:{port}"

    async def close(self) -> None:
        await self.server.close()


def broker_ip(config: RemotingConfig) -> str:
    """The IP address clients are told (RocketMQ's brokerIP1): `broker_ip`, else `host` when it names one address,
    else this machine's first non-loopback IPv4 address, else 127.0.0.1."""
    if config.broker_ip:
        return config.broker_ip
    try:
        address = ipaddress.ip_address(config.host)
    except ValueError:
        address = None
    if address is not None and not address.is_unspecified:
        return str(address)
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        infos = []
    for info in infos:
        candidate = ipaddress.ip_address(info[4][0])
        if not candidate.is_loopback:
            return str(candidate)
    return "127.0.0.1"
