"""The broker's stored listeners (Broker.add_stored_listener): callbacks that hear of every message appended to the
store, once, in store order, with the result its sender gets, before the send returns.

A front door whose in-memory state derives from messages (the MQTT gateway's retained messages) keeps it here in
step with the store. Under ASYNC_FLUSH the broker tells them as soon as a send is appended (`StoredListeners.tell`,
`tell_all`). Under SYNC_FLUSH a message is heard when its wait for the disk is over (`StoredListeners.confirm`), and
those waits end out of store order: the flush thread releases waiters in store order, but a sender whose record was
flushed before it began to wait goes on at once, and a cancelled sender at any time. So appended sends queue up here,
in store order, and are heard from the head of the queue once their results are final.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Sequence

from core.results import SendResult, SendStatus
from core.store.message import Message
from core.store.message_store import MessageStore, PutStatus

log = logging.getLogger(__name__)

StoredListener = Callable[[Message, SendResult], None]

# RocketMQ's PROPERTY_WAIT_STORE_MSG_OK: "false" asks the broker to answer once the message is appended, without
# waiting for the disk (SYNC_FLUSH) or a slave (SYNC_MASTER); any other value, or none, waits.
PROPERTY_WAIT = "WAIT"


def waits(messages: Sequence[Message]) -> bool:
    """Whether a send of `messages` waits to be confirmed: unless every one of them says WAIT=false."""
    for message in messages:
        properties = message.properties
        if not properties or properties.get(PROPERTY_WAIT) != "false":
            return True
    return False


class _Unheard:
    """The messages of one SYNC_FLUSH send, appended, that the stored listeners have not heard of yet. Settled once
    their results are final: on disk (SEND_OK, as built) or not confirmed in time (FLUSH_DISK_TIMEOUT)."""

    __slots__ = ("messages", "results", "settled")

    def __init__(self, messages: Sequence[Message], results: Sequence[SendResult]) -> None:
        self.messages = messages
        self.results = results
        self.settled = False

    def settle(self, status: SendStatus) -> None:
        for result in self.results:
            result.status = status
        self.settled = True


class StoredListeners:
    """The listeners of one broker, and its SYNC_FLUSH sends appended that they have not heard of yet.

    `listeners` is the list itself, so that the broker's send path tests it for emptiness without a call."""

    __slots__ = ("_store", "_unheard", "listeners")

    def __init__(self, store: MessageStore) -> None:
        # The store, not its wait_stored: that is looked up at each wait, as a test may replace it.
        self._store = store
        self.listeners: list[StoredListener] = []
        # SYNC_FLUSH sends appended whose messages the listeners have not heard of yet, in store order.
        self._unheard: collections.deque[_Unheard] = collections.deque()

    def add(self, listener: StoredListener) -> None:
        self.listeners.append(listener)

    def tell(self, message: Message, result: SendResult) -> None:
        """Have every listener hear of `message`, stored with `result`; a listener that raises is logged. (Its own
        loop, not tell_all's: every single send comes here.)"""
        for listener in self.listeners:
            try:
                listener(message, result)
            except Exception:
                _log_failure(listener, message)

    def tell_unconfirmed(self, messages: Sequence[Message], results: Sequence[SendResult]) -> None:
        """Have the listeners hear of a send that does not wait (WAIT=false) under SYNC_FLUSH or SYNC_MASTER: after
        the sends appended before it that still wait, in store order."""
        if not self.listeners:
            return
        if not self._unheard:
            self.tell_all(messages, results)
            return
        sent = _Unheard(messages, results)
        sent.settled = True
        self._unheard.append(sent)
        self._hear_settled()

    def tell_all(self, messages: Sequence[Message], results: Sequence[SendResult]) -> None:
        """`tell` for each message of a batch stored with its result, in order (one call a batch: the MQTT gateway
        sends every message through a batch)."""
        listeners = self.listeners
        for message, result in zip(messages, results, strict=True):
            for listener in listeners:
                try:
                    listener(message, result)
                except Exception:
                    _log_failure(listener, message)

    async def confirm(self, messages: Sequence[Message], results: Sequence[SendResult], end_offset: int) -> None:
        """SYNC_FLUSH or SYNC_MASTER: wait until the records of `results` (stored up to `end_offset`) are stored as
        promised (MessageStore.wait_stored: on disk, on a slave), mark them with the store's status if they are not
        (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE), and have the listeners hear of them in store
        order.

        Appended sends queue up in `_unheard`, in store order, and are heard from its head. A send that learns its
        records are stored knows every earlier record is too, and settles the earlier sends (SEND_OK) before it
        is heard itself."""
        if not self.listeners:
            status = await self._store.wait_stored(end_offset)
            if status is not PutStatus.PUT_OK:
                failed = SendStatus(status.value)
                for result in results:
                    result.status = failed
            return
        sent = _Unheard(messages, results)
        self._unheard.append(sent)
        try:
            status = await self._store.wait_stored(end_offset)
        except BaseException:
            # Cancelled while waiting: the records are in the log all the same, not confirmed.
            if not sent.settled:
                sent.settle(SendStatus.FLUSH_SLAVE_TIMEOUT if self._store.acks_wait and not self._store.sync_flush
                            else SendStatus.FLUSH_DISK_TIMEOUT)  # fmt: skip
                self._hear_settled()
            raise
        if not sent.settled:
            if status is PutStatus.PUT_OK:
                for earlier in self._unheard:
                    earlier.settled = True  # their results say SEND_OK already
                    if earlier is sent:
                        break
            else:
                sent.settle(SendStatus(status.value))
        self._hear_settled()

    def _hear_settled(self) -> None:
        unheard = self._unheard
        while unheard and unheard[0].settled:
            sent = unheard.popleft()
            self.tell_all(sent.messages, sent.results)


def _log_failure(listener: StoredListener, message: Message) -> None:
    log.exception("stored listener %r failed on a message of topic %r", listener, message.topic)
