"""What a simple consumer's calls accept (RocketMQ 5's SimpleConsumer and the proxy's checks), free of I/O: the
in-process consumer and the remote one refuse the same things with the same words."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from core.errors import IllegalArgumentError
from core.filter import ExpressionType
from core.pop.errors import PopRequestError
from core.pop.request import MAX_INVISIBLE_MS, MAX_POP_BATCH

# The proxy's minInvisibleTimeMillsForRecv: a receive asks for at least 10 s, so that a message is not delivered
# again while its first consumer is still working on it. A change of invisible time may ask for less.
MIN_RECEIVE_INVISIBLE_S = 10.0
# The Java client makes the caller choose awaitDuration and the Python client defaults to 20 s; the proxy waits at
# most 20 s (MAX_POP_LONG_POLL_MS) whatever is asked, so a longer default only means "as long as allowed".
DEFAULT_AWAIT_DURATION_S = 30.0

# topic -> expression (TAG) or (expression type, expression)
Subscriptions = Mapping[str, str] | Mapping[str, tuple[str, str]]


def check_await_duration(await_duration_s: float) -> None:
    if not await_duration_s >= 0:
        raise IllegalArgumentError(f"await_duration_s {await_duration_s!r} must be 0 or more seconds")


def subscription_items(subscriptions: Subscriptions) -> Iterator[tuple[str, str, str]]:
    """(topic, expression, expression type) of each subscription; a value of another shape raises
    IllegalArgumentError."""
    for topic, subscription in subscriptions.items():
        if isinstance(subscription, str):
            yield topic, subscription, ExpressionType.TAG
        elif isinstance(subscription, tuple) and len(subscription) == 2:
            expression_type, expression = subscription
            yield topic, expression, expression_type
        else:
            raise IllegalArgumentError(
                f"subscription of topic {topic!r} is {subscription!r}; give a TAG expression such as '*' or "
                "an (expression type, expression) pair such as ('SQL92', 'a > 1')"
            )


def check_receive(group: str, subscribed: bool, max_message_num: int, invisible_duration_s: float) -> int:
    """The invisible time in ms of a valid receive; else PopRequestError saying what is wrong."""
    if not subscribed:
        raise PopRequestError(f"consumer of group {group!r} has no subscription; subscribe to a topic first")
    if not isinstance(max_message_num, int) or not 1 <= max_message_num <= MAX_POP_BATCH:
        raise PopRequestError(
            f"max_message_num {max_message_num!r} is out of range; receive 1 to {MAX_POP_BATCH} at a time"
        )
    if not MIN_RECEIVE_INVISIBLE_S <= invisible_duration_s <= MAX_INVISIBLE_MS / 1000:
        raise PopRequestError(
            f"invisible duration {invisible_duration_s!r} s is out of range; receive with "
            f"{MIN_RECEIVE_INVISIBLE_S:g} s to {MAX_INVISIBLE_MS // 1000} s (12 hours)"
        )
    return round(invisible_duration_s * 1000)


def check_change_invisible(invisible_duration_s: float) -> int:
    """The invisible time in ms of a valid change (0 to 12 h); else PopRequestError."""
    if not 0 <= invisible_duration_s <= MAX_INVISIBLE_MS / 1000:
        raise PopRequestError(
            f"invisible duration {invisible_duration_s!r} s is out of range; give 0 s to "
            f"{MAX_INVISIBLE_MS // 1000} s (12 hours)"
        )
    return round(invisible_duration_s * 1000)
