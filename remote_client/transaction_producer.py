"""The transactional producer over remoting (RocketMQ's TransactionMQProducer on a cluster): core's
TransactionProducer's calls.

`send_message_in_transaction(topic, body, local_executor, arg)` sends a half message (TRAN_MSG, PGROUP) as the
Producer sends (queue choice, retries on another group); once it is stored (SEND_OK) it runs the local transaction,
then ends the half with END_TRANSACTION at the group that holds it (8 commit, 12 roll back, 0 unknown: left to the
check-backs). A half stored but not confirmed (FLUSH_DISK_TIMEOUT) is rolled back without running the executor, and
a failure to end is logged, not raised: a check-back settles it, as in RocketMQ and in process.

Check-backs: from `start()` the Cluster's heartbeats name the producer group to every master, and a broker holding
an undecided half sends CHECK_TRANSACTION_STATE on that connection; the checker gets the half message (StoredMessage,
its properties with __transactionId__) and its answer goes back as END_TRANSACTION, fromTransactionCheck=true. A
plain checker function runs in a worker thread, a coroutine function on the event loop, as in process.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from core import (
    COMPRESS_OVER,
    DEFAULT_RETRY_TIMES,
    DEFAULT_SEND_TIMEOUT_MS,
    CoreError,
    IllegalArgumentError,
    LocalTransactionState,
    Message,
    SendStatus,
    StoredMessage,
    TransactionSendResult,
    in_worker_thread,
    transaction_answer,
)
from remote_client.cluster import PROPERTY_PRODUCER_GROUP, Cluster
from remote_client.producer import Producer
from remote_client.replies import check
from remoting.channel import Channel
from remoting.codes import RequestCode
from remoting.command import RemotingCommand

log = logging.getLogger(__name__)

PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_TRANSACTION_ID = "__transactionId__"
# commitOrRollback: MessageSysFlag's transaction types.
_KINDS = {
    LocalTransactionState.COMMIT_MESSAGE: "8",
    LocalTransactionState.ROLLBACK_MESSAGE: "12",
    LocalTransactionState.UNKNOW: "0",
}

LocalExecutor = Callable[[Message, Any], Any]
LocalChecker = Callable[[StoredMessage], Any]


class TransactionProducer(Producer):
    def __init__(
        self,
        cluster: Cluster,
        group: str,
        transaction_checker: LocalChecker,
        compress_over: int = COMPRESS_OVER,
        *,
        send_msg_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        retry_another_broker_when_not_store_ok: bool = False,
    ) -> None:
        super().__init__(
            cluster, group, compress_over, send_msg_timeout_ms=send_msg_timeout_ms,
            retry_times_when_send_failed=retry_times_when_send_failed,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
        )  # fmt: skip
        self.transaction_checker = transaction_checker
        self._checking = False
        self._checks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Become reachable for check-backs of this group's half messages (the heartbeats name the group)."""
        self.cluster.transaction_checkers[self.group] = self._check_back
        self._checking = True
        await super().start()

    async def shutdown(self) -> None:
        if self.cluster.transaction_checkers.get(self.group) == self._check_back:
            del self.cluster.transaction_checkers[self.group]
        self._checking = False
        if self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown()

    async def send_message_in_transaction(
        self, topic: str, body: bytes, local_executor: LocalExecutor, arg: Any = None, **options: Any
    ) -> TransactionSendResult:
        if not self._checking:
            raise IllegalArgumentError(
                f"producer group {self.group!r}: start() the TransactionProducer before sending in a transaction, so"
                " that the brokers can check back undecided transactions with it"
            )
        properties = dict(options.pop("properties", None) or {})
        properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        properties[PROPERTY_PRODUCER_GROUP] = self.group
        sharding_key = options.pop("sharding_key", None)
        selector, selector_arg = options.pop("selector", None), options.pop("selector_arg", None)
        message = self.message(topic, body, properties=properties, sharding_key=sharding_key, **options)
        fixed = await self._fixed_queue(message, sharding_key, selector, selector_arg)
        result = await self.send_message(message, fixed)
        transaction_id = result.msg_id
        if result.status is SendStatus.SEND_OK:
            local = Message(
                topic=topic, body=body, queue_id=result.message_queue.queue_id,
                properties={**message.properties, PROPERTY_TRANSACTION_ID: transaction_id},
                born_timestamp=message.born_timestamp, born_host=message.born_host,
            )  # fmt: skip
            state = await transaction_answer(local_executor, (local, arg), f"local transaction {transaction_id}")
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        fields = {
            "producerGroup": self.group, "tranStateTableOffset": str(result.queue_offset),
            "commitLogOffset": str(result.commit_log_offset), "commitOrRollback": _KINDS[state],
            "fromTransactionCheck": "false", "msgId": result.offset_msg_id, "transactionId": transaction_id,
        }  # fmt: skip
        broker = result.message_queue.broker_name
        try:
            reply = await self.cluster.invoke(broker, RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=fields))
            check(reply, f"broker {broker}")
        except CoreError as exc:
            log.warning("local transaction %s ended %s, but ending its half message at broker %s failed (%s); a"
                        " check-back will settle it", transaction_id, state.value, broker, exc)  # fmt: skip
        return TransactionSendResult(
            result.status, result.msg_id, result.message_queue, result.queue_offset, result.commit_log_offset,
            result.store_host, state, transaction_id, result.recall_handle,
        )  # fmt: skip

    def _check_back(self, channel: Channel, request: RemotingCommand, message: StoredMessage) -> None:
        task = asyncio.get_running_loop().create_task(self._answer_check(channel, request, message))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, channel: Channel, request: RemotingCommand, message: StoredMessage) -> None:
        checker = self.transaction_checker
        ext = request.ext_fields
        what = f"check of transaction {ext.get('transactionId', '')}"
        if inspect.iscoroutinefunction(checker):
            state = await transaction_answer(checker, (message,), what)
        else:
            state = await transaction_answer(in_worker_thread(checker), (message,), what)
        fields = {
            "producerGroup": self.group, "tranStateTableOffset": ext.get("tranStateTableOffset", "0"),
            "commitLogOffset": ext.get("commitLogOffset", "0"), "commitOrRollback": _KINDS[state],
            "fromTransactionCheck": "true", "msgId": ext.get("offsetMsgId", ""),
            "transactionId": ext.get("transactionId", ""),
        }  # fmt: skip
        if channel.is_open:
            channel.invoke_oneway(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=fields))
