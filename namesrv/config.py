"""Settings of the NameServer (the `[namesrv]` section of mqgate's configuration; `mqgate namesrv` takes the same
host and port as flags)."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ's NameServer listens on 9876 (NettyServerConfig.listenPort in NamesrvStartup).
DEFAULT_NAMESRV_PORT = 9876


@dataclass(slots=True, frozen=True)
class NamesrvConfig:
    # `mqgate serve` runs a NameServer in its own process, and the broker registers with it: the embedded default.
    # false: clients and the broker use the NameServers of [remoting] namesrv_addresses.
    embedded: bool = True
    host: str = "0.0.0.0"
    port: int = DEFAULT_NAMESRV_PORT  # 0: a free port, named in the ready line
