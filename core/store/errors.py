"""Exceptions of the message store. Messages say what, where, and what to do."""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the store raises."""


class InvalidTopicError(StoreError, ValueError):
    pass


class InvalidMessageError(StoreError, ValueError):
    pass


class MessageTooLargeError(InvalidMessageError):
    pass


class CorruptRecordError(StoreError):
    """A record failed its CRC or layout check. Carries the file and the offset so an operator can look."""

    def __init__(self, path: str, file_offset: int, physical_offset: int, reason: str) -> None:
        super().__init__(
            f"corrupt record in {path} at file offset {file_offset} (commit-log offset {physical_offset}): {reason}"
        )
        self.path = path
        self.file_offset = file_offset
        self.physical_offset = physical_offset
        self.reason = reason


class StoreNotWritableError(StoreError):
    """Writes are refused (disk too full, store shut down); reads keep working."""


class StoreLockedError(StoreError):
    """Another process has the store directory open."""
