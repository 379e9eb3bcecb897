"""What the broker's calls answer: the result of a send, of a pull, and a topic's route (RocketMQ's SendResult,
PullResult and TopicRouteData, for one broker), and a transactional send's (TransactionSendResult: here, not in the
compiled core.client.transaction_producer, because a compiled class cannot extend an interpreted dataclass)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.message_queue import MessageQueue
from core.store.message import StoredMessage
from core.store.message_id import encode_offset_msg_id
from core.tables.topic_config import Perm, TopicConfig
from core.transactions.checkers import LocalTransactionState


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True, init=False)
class SendResult:
    # __init__ written out: mypyc compiles a class's own methods, while those the dataclass decorator generates run
    # interpreted (core.store.put_result.PutResult). One is built per message sent.
    status: SendStatus
    msg_id: str  # the producer's unique id (UNIQ_KEY)
    message_queue: MessageQueue
    queue_offset: int
    commit_log_offset: int
    store_host: tuple[str, int]
    # A delay-level or timer message's handle for Broker.recall_message while it is not due (RocketMQ 5.3's
    # SendResult.recallHandle); "" for any other message.
    recall_handle: str

    def __init__(
        self,
        status: SendStatus,
        msg_id: str,
        message_queue: MessageQueue,
        queue_offset: int,
        commit_log_offset: int,
        store_host: tuple[str, int],
        recall_handle: str = "",
    ) -> None:
        self.status = status
        self.msg_id = msg_id
        self.message_queue = message_queue
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.store_host = store_host
        self.recall_handle = recall_handle

    @property
    def offset_msg_id(self) -> str:
        """Where the record is: store host and commit-log offset (RocketMQ's offsetMsgId)."""
        return encode_offset_msg_id(self.store_host, self.commit_log_offset)


@dataclass(slots=True, init=False)
class TransactionSendResult(SendResult):
    """The half message's send result (its queue offset and commit-log offset are the half's), with how the local
    transaction ended and the transaction id (the message's UNIQ_KEY): what TransactionProducer answers. Its
    __init__ is written out as well: mypyc would call the base's with the wrong arguments from a generated one."""

    local_transaction_state: LocalTransactionState
    transaction_id: str

    def __init__(
        self,
        status: SendStatus,
        msg_id: str,
        message_queue: MessageQueue,
        queue_offset: int,
        commit_log_offset: int,
        store_host: tuple[str, int],
        local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW,
        transaction_id: str = "",
        recall_handle: str = "",
    ) -> None:
        # Not the zero-argument super(): a dataclass with slots is a new class, which that super() of the interpreted
        # twin does not know.
        SendResult.__init__(
            self, status, msg_id, message_queue, queue_offset, commit_log_offset, store_host, recall_handle
        )
        self.local_transaction_state = local_transaction_state
        self.transaction_id = transaction_id


@dataclass(slots=True, frozen=True)
class Route:
    """A topic's queues and permissions as producers and consumers need them on every call."""

    config: TopicConfig
    write_queues: list[MessageQueue]
    read_queues: list[MessageQueue]
    writable: bool
    readable: bool

    @classmethod
    def of(cls, config: TopicConfig, broker_name: str) -> Route:
        topic = config.topic_name
        return cls(
            config,
            [MessageQueue(topic, broker_name, q) for q in range(config.write_queue_nums)],
            [MessageQueue(topic, broker_name, q) for q in range(config.read_queue_nums)],
            bool(config.perm & Perm.WRITE),
            bool(config.perm & Perm.READ),
        )


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    messages: list[StoredMessage]
    next_begin_offset: int
    min_offset: int
    max_offset: int
