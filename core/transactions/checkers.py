"""Who the broker asks about an undecided transaction, and what it asks (RocketMQ's check-back: the broker's
CheckTransactionState request to a live producer of the half message's group, answered by EndTransaction).

`LocalTransactionState` is the answer, with RocketMQ's names (UNKNOW is RocketMQ's spelling). `TransactionCheck` is
the question: the half message as its producer would see it and how to name it in the answer.

`TransactionCheckers` holds the live producers of each producer group, each as a checker: a callable that takes a
TransactionCheck and answers at once (a LocalTransactionState), later (an awaitable of one), or through another
path (None: the in-process TransactionProducer answers at once or later; the gRPC endpoint will send a recovery
command over the client's Telemetry stream and pass the EndTransaction that comes back to the transaction
service's `end`, which is why None must be a legal answer). A producer registers its checker when it starts and
unregisters when it shuts down; a group with several live producers is asked in turn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from core.compression import decode_for_consumer
from core.store.message import INTERNAL_PROPERTIES, StoredMessage
from core.system_topics import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
)

log = logging.getLogger(__name__)


class LocalTransactionState(enum.Enum):
    """How a producer's local transaction ended (RocketMQ's LocalTransactionState)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # not decided yet: the broker asks again later


@dataclass(slots=True, frozen=True)
class TransactionCheck:
    """One check-back of a half message (RocketMQ's CheckTransactionStateRequestHeader and the message with it).

    `message` is the half message as its producer sent it: its real topic and queue, the body uncompressed, its
    properties (TRAN_MSG, PGROUP, TRANSACTION_CHECK_TIMES and __transactionId__ among them) without the broker's
    bookkeeping. The answer names the half by `commit_log_offset` (or `offset_msg_id`), `producer_group` and,
    optionally, `queue_offset` and `transaction_id`, as RocketMQ's EndTransaction does.
    """

    producer_group: str
    transaction_id: str
    msg_id: str  # the message's unique id (UNIQ_KEY)
    commit_log_offset: int
    queue_offset: int  # in the half queue (RocketMQ's tranStateTableOffset)
    offset_msg_id: str
    check_times: int  # this check included
    message: StoredMessage

    @classmethod
    def of(cls, half: StoredMessage, check_times: int) -> TransactionCheck:
        """The check of the half message record `half`, checked `check_times` times with this check."""
        properties = {
            name: value
            for name, value in half.properties.items()
            if name not in INTERNAL_PROPERTIES and name not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
        }
        transaction_id = transaction_id_of(half)
        properties[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
        properties[PROPERTY_TRANSACTION_ID] = transaction_id
        message = dataclasses.replace(
            half,
            topic=half.properties.get(PROPERTY_REAL_TOPIC, half.topic),
            queue_id=int(half.properties.get(PROPERTY_REAL_QUEUE_ID, "0")),
            properties=properties,
        )
        return cls(
            producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP, ""),
            transaction_id=transaction_id,
            msg_id=half.unique_id or "",
            commit_log_offset=half.commit_log_offset,
            queue_offset=half.queue_offset,
            offset_msg_id=half.offset_msg_id,
            check_times=check_times,
            message=decode_for_consumer(message),
        )


def transaction_id_of(half: StoredMessage) -> str:
    """A half message's transaction id: the one its sender gave (__transactionId__), else its UNIQ_KEY, which is
    the id RocketMQ's producer uses."""
    return half.properties.get(PROPERTY_TRANSACTION_ID) or half.unique_id or ""


TransactionAnswer = LocalTransactionState | None
TransactionChecker = Callable[[TransactionCheck], TransactionAnswer | Awaitable[TransactionAnswer]]


async def transaction_answer(
    function: Callable[..., Any], arguments: tuple[Any, ...], what: str
) -> LocalTransactionState:
    """What a producer's local transaction or checker answers, `function(*arguments)` awaited if need be: UNKNOW for
    None, a value that is not a LocalTransactionState, or an exception (logged, naming `what`)."""
    try:
        answer = function(*arguments)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception:
        log.exception("%s raised; taken as UNKNOW", what)
        return LocalTransactionState.UNKNOW
    if answer is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(answer, LocalTransactionState):
        log.error("%s answered %r, not a LocalTransactionState; taken as UNKNOW", what, answer)
        return LocalTransactionState.UNKNOW
    return answer


def in_worker_thread(checker: Callable[[StoredMessage], Any]) -> Callable[[StoredMessage], Awaitable[Any]]:
    """A plain checker run in a worker thread (RocketMQ's checkExecutor), so that one that looks the transaction up
    in a database does not stall the event loop; an async callable object's answer is awaited."""

    async def run(message: StoredMessage) -> Any:
        answer = await asyncio.to_thread(checker, message)
        return await answer if inspect.isawaitable(answer) else answer

    return run


class TransactionCheckers:
    """The live producers of each group, with their checkers (RocketMQ's ProducerManager, for check-back only)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[int, TransactionChecker]] = {}
        self._turns: dict[str, itertools.count[int]] = {}
        self._ids = itertools.count(1)

    def register(self, group: str, checker: TransactionChecker) -> Callable[[], None]:
        """Add a live producer of `group`; returns the call that removes it again (a producer shutting down)."""
        key = next(self._ids)
        self._groups.setdefault(group, {})[key] = checker

        def unregister() -> None:
            checkers = self._groups.get(group)
            if checkers is not None and checkers.pop(key, None) is not None and not checkers:
                del self._groups[group]
                self._turns.pop(group, None)

        return unregister

    def pick(self, group: str) -> TransactionChecker | None:
        """The producer of `group` to ask next (in turn), or None when the group has no live producer."""
        checkers = self._groups.get(group)
        if not checkers:
            return None
        turn = next(self._turns.setdefault(group, itertools.count()))
        return list(checkers.values())[turn % len(checkers)]

    def live(self, group: str) -> int:
        """How many live producers `group` has."""
        return len(self._groups.get(group, ()))
