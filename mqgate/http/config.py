"""The HTTP port's settings ([http]), apart from the aiohttp application (app.py), so that reading a configuration
does not load the server."""

from __future__ import annotations

from dataclasses import dataclass

# RocketMQ Connect's REST port (Kafka Connect's is 8083).
DEFAULT_PORT = 8082
# The connector API can make this process write files (the file sink) and send requests (the HTTP sink):
# loopback until someone chooses to expose it, preferably with a token.
DEFAULT_HOST = "127.0.0.1"


@dataclass(slots=True, frozen=True)
class HttpConfig:
    enabled: bool = True
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: a free port, named in the ready line
    token: str | None = None  # bearer token every request must carry (None: no authentication)
    # Users of [mqtt] password_file who may use the port with HTTP Basic (the admin role).
    admin_users: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"http port {self.port}: must be 0 (a free port) to 65535")
        if self.token is not None and (not self.token or any(char.isspace() for char in self.token)):
            raise ValueError("http token: must be non-empty without spaces (it travels in an Authorization header)")
        for user in self.admin_users:
            if not user or ":" in user:
                raise ValueError(f"http admin_users: {user!r} cannot be a user of a password file (empty, or has ':')")
