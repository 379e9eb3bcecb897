"""Settings of the broker's remoting port (the `[remoting]` section of mqgate's configuration): where RocketMQ 4
clients reach the broker, what it calls itself to them and to its NameServers, and which NameServers it registers
with."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ's broker listens on 10911 (NettyServerConfig.listenPort in the broker's default configuration).
DEFAULT_REMOTING_PORT = 10911
# RocketMQ's default (BrokerConfig.brokerClusterName): the name `mqadmin clusterList` shows. The broker's own name is
# [broker] broker_name, the one its message queues carry.
DEFAULT_CLUSTER_NAME = "DefaultCluster"


@dataclass(slots=True, frozen=True)
class RemotingConfig:
    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = DEFAULT_REMOTING_PORT  # 0: a free port, named in the ready line
    # The address clients are told to reach this broker at (RocketMQ's brokerIP1): in routes, in the store host of
    # every pulled message (where the C++ client sends a consumer's send-back) and in offset message ids. Unset:
    # `host` when it names one address, else this machine's first non-loopback IPv4 address (127.0.0.1 if none).
    broker_ip: str | None = None
    cluster_name: str = DEFAULT_CLUSTER_NAME
    # NameServers the broker registers with every 30 s, as HOST:PORT (RocketMQ's namesrvAddr). Empty: the
    # embedded NameServer of the same process ([namesrv] embedded), or none.
    namesrv_addresses: tuple[str, ...] = ()
    # RocketMQ's plain_acl.yml, as [grpc] acl_file; unset: no access control.
    acl_file: str | None = None
