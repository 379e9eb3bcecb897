"""The broker core's public API: everything a front door (mqtt_bridge, connectors, eventbridge, spark_sink, the
RocketMQ 5 gRPC endpoint proxy) and the wiring (mqgate) use of the core, and nothing else. Import from here,
`from core import Broker, Message, Producer`, never from core's modules: those are free to change.

- The broker and its results: Broker, BrokerConfig, SendResult/SendStatus, PullResult/PullStatus, Route,
  MessageQueue, topics (TopicConfig, MessageType, Perm, validate_topic) and StateTable (a compacted table kept in
  a topic). Send hooks (SendHook) name light queues; stored listeners (StoredListener) hear of stored messages.
- Messages: Message (to send), StoredMessage (read back), LIGHT_QUEUE_PREFIX and the limits; a producer's
  UniqueIdGenerator for the UNIQ_KEY property (PROPERTY_UNIQ_KEY), and COMPRESS_OVER, the body size it compresses.
- Scheduled work: the broker's Clock (SystemClock; ManualClock for tests), the system topics and properties of
  delay levels, timers, retries and dead letters (core/system_topics.py), and send_back (a failed message to its
  group's retry or dead-letter topic; ensure_retry_topic and ensure_dlq_topic create those topics). A delay-level or
  timer message not yet due is recalled with `Broker.recall_message(topic, SendResult.recall_handle)`; a refused
  recall is a RecallError (its RecallProblem).
- Administration: `Broker.admin` (BrokerAdmin, as mqadmin: topic status QueueStatus, topic updates and deletes,
  groups (SubscriptionGroupConfig), consumer progress QueueProgress, live members ConsumerMember, offsets reset by
  time; ConsumersOnlineError while live push consumers or in-process readers would undo a change; topic_kind).
  A reader of the process that reads a group for a while joins it (`Broker.join_group`, `leave_group`, with its
  ConsumeType; `PullConsumer.join`), so that its group shows it as a live member. A door whose clients heartbeat
  (the remoting port) registers them with `Broker.consumer_heartbeat` and their Subscriptions; orderly consumers
  lock queues through `Broker.queue_locks` (QueueLocks); `Broker.add_topic_listener` hears of topic changes.
- Admin look-ups: `Broker.queries` (MessageQueries: by offset message id or commit-log offset, unique id, key and
  time range; a message's consumption state per group, MessageTrack/ConsumeState) and `Broker.dead_letters`
  (DeadLetters: a group's dead letters listed a page at a time, DeadLetterPage/DeadLetter, and resent,
  ResendSummary/ResendOutcome/ResendStatus).
- The client API with RocketMQ's names: Producer (send timeouts and retries), TransactionProducer, PushConsumer,
  PullConsumer, SimpleConsumer and their options; `allocate` (AllocateStrategy), how a group's members share
  queues, as RocketMQ's clients compute it; LocalOffsetFile (local_offset_path), a broadcasting consumer's offsets
  on its own disk.
- Pop consumption for front doors that serve pop consumers themselves (the gRPC endpoint): PopService (pop, ack,
  change of invisible time, dead-lettering by receipt handle), PoppedMessage and its limits (MAX_POP_BATCH,
  MAX_INVISIBLE_MS, MAX_POP_LONG_POLL_MS); build_filter and MessageFilter compile a subscription's expression.
- Consumer groups' retry policy (GroupRetryPolicy, RetryPolicyType: subscriptionGroup.json's groupRetryPolicy).
- Transactions for front doors that end them or answer check-backs themselves (the gRPC endpoint):
  LocalTransactionState, TransactionCheck and TransactionChecker, used through `broker.transactions`
  (core.transactions.service: `end`, `register_checker`); `transaction_answer` and `in_worker_thread`, how a
  producer takes its local transaction's and checker's answers (the remote client's TransactionProducer too).
- What went through the broker (`Broker.traffic`, TopicTraffic/TopicCounts: messages and bytes in and out per
  topic, store refusals by reason); a front door that delivers from light queues itself counts there.
- Errors: one hierarchy rooted at CoreError (core/errors.py), store errors included.
- For the wiring only: MessageStore, StoreConfig, FlushMode, RecoveryReport and open_store, to open the store the
  broker runs on.

One send through the core, as an MQTT PUBLISH or a PutEvents event crosses it: broker.py (`send`, or
`send_batch` with batch_send.py) -> send_hooks.py (the doors' hooks name light queues) -> store/ (message_id.py,
then log/: see core/store/__init__.py) -> results.py and traffic.py (the answer, the counts) -> stored_listeners.py
(doors hear of it) -> the store's dispatcher builds the consume queues -> long_poll.py wakes the readers and calls
the arrival listeners. A read comes back through broker.py (`pull`, `queue_entries`) and store/queues/.

core/store knows nothing above it and this package imports the broker: a core/store module never imports from
`core` (the package) or any module of core outside core/store.
"""

