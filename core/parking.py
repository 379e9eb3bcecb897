"""What the broker asks of a service that parks messages in its own topic (core.schedule, core.timer,
core.transaction) and moves them on later: rewrite a message before it is stored, hear where it was stored, and
start and stop with the broker."""

from __future__ import annotations

from typing import Protocol

from core.store.message import Message
from core.store.message_store import PutResult


class Parking(Protocol):
    def park(self, message: Message) -> bool:
        """Rewrite `message` in place into the service's own topic and queue, its real topic and queue kept in
        properties; False if its properties ask for nothing after all (it is stored as it is). Raises
        IllegalMessageError for a value the service refuses; nothing is stored then."""
        ...

    def parked(self, message: Message, put: PutResult) -> None:
        """`message`, as `park` rewrote it, is in the log at `put` (called before anything else runs on the loop)."""
        ...

    async def start(self) -> None:
        """Start after the store has dispatched everything it holds; rebuild state from the service's topic."""
        ...

    async def close(self) -> None:
        """Stop and persist progress."""
        ...
