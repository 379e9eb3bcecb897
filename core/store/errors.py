"""Exceptions of the message store: one hierarchy, rooted at `StoreError`, for every error the store raises (the
broker turns them into core errors at its boundary: core.errors.from_store_error). Those that are also ValueError
say the input is wrong, as callers that catch ValueError expect. Messages say what, where, and what to do.

    StoreError
    ├── InvalidTopicError       ValueError  a topic or group name the store cannot keep
    ├── InvalidMessageError     ValueError  a message that cannot be stored as it is
    │   └── MessageTooLargeError            over max_message_size
    ├── InvalidMessageIdError   ValueError  text that is no offset message id (core.store.message_id)
    ├── RecordFormatError       ValueError  bytes that are not a whole, valid record (core.store.log.record_codec);
    │                                       the log reports it as a CorruptRecordError, with file and offset
    ├── CorruptRecordError                  a record of the log failed its CRC or layout check
    ├── StoreNotWritableError               writes refused (disk too full, failed flush, store closed)
    ├── StoreLockedError                    another process has the store directory open
    └── IndexFileCorruptError, IndexFileClosedError (core.store.index.file), IndexProcessError
                                            (core.store.index.process): the index's own, beside the code that
                                            raises them

The compiled modules (pyproject.toml [tool.mqgate] compiled) raise the classes of this module, which stays
interpreted: one class for compiled code and its pure twin alike (tests/compiled_modules.py).
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the store raises."""


class InvalidTopicError(StoreError, ValueError):
    pass


class InvalidMessageError(StoreError, ValueError):
    pass


class MessageTooLargeError(InvalidMessageError):
    pass


class InvalidMessageIdError(StoreError, ValueError):
    """Text that is not an offset message id."""


class RecordFormatError(StoreError, ValueError):
    """The bytes at a position are not a whole, valid record."""


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


class ReplicationRefused(StoreError):
    """What a slave's master sent does not continue its log (core.store.ha.continuation); the message says where
    and why. Nothing of it is kept."""


class HAProtocolError(StoreError, ValueError):
    """Bytes on the HA link that its protocol does not allow (core.store.ha.frames)."""


class HAPortError(StoreError):
    """A master's HA port cannot be listened on (in use, not allowed): the store does not open."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"the HA port cannot listen on {host}:{port}: {reason}")
        self.host = host
        self.port = port
        self.reason = reason
