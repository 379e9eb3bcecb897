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


class RecordFailedError(ConnectorError):
    """A sink task failed on a record (errors.tolerance=none): names the record and what to do about it."""

    def __init__(self, name: str, task_id: int, origin: str, error: str) -> None:
        super().__init__(
            f"connector {name!r} task {task_id}: record {origin} (topic/queue/offset) failed: {error}; to skip such"
            " records set errors.tolerance=all (and errors.deadletterqueue.topic.name to keep them in a topic),"
            f" then restart the task: POST /connectors/{name}/restart?includeTasks=true&onlyFailed=true",
            name,
        )
        self.origin = origin
