"""The simple consumer over remoting (RocketMQ 5's SimpleConsumer on a cluster): core.SimpleConsumer's calls, popping
from every broker group that serves a subscribed topic (POP_MESSAGE; ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME
at the group the message came from).

A receive goes round the (topic, group) pairs, starting at the next pair each time, taking without waiting until it
has `max_message_num` or has asked every pair; with nothing anywhere, it waits on every pair at once (NOTIFICATION,
which takes nothing), up to the await duration, and takes from those that say a message may be there. A group that
cannot be reached is skipped (its messages wait there for the next receive); every group failing is the error of
the last. Subscriptions are compiled here first, so a malformed one fails as in process (FilterExpressionError);
each pop carries the expression for its broker to apply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace

from core import (
    DEFAULT_AWAIT_DURATION_S,
    MAX_POP_LONG_POLL_MS,
    CoreError,
    ExpressionType,
    IllegalArgumentError,
    MessageView,
    Subscriptions,
    build_filter,
    check_await_duration,
    check_change_invisible,
    check_receive,
    subscription_items,
)
from remote_client.cluster import Cluster, ConsumerEntry
from remote_client.pop_request import (
    ack_request,
    change_invisible_request,
    notification_request,
    pop_request,
    popped_views,
)
from remote_client.replies import check

log = logging.getLogger(__name__)

# A reply may come this much after a broker's long poll ends.
REPLY_MARGIN_S = 5.0


@dataclass(slots=True, frozen=True)
class RemoteMessageView(MessageView):
    """A received message, as core's MessageView, with the broker group it came from (where it is acked)."""

    broker_name: str = ""


class SimpleConsumer:
    def __init__(
        self,
        cluster: Cluster,
        group: str,
        subscriptions: Subscriptions,
        await_duration_s: float = DEFAULT_AWAIT_DURATION_S,
    ) -> None:
        check_await_duration(await_duration_s)
        self.cluster = cluster
        self.group = group
        self.await_duration_s = await_duration_s
        self._subscriptions: dict[str, tuple[str, str]] = {}
        self._next = 0
        for topic, expression, expression_type in subscription_items(subscriptions):
            self._compile(topic, expression, expression_type)

    def _compile(self, topic: str, expression: str, expression_type: str) -> None:
        build_filter(expression_type, expression)
        self._subscriptions[topic] = ((expression_type or ExpressionType.TAG).upper(), expression)

    @property
    def subscriptions(self) -> dict[str, tuple[str, str]]:
        return dict(self._subscriptions)

    async def start(self) -> None:
        """Join the cluster's heartbeats as a pop consumer of the group (its brokers then know the group)."""
        await self.cluster.start()
        for topic in self._subscriptions:
            await self.cluster.route(topic)  # the topic must exist, as core's subscribe requires
        self.cluster.remove_consumer(self.group)
        self.cluster.add_consumer(ConsumerEntry(self.group, "CONSUME_POP", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                                dict(self._subscriptions)))  # fmt: skip
        await self.cluster.heartbeat()

    async def subscribe(self, topic: str, expression: str = "*", expression_type: str = ExpressionType.TAG) -> None:
        await self.cluster.route(topic)
        self._compile(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)

    async def _pairs(self) -> list[tuple[str, str]]:
        pairs = []
        for topic in self._subscriptions:
            route = await self.cluster.route(topic)
            pairs += [(topic, data.broker_name) for data in sorted(route.queue_datas, key=lambda d: d.broker_name)
                      if data.readable and route.master(data.broker_name)]  # fmt: skip
        return pairs

    async def receive(self, max_message_num: int, invisible_duration_s: float) -> list[MessageView]:
        """Up to `max_message_num` messages (1 to 32), each invisible to the group for `invisible_duration_s`
        (10 s to 12 h); waits up to the await duration when there are none, then returns []."""
        invisible_ms = check_receive(self.group, bool(self._subscriptions), max_message_num, invisible_duration_s)
        pairs = await self._pairs()
        if not pairs:
            return []
        start = self._next % len(pairs)
        self._next = start + 1
        order = pairs[start:] + pairs[:start]
        views = await self._take(order, max_message_num, invisible_ms)
        if views:
            return views
        wait_ms = round(min(self.await_duration_s, MAX_POP_LONG_POLL_MS / 1000) * 1000)
        if wait_ms <= 0:
            return []
        ready = await self._notified(order, wait_ms)
        return await self._take(ready, max_message_num, invisible_ms) if ready else []

    async def _take(self, pairs: list[tuple[str, str]], wanted: int, invisible_ms: int) -> list[MessageView]:
        views: list[MessageView] = []
        failures: list[CoreError] = []
        for topic, broker in pairs:
            if len(views) >= wanted:
                break
            expression_type, expression = self._subscriptions[topic]
            request = pop_request(self.group, topic, wanted - len(views), invisible_ms, 0, expression_type, expression)
            try:
                reply = await self.cluster.invoke(broker, request)
                views += popped_views(reply, broker, invisible_ms, f"broker {broker}", RemoteMessageView)
            except CoreError as exc:
                log.info("group %s: popping %s from broker %s failed: %s", self.group, topic, broker, exc)
                self.cluster.forget_route(topic)
                failures.append(exc)
        if not views and failures and len(failures) == len(pairs):
            raise failures[-1]
        return views

    async def _notified(self, pairs: list[tuple[str, str]], wait_ms: int) -> list[tuple[str, str]]:
        """The pairs whose broker says a pop may find something, after waiting on all of them at once."""

        async def wait(topic: str, broker: str) -> bool:
            request = notification_request(self.group, topic, wait_ms)
            try:
                reply = await self.cluster.invoke(broker, request, wait_ms / 1000 + REPLY_MARGIN_S)
                return check(reply, f"broker {broker}").ext_fields.get("hasMsg") == "true"
            except CoreError as exc:
                log.info("group %s: waiting on %s at broker %s failed: %s", self.group, topic, broker, exc)
                return False

        tasks = {pair: asyncio.ensure_future(wait(*pair)) for pair in pairs}
        try:
            pending = set(tasks.values())
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(task.result() for task in done):
                    break
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        return [pair for pair, task in tasks.items() if task.done() and not task.cancelled() and task.result()]

    async def ack(self, view: MessageView) -> None:
        """The message is done; it is not delivered again. Acking it twice does nothing."""
        broker = _broker_of(view)
        reply = await self.cluster.invoke(broker, ack_request(self.group, view.topic, view.receipt_handle))
        check(reply, f"broker {broker}")

    async def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Keep the message invisible for `invisible_duration_s` from now (0 to 12 h). Returns a view with the new
        receipt handle; the given view's handle no longer works."""
        invisible_ms = check_change_invisible(invisible_duration_s)
        broker = _broker_of(view)
        request = change_invisible_request(self.group, view.topic, view.receipt_handle, invisible_ms)
        reply = check(await self.cluster.invoke(broker, request), f"broker {broker}")
        return replace(
            view, receipt_handle=reply.ext_fields["extraInfo"], invisible_until=time.monotonic() + invisible_ms / 1000
        )

    async def shutdown(self) -> None:
        self.cluster.remove_consumer(self.group)
        await self.cluster.unregister_group("consumerGroup", self.group)


def _broker_of(view: MessageView) -> str:
    if not isinstance(view, RemoteMessageView) or not view.broker_name:
        raise IllegalArgumentError("this view was not received by a remote SimpleConsumer: ack it where it came from")
    return view.broker_name
