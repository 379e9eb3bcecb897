"""The in-process client API with the names a RocketMQ user knows: Producer, TransactionProducer, PullConsumer,
PushConsumer and SimpleConsumer. Front doors and tests use these; nothing here does I/O of its own."""

from core.client.message_codec import ConsumeFromWhere, MessageModel, build_message
from core.client.producer import Producer
from core.client.pull_consumer import PullConsumer
from core.client.push_consumer import (
    ConsumeContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    PushConsumer,
    PushConsumerOptions,
)
from core.client.simple_consumer import MessageView, SimpleConsumer
from core.client.transaction_producer import TransactionProducer, TransactionSendResult
from core.transactions.checkers import LocalTransactionState

__all__ = [
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "LocalTransactionState",
    "MessageModel",
    "MessageView",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "PushConsumerOptions",
    "SimpleConsumer",
    "TransactionProducer",
    "TransactionSendResult",
    "build_message",
]
