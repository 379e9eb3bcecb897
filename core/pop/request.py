"""The terms of a pop (core.pop.service): how many messages one pop may ask for, how long they may stay invisible and
how long a pop may wait, each RocketMQ's limit and checked here; where a group with no committed offset starts in a
queue (PopInitMode); and what a pop hands out (PoppedMessage). SimpleConsumer checks its own options against the same
limits, so that a receive it lets through is not refused by the PopService below it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.pop.errors import PopRequestError
from core.store.message import StoredMessage

# The broker refuses pops of more than 32 messages (PopMessageProcessor: "maxMsgNums ... greater than 32").
MAX_POP_BATCH = 32
# The proxy's maxInvisibleTimeMills: a message stays invisible at most 12 hours per pop or change.
MAX_INVISIBLE_MS = 12 * 3600 * 1000
# The proxy's grpcClientConsumerMaxLongPollingTimeoutMillis: a receive waits at most 20 s for a message.
MAX_POP_LONG_POLL_MS = 20_000


class PopInitMode(enum.Enum):
    """Where a group with no committed offset starts in a queue (RocketMQ's ConsumeInitMode)."""

    MIN = "MIN"  # the first message kept
    MAX = "MAX"  # the newest message, or the first when the queue was never trimmed (RocketMQ 5's default)


@dataclass(slots=True, frozen=True)
class PoppedMessage:
    message: StoredMessage  # as the producer sent it (decompressed), reconsume_times = delivery_attempt - 1
    receipt_handle: str
    delivery_attempt: int
    invisible_until: float  # on the PopService's clock


def check_batch(max_nums: int) -> None:
    """Refuse (PopRequestError) a number of messages to pop that is not a whole number from 1 to MAX_POP_BATCH."""
    if not isinstance(max_nums, int) or isinstance(max_nums, bool) or not 1 <= max_nums <= MAX_POP_BATCH:
        raise PopRequestError(f"max_nums {max_nums!r} is out of range; pop 1 to {MAX_POP_BATCH} messages at a time")


def check_invisible(invisible_ms: int) -> None:
    """Refuse (PopRequestError) an invisible time that is not a whole number of ms from 0 to MAX_INVISIBLE_MS."""
    if not isinstance(invisible_ms, int) or isinstance(invisible_ms, bool) or not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
        raise PopRequestError(
            f"invisible time {invisible_ms!r} ms is out of range; give whole milliseconds from 0 to "
            f"{MAX_INVISIBLE_MS} (12 hours)"
        )
