"""The broker's one stored listener for the doors' records topics (EB_CLUSTER, CONNECT_CLUSTER): it hands each record
to the handler its door set for the topic, the cluster part in force. Under automatic failover a door's cluster
part is made again for each term of the broker as master, and a broker's stored listeners cannot be taken back:
one listener, whose handlers change, rather than one more listener each term (the old ones would still apply
records to parts that were closed). It runs for every message stored: one dict lookup for most."""

from __future__ import annotations

from collections.abc import Callable

from core import Broker, Message, SendResult

Handler = Callable[[Message], None]


class RecordListeners:
    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    @classmethod
    def of(cls, broker: Broker) -> RecordListeners:
        def make() -> RecordListeners:
            listeners = cls()
            broker.add_stored_listener(listeners)
            return listeners

        return broker.shared(cls, make)

    def set(self, topic: str, handler: Handler) -> None:
        self._handlers[topic] = handler

    def clear(self, topic: str, handler: Handler) -> None:
        """Stop handing `topic`'s records to `handler` (if it is still the one: a next term may have set its own)."""
        if self._handlers.get(topic) == handler:
            del self._handlers[topic]

    def __call__(self, message: Message, result: SendResult) -> None:
        handler = self._handlers.get(message.topic)
        if handler is not None:
            handler(message)
