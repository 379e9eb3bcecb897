"""The simple consumer (RocketMQ 5's SimpleConsumer), in process: receive a batch, process each message, then ack
it or change its invisible time. A message not acked before its invisible time passes is received again, by
this consumer or another of its group, with its delivery attempt counted.

Consumers of one group share the broker's PopService (core.pop.service), so they divide the messages, not the queues:
any number of them may receive from the same topic, and none gets a message another holds invisible.

Subscriptions map a topic to a TAG expression ("*", "TagA || TagB") or to (expression type, expression) for
SQL92; they are compiled when the consumer is built, so a malformed one fails there (FilterExpressionError). A
receive starts at the next subscribed topic each time, takes from the others when that one has too little, and
waits up to `await_duration_s` (long polling, at most MAX_POP_LONG_POLL_MS) when none has anything.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from core.broker import Broker
from core.client.receive_rules import (
    DEFAULT_AWAIT_DURATION_S,
    Subscriptions,
    check_await_duration,
    check_change_invisible,
    check_receive,
    subscription_items,
)
from core.filter import ExpressionType, MessageFilter, build_filter
from core.pop.request import MAX_POP_LONG_POLL_MS
from core.pop.service import PROPERTY_MESSAGE_GROUP, PopService
from core.store.message import StoredMessage

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class MessageView:
    """A received message (RocketMQ 5's MessageView). Ack it, or change its invisible time, with this view."""

    message: StoredMessage
    receipt_handle: str
    delivery_attempt: int
    invisible_until: float  # on the PopService's clock

    @property
    def topic(self) -> str:
        return self.message.topic

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def tags(self) -> str | None:
        return self.message.tags

    @property
    def keys(self) -> list[str]:
        return self.message.keys

    @property
    def properties(self) -> dict[str, str]:
        """Every property, the well-known ones (TAGS, KEYS, UNIQ_KEY, __SHARDINGKEY) included."""
        return self.message.properties

    @property
    def message_group(self) -> str | None:
        """The FIFO message group, if the producer gave one."""
        return self.message.properties.get(PROPERTY_MESSAGE_GROUP) or None

    @property
    def message_id(self) -> str | None:
        return self.message.unique_id


class SimpleConsumer:
    def __init__(
        self,
        broker: Broker,
        group: str,
        subscriptions: Subscriptions,
        await_duration_s: float = DEFAULT_AWAIT_DURATION_S,
        pop_service: PopService | None = None,
    ) -> None:
        check_await_duration(await_duration_s)
        broker.groups.get_or_auto_create(group)  # checks the name; refuses an unknown group if auto-create is off
        self.broker = broker
        self.group = group
        self.await_duration_s = await_duration_s
        self.pop_service = pop_service if pop_service is not None else PopService.of(broker)
        self._subscriptions: dict[str, tuple[str, str]] = {}
        self._filters: dict[str, MessageFilter | None] = {}
        self._next_topic = 0
        for topic, expression, expression_type in subscription_items(subscriptions):
            self.subscribe(topic, expression, expression_type)

    @property
    def subscriptions(self) -> dict[str, tuple[str, str]]:
        """topic -> (expression type, expression)."""
        return dict(self._subscriptions)

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        """Receive from `topic` too (or change its filter). The topic must exist, as RocketMQ's route lookup
        requires; a malformed expression raises FilterExpressionError."""
        self.broker.topic_config(topic)
        compiled = build_filter(expression_type, expression)
        kind = (expression_type or ExpressionType.TAG).upper()
        subscribes_all = kind == ExpressionType.TAG and (expression or "").strip() in ("", "*")
        self._filters[topic] = None if subscribes_all else compiled
        self._subscriptions[topic] = (kind, expression)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        self._filters.pop(topic, None)

    async def receive(self, max_message_num: int, invisible_duration_s: float) -> list[MessageView]:
        """Up to `max_message_num` messages (1 to 32), each invisible to the group for `invisible_duration_s`
        (10 s to 12 h); waits up to the consumer's await duration when there are none, then returns []."""
        invisible_ms = check_receive(self.group, bool(self._subscriptions), max_message_num, invisible_duration_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(self.await_duration_s, MAX_POP_LONG_POLL_MS / 1000)
        while True:
            views = await self._take(max_message_num, invisible_ms)
            if views:
                return views
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self.pop_service.wait(self.group, list(self._subscriptions), remaining)

    async def _take(self, max_message_num: int, invisible_ms: int) -> list[MessageView]:
        """One round over the subscribed topics, without waiting, starting at the next topic in turn."""
        topics = list(self._subscriptions)
        start = self._next_topic % len(topics)
        self._next_topic = start + 1
        views: list[MessageView] = []
        for topic in topics[start:] + topics[:start]:
            wanted = max_message_num - len(views)
            if wanted <= 0:
                break
            popped = await self.pop_service.pop(self.group, topic, wanted, invisible_ms, self._filters.get(topic))
            views += [MessageView(p.message, p.receipt_handle, p.delivery_attempt, p.invisible_until) for p in popped]
        return views

    async def ack(self, view: MessageView) -> None:
        """The message is done; it is not delivered again. Acking it twice does nothing."""
        self.pop_service.ack(self.group, view.receipt_handle)

    async def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Keep the message invisible for `invisible_duration_s` from now (0 to 12 h: shorter than before is
        allowed, 0 makes it visible again at once). Returns a view with the new receipt handle; the given view's
        handle no longer works, for ack or for another change."""
        invisible_ms = check_change_invisible(invisible_duration_s)
        handle = self.pop_service.change_invisible_duration(self.group, view.receipt_handle, invisible_ms)
        return replace(view, receipt_handle=handle, invisible_until=self.pop_service.clock() + invisible_ms / 1000)
