"""Exceptions of the broker core (the store keeps its own in core/store/errors.py).

Messages say what went wrong, where, and what to do about it.
"""

from __future__ import annotations

from pathlib import Path


class BrokerError(Exception):
    """Base class of every error the broker core raises."""


class TopicNotFoundError(BrokerError, LookupError):
    """The topic does not exist and may not be created on the fly."""


class TopicConfigError(BrokerError, ValueError):
    """A topic configuration breaks a rule (name, queue counts, permissions, attributes)."""


class GroupNotFoundError(BrokerError, LookupError):
    """The consumer group does not exist and may not be created on the fly."""


class GroupConfigError(BrokerError, ValueError):
    """A consumer group name or subscription group configuration breaks a rule."""


class InvalidOffsetError(BrokerError, ValueError):
    """A consumer offset or queue id is out of range."""


class ConfigFileError(BrokerError):
    """A JSON config file cannot be used. Carries the path and, for syntax errors, the line and column.

    The broker refuses to start on such a file rather than starting empty: an empty topic or offset table
    would silently lose every topic and make consumers start over.
    """

    def __init__(
        self,
        path: Path | str,
        reason: str,
        line: int | None = None,
        column: int | None = None,
        hint: str = "fix or delete the file",
    ) -> None:
        where = f" line {line} column {column}" if line is not None and column is not None else ""
        super().__init__(f"{path}{where}: {reason}; {hint}")
        self.path = Path(path)
        self.reason = reason
        self.line = line
        self.column = column
