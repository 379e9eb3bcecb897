"""What a broker-side filter needs from a message, and what the broker needs from a filter.

Both are protocols so that the filters work on `core.store.message.StoredMessage` and `Message` alike, and so
that the broker can hold a TAG or an SQL92 filter without caring which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class FilterableMessage(Protocol):
    @property
    def properties(self) -> Mapping[str, str]: ...

    @property
    def tags(self) -> str | None: ...


class MessageFilter(Protocol):
    def matches_code(self, code: int) -> bool:
        """The fast check on a consume-queue entry's tag code. False means skip the message without reading it;
        True means read it and ask `matches_message`."""
        ...

    def matches_message(self, message: FilterableMessage) -> bool:
        """The exact check on the message read from the commit log."""
        ...