from core.allocate import AllocateStrategy, allocate
from core.broker import (
    MAX_BATCH_BYTES,
    Broker,
    BrokerConfig,
    PullResult,
    Route,
    SendHook,
    SendResult,
    SendStatus,
    StoredListener,
    open_store,
)
from core.broker_admin import BrokerAdmin, ConsumerMember, QueueProgress, QueueStatus, topic_kind
from core.client import (
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    LocalTransactionState,
    MessageModel,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
    PushConsumerOptions,
    SimpleConsumer,
    TransactionProducer,
    TransactionSendResult,
    build_message,
)
from core.client.local_offset_file import LocalOffsetFile, local_offset_path
from core.client.receive_rules import (
    DEFAULT_AWAIT_DURATION_S,
    MIN_RECEIVE_INVISIBLE_S,
    Subscriptions,
    check_await_duration,
    check_change_invisible,
    check_receive,
    subscription_items,
)
from core.client.send_retry import DEFAULT_RETRY_TIMES, DEFAULT_SEND_TIMEOUT_MS, SendRetryPolicy
from core.clock import Clock, ManualClock, SystemClock
from core.compression import COMPRESS_OVER
from core.consume_state import ConsumeState, MessageTrack
from core.consumer_registry import ConsumeType, Subscription
from core.errors import (
    BrokerError,
    ConfigFileError,
    ConsumersOnlineError,
    CoreError,
    GroupConfigError,
    GroupNotFoundError,
    HAPortUnavailableError,
    IllegalArgumentError,
    IllegalMessageError,
    InvalidOffsetError,
    MessageNotFoundError,
    NoPermissionError,
    PayloadTooLargeError,
    RecallError,
    RecallProblem,
    RequestTimeoutError,
    ServiceNotAvailableError,
    StorageError,
    TopicConfigError,
    TopicNotFoundError,
)
from core.filter import (
    ExpressionType,
    FilterCache,
    FilterExpressionError,
    MessageFilter,
    UnsupportedExpressionTypeError,
    build_filter,
)
from core.message_queries import DEFAULT_QUERY_COUNT, MAX_QUERY_COUNT, MessageQueries, parse_offset_msg_id
from core.message_queue import MessageQueue
from core.pop.errors import PopError, PopRequestError, ReceiptHandleError, ReceiptHandleProblem
from core.pop.request import MAX_INVISIBLE_MS, MAX_POP_BATCH, MAX_POP_LONG_POLL_MS, PoppedMessage
from core.pop.service import PopService
from core.replication.master_copy import MasterCopy, parse_delay_offsets, parse_offset_table
from core.replication.role import Replication
from core.results import PullStatus
from core.retries.dead_letters import (
    DeadLetter,
    DeadLetterPage,
    DeadLetters,
    ResendOutcome,
    ResendStatus,
    ResendSummary,
)
from core.retries.retry_policy import GroupRetryPolicy, RetryPolicyType
from core.retries.send_back import ensure_dlq_topic, ensure_retry_topic, send_back
from core.store.config import BrokerRole, FlushMode, StoreConfig
from core.store.ha.config import HAConfig
from core.store.message import (
    INTERNAL_PROPERTIES,
    LIGHT_QUEUE_PREFIX,
    MAX_PROPERTIES_LENGTH,
    PROPERTY_UNIQ_KEY,
    Message,
    StoredMessage,
)
from core.store.message_id import UniqueIdGenerator
from core.store.message_store import END_OF_TIME_MS, MessageStore, RecoveryReport
from core.store.topic_name import MAX_TOPIC_LENGTH
from core.stored_listeners import PROPERTY_WAIT
from core.system_topics import (
    DLQ_PREFIX,
    PROPERTY_DELAY_LEVEL,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    dlq_topic,
    retry_topic,
)
from core.tables.state_table import StateTable
from core.tables.subscription_group import SubscriptionGroupConfig
from core.tables.topic_config import MessageType, Perm, TopicConfig, validate_topic
from core.traffic import TopicCounts, TopicTraffic
from core.transactions.checkers import TransactionCheck, TransactionChecker, in_worker_thread, transaction_answer

