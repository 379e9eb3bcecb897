"""What went through the broker, per topic, and what it refused: plain counters for whoever reports on the broker
(mqgate's `/metrics`), read when asked, never pushed.

In: every message `Broker.send`/`send_batch` (and the broker services that move messages to their real topic)
stored, counted under its topic with its body's bytes. Out: every message handed to a consumer, counted under the
topic that stored it: `Broker.pull` and `PopService.pop` count what they return; a front door that reads light
queues to deliver on its own (the MQTT gateway) counts its deliveries with `delivered`. Reads of light queues
through `Broker.pull` are not counted: they are a front door's own bookkeeping (an MQTT filter's queue, an
EventBridge target's queue), and counting them as well would count a message twice, under a name no operator uses.

The counters are written on the event loop's thread only (one dict look-up and two additions per send call or
pull batch, no lock) and read there too: a reader on another thread copies them first (`snapshot`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TopicCounts:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0


class TopicTraffic:
    """Messages and body bytes in and out per topic, and the sends the store refused by reason."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounts] = {}
        # Store refusals by reason (`refusal_reason`): a message the store would not write is counted once.
        self.refused: dict[str, int] = {}

    def _counts(self, topic: str) -> TopicCounts:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = TopicCounts()
        return counts

    def stored(self, topic: str, messages: int, body_bytes: int) -> None:
        counts = self.topics.get(topic) or self._counts(topic)
        counts.messages_in += messages
        counts.bytes_in += body_bytes

    def delivered(self, topic: str, messages: int, body_bytes: int) -> None:
        """`messages` of `topic` (`body_bytes` in all) handed to consumers."""
        counts = self.topics.get(topic) or self._counts(topic)
        counts.messages_out += messages
        counts.bytes_out += body_bytes

    def refuse(self, reason: str, messages: int = 1) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + messages

    def snapshot(self) -> dict[str, TopicCounts]:
        """A copy of the counters per topic, for a reader that must not see them change while it reads."""
        return {
            topic: TopicCounts(c.messages_in, c.bytes_in, c.messages_out, c.bytes_out)
            for topic, c in list(self.topics.items())
        }


def refusal_reason(error: BaseException) -> str:
    """A short, stable label for why the store refused a write: the store's error class, in snake case without
    `Error` (StoreNotWritableError -> "store_not_writable": disk over disk_refuse_ratio, store closed, failed
    fsync; MessageTooLargeError -> "message_too_large"; InvalidMessageError, InvalidTopicError)."""
    name = type(error).__name__.removesuffix("Error")
    return "".join(f"_{char.lower()}" if char.isupper() else char for char in name).lstrip("_")
