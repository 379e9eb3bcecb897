"""The recall handle (RocketMQ 5.3's RecallMessageHandle.HandleV1): what a send of a delay-level or timer message
returns so that its producer can cancel it before it is due (core.scheduling.recalls). Pure code, no I/O.

Layout: the text `v1 <topic> <broker name> <due ms> <unique id>`, fields separated by one space, in UTF-8, encoded
with the URL-safe base64 alphabet (`-` and `_`), padded with `=` as Java's Base64.getUrlEncoder writes it. The due
time is milliseconds since the epoch; the unique id is the message's UNIQ_KEY (the id its send answered). Topic and
broker name hold no space (topic names cannot); the unique id is the rest of the text, spaces included.

Decoding accepts the handle with or without its padding (Java's decoder does) and refuses, with RecallHandleError,
anything else: other characters, a length base64 cannot have, text that is not UTF-8, another version, a missing or
empty field, a due time that is not a decimal number.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

HANDLE_VERSION = "v1"
SEPARATOR = " "
# The URL-safe alphabet and at most two padding characters; Python's decoder would skip anything else silently.
_URL_SAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_DECIMAL = re.compile(r"[0-9]{1,19}")
MAX_DUE_MS = 10**19
# A handle is short (topic up to 127 characters, an id of 32): a megabyte of base64 is no handle, whoever sends it.
MAX_HANDLE_LENGTH = 4096


class RecallHandleError(ValueError):
    """Text that is not a recall handle; the message says what is wrong with it."""


@dataclass(slots=True, frozen=True)
class RecallHandle:
    topic: str
    broker_name: str
    due_ms: int
    unique_id: str

    def encode(self) -> str:
        """The handle as a client receives it. ValueError for fields the layout cannot hold (a space in the topic
        or broker name, an empty field, a negative time)."""
        if not self.topic or not self.broker_name or not self.unique_id or not 0 <= self.due_ms < MAX_DUE_MS:
            raise ValueError(f"recall handle {self!r}: every field must be given, the time from 0 to 19 digits")
        if SEPARATOR in self.topic or SEPARATOR in self.broker_name:
            raise ValueError(f"recall handle {self!r}: topic and broker name cannot hold a space")
        text = SEPARATOR.join((HANDLE_VERSION, self.topic, self.broker_name, str(self.due_ms), self.unique_id))
        return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def decode_recall_handle(handle: str) -> RecallHandle:
    """The fields of `handle`; RecallHandleError if it is not one (see the module docstring)."""
    if not handle:
        raise RecallHandleError("the recall handle is empty; give the one the send answered")
    if len(handle) > MAX_HANDLE_LENGTH:
        raise RecallHandleError(
            f"the recall handle is {len(handle)} characters long; one is at most {MAX_HANDLE_LENGTH}"
        )
    if not _URL_SAFE_BASE64.fullmatch(handle):
        raise RecallHandleError("the recall handle is not URL-safe base64; give the one the send answered")
    body = handle.rstrip("=")
    if len(body) % 4 == 1:
        raise RecallHandleError("the recall handle is truncated (no base64 text has its length)")
    try:
        text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise RecallHandleError(f"the recall handle does not decode ({exc})") from exc
    fields = text.split(SEPARATOR, 4)
    if fields[0] != HANDLE_VERSION:
        raise RecallHandleError(f"the recall handle is not of version {HANDLE_VERSION}")
    if len(fields) < 5 or not all(fields):
        raise RecallHandleError("the recall handle lacks a field (version, topic, broker, time, message id)")
    _, topic, broker_name, due, unique_id = fields
    if not _DECIMAL.fullmatch(due):
        raise RecallHandleError(f"the recall handle's time {due[:40]!r} is not milliseconds since the epoch")
    return RecallHandle(topic, broker_name, int(due), unique_id)


__all__ = ["HANDLE_VERSION", "RecallHandle", "RecallHandleError", "decode_recall_handle"]