__all__ = [
    "COMPRESS_OVER",
    "DEFAULT_AWAIT_DURATION_S",
    "DEFAULT_QUERY_COUNT",
    "DEFAULT_RETRY_TIMES",
    "DEFAULT_SEND_TIMEOUT_MS",
    "DLQ_PREFIX",
    "END_OF_TIME_MS",
    "INTERNAL_PROPERTIES",
    "LIGHT_QUEUE_PREFIX",
    "MAX_BATCH_BYTES",
    "MAX_INVISIBLE_MS",
    "MAX_POP_BATCH",
    "MAX_POP_LONG_POLL_MS",
    "MAX_PROPERTIES_LENGTH",
    "MAX_QUERY_COUNT",
    "MAX_TOPIC_LENGTH",
    "MIN_RECEIVE_INVISIBLE_S",
    "PROPERTY_DELAY_LEVEL",
    "PROPERTY_RETRY_TOPIC",
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELIVER_MS",
    "PROPERTY_UNIQ_KEY",
    "PROPERTY_WAIT",
    "RETRY_PREFIX",
    "SCHEDULE_TOPIC",
    "TIMER_TOPIC",
    "AllocateStrategy",
    "Broker",
    "BrokerAdmin",
    "BrokerConfig",
    "BrokerError",
    "BrokerRole",
    "Clock",
    "ConfigFileError",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumeState",
    "ConsumeStatus",
    "ConsumeType",
    "ConsumerMember",
    "ConsumersOnlineError",
    "CoreError",
    "DeadLetter",
    "DeadLetterPage",
    "DeadLetters",
    "ExpressionType",
    "FilterCache",
    "FilterExpressionError",
    "FlushMode",
    "GroupConfigError",
    "GroupNotFoundError",
    "GroupRetryPolicy",
    "HAConfig",
    "HAPortUnavailableError",
    "IllegalArgumentError",
    "IllegalMessageError",
    "InvalidOffsetError",
    "LocalOffsetFile",
    "LocalTransactionState",
    "ManualClock",
    "MasterCopy",
    "Message",
    "MessageFilter",
    "MessageModel",
    "MessageNotFoundError",
    "MessageQueries",
    "MessageQueue",
    "MessageStore",
    "MessageTrack",
    "MessageType",
    "MessageView",
    "NoPermissionError",
    "PayloadTooLargeError",
    "Perm",
    "PopError",
    "PopRequestError",
    "PopService",
    "PoppedMessage",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "PushConsumerOptions",
    "QueueProgress",
    "QueueStatus",
    "RecallError",
    "RecallProblem",
    "ReceiptHandleError",
    "ReceiptHandleProblem",
    "RecoveryReport",
    "Replication",
    "RequestTimeoutError",
    "ResendOutcome",
    "ResendStatus",
    "ResendSummary",
    "RetryPolicyType",
    "Route",
    "SendHook",
    "SendResult",
    "SendRetryPolicy",
    "SendStatus",
    "ServiceNotAvailableError",
    "SimpleConsumer",
    "StateTable",
    "StorageError",
    "StoreConfig",
    "StoredListener",
    "StoredMessage",
    "Subscription",
    "SubscriptionGroupConfig",
    "Subscriptions",
    "SystemClock",
    "TopicConfig",
    "TopicConfigError",
    "TopicCounts",
    "TopicNotFoundError",
    "TopicTraffic",
    "TransactionCheck",
    "TransactionChecker",
    "TransactionProducer",
    "TransactionSendResult",
    "UniqueIdGenerator",
    "UnsupportedExpressionTypeError",
    "allocate",
    "build_filter",
    "build_message",
    "check_await_duration",
    "check_change_invisible",
    "check_receive",
    "dlq_topic",
    "ensure_dlq_topic",
    "ensure_retry_topic",
    "in_worker_thread",
    "local_offset_path",
    "open_store",
    "parse_delay_offsets",
    "parse_offset_msg_id",
    "parse_offset_table",
    "retry_topic",
    "send_back",
    "subscription_items",
    "topic_kind",
    "transaction_answer",
    "validate_topic",
]
