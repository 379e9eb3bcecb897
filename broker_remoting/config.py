"""Settings of the broker's remoting port (the `[remoting]` section of mqgate's configuration): where RocketMQ 4
clients reach the broker, and what it calls itself to them and to its NameServers. The cluster it registers in and
its NameServers are the broker's: [broker] cluster_name and namesrv_addr."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ's broker listens on 10911 (NettyServerConfig.listenPort in the broker's default configuration).
DEFAULT_REMOTING_PORT = 10911


@dataclass(slots=True, frozen=True)
class RemotingConfig:
    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = DEFAULT_REMOTING_PORT  # 0: a free port, named in the ready line
    # The address clients are told to reach this broker at (RocketMQ's brokerIP1): in routes, in the store host of
    # every pulled message (where the C++ client sends a consumer's send-back) and in offset message ids. Unset:
    # `host` when it names one address, else this machine's first non-loopback IPv4 address (127.0.0.1 if none).
    broker_ip: str | None = None
    # RocketMQ's plain_acl.yml, as [grpc] acl_file; unset: no access control.
    acl_file: str | None = None
