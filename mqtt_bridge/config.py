"""Settings of the MQTT gateway (the `[mqtt]` section of mqgate's configuration)."""

from __future__ import annotations

from dataclasses import dataclass

# Mosquitto's persistent_client_expiration is unset (never) by default and EMQX expires after 2 hours; a week
# keeps a device that is off over a holiday, and bounds what an abandoned client id holds on disk.
DEFAULT_SESSION_EXPIRY_MAX_S = 7 * 24 * 3600
# Mosquitto's max_queued_messages is 1000 (in memory); ours wait on disk as 20-byte light-queue entries (a million
# is 20 MB per filter), so the bound is about how stale a reconnecting device's backlog may be. 100,000 dropped a
# third of a 200,000-message QoS 1 burst for a connected subscriber that was merely slower than the publishers
# (bench/HISTORY.md), which a durable broker should not do by default.
DEFAULT_MAX_QUEUED_MESSAGES = 1_000_000


@dataclass(slots=True, frozen=True)
class MqttConfig:
    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = 1883  # 0: a free port, named in the ready line
    tls_port: int | None = None
    certfile: str | None = None
    keyfile: str | None = None
    websocket_port: int | None = None
    websocket_path: str = "/mqtt"
    # Clients without a user name may connect; None (unset): only while no password_file is set. Mosquitto 2
    # refuses them by default (allow_anonymous false) whatever else is set; the embedded default, with no
    # authentication at all, is for trying mqgate, and setting a password file must not leave a way around it.
    allow_anonymous: bool | None = None
    password_file: str | None = None
    acl_file: str | None = None
    # First-level topics that may be used (empty: any valid core topic name) and whether missing ones are
    # created on first use (otherwise a publish to them is refused).
    topics: tuple[str, ...] = ()
    auto_create_topics: bool = True
    queue_nums: int = 4
    max_packet_size: int = 1024 * 1024
    max_connections: int = 100_000
    receive_maximum: int = 1024
    max_inflight: int = 64
    max_queued_messages: int = DEFAULT_MAX_QUEUED_MESSAGES
    topic_alias_maximum: int = 64
    # Topic aliases the server sets on what it sends to an MQTT 5 client that accepts them (Topic Alias Maximum in
    # its CONNECT), at most as many as the client accepts; 0: none. Mosquitto's development branch
    # (max_topic_alias_broker) makes 10, EMQX as many as the client accepts; as many as a client may set toward us
    # (topic_alias_maximum) costs a connection that asks for them a few kilobytes at most.
    server_topic_alias_maximum: int = 64
    # Memory for recently stored or read messages kept decoded (message_cache.py), so a message fanned out to many
    # sessions is read from the log once.
    message_cache_mb: int = 64
    session_expiry_max_s: int = DEFAULT_SESSION_EXPIRY_MAX_S
    # A connection must send CONNECT within this long (Mosquitto: the keepalive of a pending socket).
    connect_timeout_s: float = 10.0
    # The longest keep alive a client may use, in seconds; 0: no maximum. Past it (or at 0, no keep alive), an
    # MQTT 5 client is told this one in CONNACK and held to it, an MQTT 3.1.1 client is refused (CONNACK 2), as by
    # Mosquitto's max_keepalive. 0 is Mosquitto's default since 2.0.16 (its man page still says 65535): any maximum
    # refuses the 3.1.1 clients that ask for no keep alive, which 2.0.12 to 2.0.15 did by default.
    max_keepalive: int = 0
    # Seconds between updates of the $SYS/broker/... topics (Mosquitto's sys_interval, 10 by default); 0: no $SYS.
    sys_interval: int = 10

    @property
    def anonymous_allowed(self) -> bool:
        """Whether a CONNECT without a user name is accepted: allow_anonymous if set, else no password_file."""
        if self.allow_anonymous is not None:
            return self.allow_anonymous
        return self.password_file is None
