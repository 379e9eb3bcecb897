"""The Spark sink's exceptions."""

from __future__ import annotations


class SparkSinkError(Exception):
    """Base of the Spark sink's errors."""


class TableLockedError(SparkSinkError):
    """Another sink (in this process or another) is writing the same table."""


class TableStateError(SparkSinkError):
    """The table's commit log or files are not as the sink left them (edited or deleted by hand)."""


class SchemaError(SparkSinkError, ValueError):
    """`json.schema` or `partition.columns` cannot be used."""


class BadRecordError(SparkSinkError, ValueError):
    """A record whose body does not fit `json.schema`: it goes to the dead-letter topic, the task carries on."""


class SparkSessionError(SparkSinkError):
    """Spark cannot be started as configured (another master already runs in this process, Java missing)."""
