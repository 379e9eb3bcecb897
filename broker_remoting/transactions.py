"""Transactions over remoting: END_TRANSACTION 37 from a producer, and CHECK_TRANSACTION_STATE 39 the broker sends
a live producer of a half message's group (RocketMQ's EndTransactionProcessor and its check-back).

END_TRANSACTION names the half message by commitLogOffset and tranStateTableOffset (its half-queue offset, which
the send reply's queueOffset gave), with the producer group; commitOrRollback is 8 (commit), 12 (roll back) or 0
(not known yet: nothing happens, a check-back asks again). Every field may come as a string (the C++ client) and
the request may be marked oneway or not; a reply is written either way unless it is marked oneway. transactionId is
not checked (RocketMQ does not either; the C++ client sends it empty).

A check-back is a oneway request to one connection that heartbeat the producer group, carrying the half message (its
real topic and queue, as the producer sent it) in the stored-record layout, and in the header its offsets, unique
id (msgId), transaction id and offset message id. The producer answers with END_TRANSACTION, fromTransactionCheck
true.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_remoting.records import record_of
from core import Broker, LocalTransactionState, TransactionCheck
from remoting.channel import Channel
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.message_codec import Host, offset_message_id
from remoting.request_headers import HeaderFields

# MessageSysFlag's transaction types, as commitOrRollback carries them.
_STATES = {
    8: LocalTransactionState.COMMIT_MESSAGE,
    12: LocalTransactionState.ROLLBACK_MESSAGE,
    0: LocalTransactionState.UNKNOW,
}


class TransactionDoor:
    def __init__(self, broker: Broker, store_host: Callable[[], Host]) -> None:
        self._broker = broker
        self._store_host = store_host

    async def end(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        fields = HeaderFields(request)
        kind = fields.int("commitOrRollback")
        state = _STATES.get(kind)
        if state is None:
            raise RemotingRequestError(f"END_TRANSACTION: commitOrRollback {kind} is none of 8, 12 and 0")
        await self._broker.transactions.end(
            fields.text("producerGroup"),
            fields.int("commitLogOffset"),
            state,
            queue_offset=fields.int("tranStateTableOffset"),
            from_check=fields.bool("fromTransactionCheck") or fields.text("fromTransactionCheck", "") == "1",
        )
        return None if request.is_oneway else request.reply(ResponseCode.SUCCESS)

    def make_checker(self, channel: Channel, group: str) -> Callable[[], None]:
        """Make `channel`'s producer of `group` a check-back target; the call that undoes it."""

        def check(transaction: TransactionCheck) -> None:
            host = self._store_host()
            message = transaction.message
            channel.invoke_oneway(
                RemotingCommand(
                    RequestCode.CHECK_TRANSACTION_STATE,
                    ext_fields={
                        "tranStateTableOffset": str(transaction.queue_offset),
                        "commitLogOffset": str(transaction.commit_log_offset),
                        "msgId": transaction.msg_id,
                        "transactionId": transaction.transaction_id,
                        "offsetMsgId": offset_message_id(host, transaction.commit_log_offset),
                        "topic": message.topic,
                        "brokerName": self._broker.config.broker_name,
                    },
                    body=record_of(message, host),
                )
            )

        return self._broker.transactions.register_checker(group, check)
