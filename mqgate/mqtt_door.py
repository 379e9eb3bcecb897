"""The MQTT door of `mqgate serve`: the gateway and its listeners (TCP, TLS, WebSocket), the TLS context, and the
start-up line on anonymous clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from core import Broker
from mqgate.config.settings import DEFAULT_ORIGIN, ConfigError, Settings
from mqgate.listen_errors import cannot_listen, listen_reason, server_address
from mqtt_bridge.cluster.filter_records import FILTERS_TOPIC
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.gateway import MqttGateway
from mqtt_bridge.listener import start_tcp, start_websocket
from peers.group_peers import ClusterPeers

log = logging.getLogger(__name__)

# Snapshots of the MQTT gateway's retained messages and sessions.
MQTT_SUBDIR = "mqtt"


def tls_context(config: MqttConfig) -> ssl.SSLContext | None:
    """The server-side TLS context of the TLS and secure WebSocket listeners, or None without certfile/keyfile.

    Raises ConfigError naming the key and file when the certificate or key cannot be used, so `serve` stops with
    exit code 2 before it opens the store.
    """
    if not (config.certfile and config.keyfile):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    for key, path in (("certfile", config.certfile), ("keyfile", config.keyfile)):
        # OpenSSL's own error does not say which of the two files is missing: open each first.
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"[mqtt] {key} {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        context.load_cert_chain(config.certfile, config.keyfile)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"[mqtt] certfile {config.certfile} and keyfile {config.keyfile}: cannot be used together ({exc.reason}); "
            "certfile needs the PEM certificate (chain), keyfile the PEM private key of that certificate"
        ) from None
    return context


async def start_mqtt(
    settings: Settings,
    broker: Broker,
    stack: contextlib.AsyncExitStack,
    tls: ssl.SSLContext | None,
    namesrv_addresses: list[str] | None = None,
) -> tuple[list[str], MqttGateway]:
    """Start the MQTT gateway and its listeners; return their ready-line parts and the gateway. Closed by
    `stack`. `namesrv_addresses`: the cluster's, whose other groups the gateway joins (the broker must be
    registered with them)."""
    gateway = await open_gateway(settings, broker, stack, namesrv_addresses)
    await gateway.join_cluster()
    return await open_listeners(settings, gateway, stack, tls), gateway


async def open_gateway(
    settings: Settings, broker: Broker, stack: contextlib.AsyncExitStack, namesrv_addresses: list[str] | None = None
) -> MqttGateway:
    """The gateway started: its state read back and its hooks on the broker (before any door stores a message, so
    that persistent sessions get what is published meanwhile), without listeners. On a cluster it joins the
    other groups later (`join_cluster`), once this one is registered."""
    config = settings.mqtt
    peers = (
        ClusterPeers(namesrv_addresses, settings.broker.broker_name, FILTERS_TOPIC, "MQTT_GATEWAY")
        if namesrv_addresses
        else None
    )
    gateway = MqttGateway(broker, config, settings.data_dir / MQTT_SUBDIR, peers)
    await gateway.start()
    log.info("%s", anonymous_clients(settings))
    if not config.anonymous_allowed and not config.password_file:
        log.warning(
            "every MQTT client is refused: [mqtt] allow_anonymous is false and no password_file checks the others;"
            " set password_file, or allow_anonymous = true"
        )
    stack.push_async_callback(gateway.close)
    return gateway


async def open_listeners(
    settings: Settings, gateway: MqttGateway, stack: contextlib.AsyncExitStack, tls: ssl.SSLContext | None
) -> list[str]:
    """The gateway's listeners (TCP, TLS, WebSocket); their ready-line parts."""
    config = settings.mqtt
    listeners: list[tuple[str, str, str | None, Callable[[int], Awaitable[Any]]]] = [
        ("mqtt", "port", "--mqtt-port", lambda port: start_tcp(gateway, config.host, port))
    ]
    if config.tls_port is not None:
        listeners.append(("mqtts", "tls_port", None, lambda port: start_tcp(gateway, config.host, port, tls)))
    if config.websocket_port is not None:
        listeners.append(
            (
                "mqtt_wss" if tls is not None else "mqtt_ws",  # the scheme a client must use
                "websocket_port",
                None,
                lambda port: start_websocket(gateway, config.host, port, config.websocket_path, tls),
            )
        )
    parts = []
    for name, key, flag, start in listeners:
        port = getattr(config, key)
        try:
            server = await start(port)
        except OSError as exc:
            raise cannot_listen("mqtt", key, flag, config.host, port, listen_reason(exc), MQTT_BUSY_HINT) from None
        parts.append(f"{name}={server_address(server)}")
        log.info("MQTT listener %s on %s", name, server_address(server))

        async def close_server(server: Any = server) -> None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)

        stack.push_async_callback(close_server)
    return parts


def anonymous_clients(settings: Settings) -> str:
    """The start-up line that says whether MQTT clients without a user name may connect, and why."""
    config = settings.mqtt
    verdict = "allowed" if config.anonymous_allowed else "refused"
    if config.allow_anonymous is not None:
        origin = settings.origins.get("mqtt.allow_anonymous", "")
        why = f"[mqtt] allow_anonymous = {'true' if config.allow_anonymous else 'false'}"
        why += f" from {origin}" if origin and origin != DEFAULT_ORIGIN else ""
    elif config.password_file:
        why = "[mqtt] password_file is set; allow_anonymous = true would let them in"
    else:
        why = "no [mqtt] password_file; setting one refuses them"
    return f"anonymous MQTT clients: {verdict} ({why})"


# Added to an MQTT port's "in use" error: on a new machine the usual holder is a Mosquitto that a package started.
MQTT_BUSY_HINT = "another MQTT broker (e.g. the mosquitto service: `systemctl status mosquitto`) may hold it"
