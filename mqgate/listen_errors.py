"""The error `mqgate` gives for a listener that cannot bind: the address, the reason, and the setting that moves
it."""

from __future__ import annotations

import asyncio
import os

from mqgate.config.settings import ConfigError

# Added to a remoting or NameServer port's "in use" error: on a developer's machine a RocketMQ may run beside mqgate.
ROCKETMQ_BUSY_HINT = "a RocketMQ broker or NameServer (mqbroker, mqnamesrv) may hold it"


def server_address(server: asyncio.Server | object) -> str:
    sockets = getattr(server, "sockets", None) or []
    host, port = sockets[0].getsockname()[:2]
    return f"{host}:{port}"


def listen_reason(exc: OSError) -> str:
    # asyncio's message repeats the address ("error while attempting to bind on address ..."): the errno says it.
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


def cannot_listen(
    section: str,
    key: str,
    flag: str | None,
    host: str,
    port: int,
    reason: str,
    hint: str = "",
    setting: str | None = None,
) -> ConfigError:
    """The error for a listener that cannot bind: the address, the reason, and the setting that moves it (`flag`
    or `[section] key`; `setting` instead, for a command that reads no configuration file)."""
    if setting is None:
        setting = f"{flag} or [{section}] {key}" if flag else f"[{section}] {key}"
    busy = f" ({hint})" if hint and "in use" in reason else ""
    return ConfigError(
        f"[{section}] cannot listen on {host}:{port}: {reason}{busy}; "
        f"choose another port with {setting} (0: a free one)"
    )
