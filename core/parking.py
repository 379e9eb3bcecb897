"""What the broker asks of a service that parks messages in its own topic (core.scheduling.delay_levels,
core.scheduling.timers, core.transactions.service) and moves them on later: rewrite a message before it is stored,
hear where it was stored, say when it is due (for its recall handle), and start and stop with the broker
(`Parking`); what such a service asks of the broker (`ParkingBroker`: its store, clock and topics, and storing the
copies it moves); and which of the three parks a message sent (`parking_for`), by its properties. Both sides are
Protocols: the broker imports the services, and they know it only as a ParkingBroker."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from core.clock import Clock
from core.errors import IllegalMessageError
from core.moves import MovingBroker
from core.store.message import Message
from core.store.message_store import MessageStore, PutResult
from core.system_topics import PARKING_PROPERTIES, PROPERTY_DELAY_LEVEL, PROPERTY_TRANSACTION_PREPARED, TIMER_PROPERTIES
from core.tables.topic_config import TopicCreator


class Parking(Protocol):
    def park(self, message: Message) -> bool:
        """Rewrite `message` in place into the service's own topic and queue, its real topic and queue kept in
        properties; False if its properties ask for nothing after all (it is stored as it is). Raises
        IllegalMessageError for a value the service refuses; nothing is stored then."""
        ...

    def parked(self, message: Message, put: PutResult) -> None:
        """`message`, as `park` rewrote it, is in the log at `put` (called before anything else runs on the loop)."""
        ...

    def recall_due_ms(self, message: Message) -> int | None:
        """When `message`, as `park` rewrote it, is due: the time its recall handle names (core.scheduling.recalls);
        None for a message that waits for something else than a time and cannot be recalled."""
        ...

    async def start(self) -> None:
        """Start after the store has dispatched everything it holds; rebuild state from the service's topic."""
        ...

    async def close(self) -> None:
        """Stop and persist progress."""
        ...


class ParkingBroker(MovingBroker, TopicCreator, Protocol):
    """The broker as a parking service sees it (core.broker.Broker is one): its store and clock, where the service
    keeps its progress, its topics, and storing the copies it moves."""

    @property
    def store(self) -> MessageStore: ...

    @property
    def clock(self) -> Clock:
        """The clock of scheduled work (due times, check-backs)."""
        ...

    @property
    def config_dir(self) -> Path:
        """Where the service keeps its progress file."""
        ...


def parking_for(message: Message, transactions: Parking, schedule: Parking, timers: Parking) -> Parking | None:
    """The service that parks `message`, having rewritten it into its own topic: `transactions` for a transactional
    message, `schedule` for a delay level, `timers` for a timer; None when the properties ask for nothing after all
    (DELAY=0, TRAN_MSG=false). Raises IllegalMessageError for what RocketMQ refuses: a transactional message with a
    delay level or a timer, a message with both."""
    properties = message.properties
    delayed = PROPERTY_DELAY_LEVEL in properties
    timed = any(name in properties for name in TIMER_PROPERTIES)
    if PROPERTY_TRANSACTION_PREPARED in properties:
        if delayed or timed:
            raise IllegalMessageError(
                f"topic {message.topic!r}: a transactional message cannot be delayed (it has"
                f" {', '.join(sorted(PARKING_PROPERTIES & properties.keys()))}); send it without a delay"
            )
        if transactions.park(message):
            return transactions
    if delayed and timed:
        raise IllegalMessageError(
            f"topic {message.topic!r}: a message has a delay level or a timer, not both (it has"
            f" {', '.join(sorted(PARKING_PROPERTIES & properties.keys()))})"
        )
    if delayed and schedule.park(message):
        return schedule
    if timed and timers.park(message):
        return timers
    return None
