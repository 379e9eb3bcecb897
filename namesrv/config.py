"""Settings of the NameServer (the `[namesrv]` section of mqgate's configuration; `mqgate namesrv` takes the same
host and port as flags)."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ's NameServer listens on 9876 (NettyServerConfig.listenPort in NamesrvStartup).
DEFAULT_NAMESRV_PORT = 9876


@dataclass(slots=True, frozen=True)
class NamesrvConfig:
    # Whether `mqgate serve` runs a NameServer in its own process. Unset: it does when [broker] namesrv_addr names
    # no NameServer (the embedded default, where the broker registers with its own), and not when the broker joins
    # a cluster's NameServers. true: it runs one either way; false: never.
    embedded: bool | None = None
    host: str = "0.0.0.0"
    port: int = DEFAULT_NAMESRV_PORT  # 0: a free port, named in the ready line
