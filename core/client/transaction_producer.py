"""The transactional producer (RocketMQ's TransactionMQProducer with DefaultMQProducerImpl.sendMessageInTransaction
and checkTransactionState), in process.

`send_message_in_transaction(topic, body, local_executor, arg)`:

1. sends the message as a half message (TRAN_MSG=true, PGROUP=the group), with the producer's send timeout and
   retries; a refusal is raised and no local transaction runs;
2. if the half is stored (SEND_OK), runs `local_executor(message, arg)`, the local transaction, on the caller's
   task (RocketMQ runs it on the caller's thread); it answers a LocalTransactionState, None (UNKNOW) or an
   awaitable of either; an executor that raises means UNKNOW. A half stored but not confirmed on disk
   (FLUSH_DISK_TIMEOUT) is rolled back without running the executor, as RocketMQ does;
3. ends the half with the answer: COMMIT makes the message visible, ROLLBACK drops it, UNKNOW leaves it to the
   broker's check-backs. A failure to end is logged, not raised (RocketMQ's end is one-way): the check-back
   settles it;
4. returns a TransactionSendResult: the send result with the local transaction state and the transaction id.

Check-back: `transaction_checker(message)` is asked by the broker about a half still undecided after the
transaction timeout (core.transactions.service), from `start()` until `shutdown()`. It gets the half message as sent
(StoredMessage: real topic, body, properties with __transactionId__ and TRANSACTION_CHECK_TIMES) and answers
as the executor does. A plain function runs in a worker thread (RocketMQ's checkExecutor), so a checker that
looks the transaction up in a database does not stall the broker; a coroutine function runs on the event loop.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any

from core.broker import Broker, SendResult, SendStatus
from core.client.producer import Producer
from core.client.send_retry import DEFAULT_RETRY_TIMES, DEFAULT_SEND_TIMEOUT_MS
from core.compression import COMPRESS_OVER
from core.errors import CoreError, IllegalArgumentError
from core.results import TransactionSendResult
from core.store.message import Message, StoredMessage
from core.system_topics import PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_ID, PROPERTY_TRANSACTION_PREPARED
from core.transactions.checkers import (
    LocalTransactionState,
    TransactionAnswer,
    TransactionCheck,
    in_worker_thread,
    transaction_answer,
)

log = logging.getLogger(__name__)

LocalExecutor = Callable[[Message, Any], TransactionAnswer | Awaitable[TransactionAnswer]]
LocalChecker = Callable[[StoredMessage], TransactionAnswer | Awaitable[TransactionAnswer]]


class TransactionProducer(Producer):
    # The options spelled out, not passed on as **options: compiled by mypyc, super().__init__(broker, group,
    # **options) handed the empty dict to `compress_over` ("int object expected; got dict", found by the twin test).
    def __init__(
        self,
        broker: Broker,
        group: str,
        transaction_checker: LocalChecker,
        compress_over: int = COMPRESS_OVER,
        *,
        send_msg_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        retry_times_when_send_async_failed: int = DEFAULT_RETRY_TIMES,
        retry_another_broker_when_not_store_ok: bool = False,
    ) -> None:
        super().__init__(
            broker,
            group,
            compress_over,
            send_msg_timeout_ms=send_msg_timeout_ms,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_times_when_send_async_failed=retry_times_when_send_async_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
        )
        self.transaction_checker = transaction_checker
        self._unregister: Callable[[], None] | None = None

    async def start(self) -> None:
        """Become reachable for the broker's check-backs of this group's half messages."""
        if self._unregister is None:
            self._unregister = self.broker.transactions.register_checker(self.group, self._check)

    async def shutdown(self) -> None:
        """No more check-backs reach this producer; background sends are waited for."""
        if self._unregister is not None:
            self._unregister()
            self._unregister = None
        await super().shutdown()

    async def send_message_in_transaction(
        self, topic: str, body: bytes, local_executor: LocalExecutor, arg: Any = None, **options: Any
    ) -> TransactionSendResult:
        """Send a half message, run the local transaction, end the half with its outcome (see the module docstring).
        `options` are those of `Producer.message` (tags, keys, properties, sharding_key, selector)."""
        if self._unregister is None:
            raise IllegalArgumentError(
                f"producer group {self.group!r}: start() the TransactionProducer before sending in a transaction, so"
                " that the broker can check back undecided transactions with it"
            )
        properties = dict(options.pop("properties", None) or {})
        properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        properties[PROPERTY_PRODUCER_GROUP] = self.group
        message = self.message(topic, body, properties=properties, **options)
        result = await self.send_message(message)
        transaction_id = result.msg_id
        if result.status is SendStatus.SEND_OK:
            local = Message(
                topic=topic,
                body=body,
                queue_id=result.message_queue.queue_id,
                properties={**message.properties, PROPERTY_TRANSACTION_ID: transaction_id},
                born_timestamp=message.born_timestamp,
                born_host=message.born_host,
            )
            state = await transaction_answer(local_executor, (local, arg), f"local transaction {transaction_id}")
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.broker.transactions.end(
                self.group,
                result.commit_log_offset,
                state,
                transaction_id=transaction_id,
                queue_offset=result.queue_offset,
            )
        except CoreError as exc:
            log.warning(
                "local transaction %s ended %s, but ending its half message failed (%s); a check-back will settle it",
                transaction_id,
                state.value,
                exc,
            )
        return TransactionSendResult(
            **{field.name: getattr(result, field.name) for field in fields(SendResult)},
            local_transaction_state=state,
            transaction_id=transaction_id,
        )

    def _check(self, check: TransactionCheck) -> Awaitable[TransactionAnswer]:
        checker = self.transaction_checker
        what = f"check of transaction {check.transaction_id}"
        if inspect.iscoroutinefunction(checker):
            return transaction_answer(checker, (check.message,), what)
        return transaction_answer(in_worker_thread(checker), (check.message,), what)
