"""Transactional messages (RocketMQ's TransactionalMessageService): not yet built; refused until then."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import IllegalMessageError
from core.store.message import Message
from core.store.message_store import PutResult
from core.system_topics import PROPERTY_TRANSACTION_PREPARED

if TYPE_CHECKING:
    from core.broker import Broker


class TransactionService:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def park(self, message: Message) -> bool:
        if message.properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
            del message.properties[PROPERTY_TRANSACTION_PREPARED]
            return False
        raise IllegalMessageError(f"topic {message.topic!r}: transactional messages are not supported yet")

    def parked(self, message: Message, put: PutResult) -> None:
        pass

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass
