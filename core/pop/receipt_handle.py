"""Receipt handles: what a pop consumer hands back to ack a message or change its invisible time.

A handle names one delivery of one message to one consumer group. It is text, eight ':'-separated fields (topic
and group names cannot hold ':'; see core.store.topic_name and core.tables.subscription_group):

    mqg1:<run>:<delivery id>:<attempt>:<queue id>:<queue offset>:<topic>:<group>

- `mqg1`: the format version.
- `run`: the random id of the PopService that issued it. Pop state lives in memory, so a handle from before a
  restart cannot be honoured; the run id lets us say so instead of acking the wrong delivery.
- `delivery id`: unique per delivery and per change of invisible time; only the newest one of a message is
  accepted (RocketMQ's handles carry the pop time and checkpoint offset for the same purpose).
- `attempt`: the delivery attempt, so that a refusal can say whether the message was delivered again.
- queue id and queue offset: which message. topic and group: whose.

Consumers must treat the text as opaque: pass it back unchanged. Like RocketMQ's, it is readable so that logs
are, and it is not a secret; every field is checked against the broker's state on use.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.pop.errors import ReceiptHandleError, ReceiptHandleProblem

VERSION = "mqg1"
SEPARATOR = ":"
_FIELDS = 8
# Handles are short; anything much longer is not one of ours and is not worth echoing in full.
_SHOWN = 80


@dataclass(slots=True, frozen=True)
class ReceiptHandle:
    run: str
    delivery_id: int
    attempt: int
    queue_id: int
    queue_offset: int
    topic: str
    group: str

    def encode(self) -> str:
        return SEPARATOR.join(
            (
                VERSION,
                self.run,
                str(self.delivery_id),
                str(self.attempt),
                str(self.queue_id),
                str(self.queue_offset),
                self.topic,
                self.group,
            )
        )

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse a handle; raises ReceiptHandleError(MALFORMED) saying what is wrong with it."""
        if not isinstance(text, str):
            raise _malformed(repr(text)[:_SHOWN], f"a receipt handle is a str, not {type(text).__name__}")
        shown = text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
        parts = text.split(SEPARATOR)
        if parts[0] != VERSION:
            raise _malformed(shown, f"it does not start with {VERSION + SEPARATOR!r}")
        if len(parts) != _FIELDS:
            raise _malformed(shown, f"it has {len(parts)} ':'-separated fields, a handle has {_FIELDS}")
        _, run, delivery_id, attempt, queue_id, queue_offset, topic, group = parts
        numbers = []
        for name, value in (
            ("delivery id", delivery_id),
            ("attempt", attempt),
            ("queue id", queue_id),
            ("queue offset", queue_offset),
        ):
            if not value.isascii() or not value.isdigit():
                raise _malformed(shown, f"its {name} {value!r} is not a non-negative integer")
            numbers.append(int(value))
        if not run or not topic or not group:
            raise _malformed(shown, "its run, topic or group is empty")
        return cls(run, numbers[0], numbers[1], numbers[2], numbers[3], topic, group)

    def describe(self) -> str:
        """The message and delivery the handle names, for error messages."""
        return (
            f"message {self.topic}/{self.queue_id}@{self.queue_offset} "
            f"(group {self.group!r}, delivery attempt {self.attempt})"
        )


def _malformed(shown: str, reason: str) -> ReceiptHandleError:
    return ReceiptHandleError(
        ReceiptHandleProblem.MALFORMED,
        f"receipt handle {shown!r} is not one this broker issued: {reason}; "
        "pass the receipt_handle of a received message unchanged",
    )
