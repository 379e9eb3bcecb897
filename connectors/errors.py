"""Exceptions of the connector runtime. Each names the connector; the REST API answers with `http_status`."""

from __future__ import annotations

from connectors.api import ConfigError


class ConnectorError(Exception):
    """Base class of every error the connector runtime raises."""

    http_status = 500

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class NotFound(ConnectorError, LookupError):
    http_status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"connector {name!r} does not exist; GET /connectors lists those there are", name)


class AlreadyExists(ConnectorError):
    http_status = 409

    def __init__(self, name: str) -> None:
        super().__init__(f"connector {name!r} already exists; PUT /connectors/{name}/config changes it", name)


class InvalidConfig(ConnectorError, ValueError):
    """The config cannot be used; `errors` names each bad key and why."""

    http_status = 400

    def __init__(self, name: str, errors: list[ConfigError]) -> None:
        reasons = "; ".join(f"{error.key}: {error.message}" for error in errors)
        super().__init__(f"connector {name!r}: invalid config: {reasons}", name)
        self.errors = list(errors)
