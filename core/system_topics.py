"""The broker's own topics and the properties that route messages through them, with RocketMQ's names
(TopicValidator, MixAll, MessageConst), so a message means the same here as in RocketMQ.

- Delay levels park a message in SCHEDULE_TOPIC, one queue per level (core.scheduling.delay_levels).
- Timer messages park in TIMER_TOPIC (core.scheduling.timers).
- A consumer group's failed messages go to RETRY_PREFIX + group, then to DLQ_PREFIX + group (core.retries.send_back).
- Transactional half messages wait in TRANS_HALF_TOPIC; op records in TRANS_OP_HALF_TOPIC say how each ended;
  those never decided go to TRANS_CHECK_MAX_TIME_TOPIC (core.transactions.service).

A parked message keeps its real topic and queue in REAL_TOPIC and REAL_QID. When it is moved back, the copy names
the record it came from in MOVED_FROM (mqgate's own property): after a crash, a service that cannot tell whether
it had moved a message looks for that copy (core.moves) instead of moving it twice.
"""

from __future__ import annotations

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
# The group whose committed offsets are the transaction check's progress (RocketMQ's CID_SYS_RMQ_TRANS).
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"

SYSTEM_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC}
)

# Delay levels (1 = the first level of BrokerConfig.message_delay_level; 0 = none).
PROPERTY_DELAY_LEVEL = "DELAY"
# Timer messages: an absolute time (ms since the epoch) or a delay from now.
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
# Set on a timer message when it fires (ms); how many times it was rolled over a long horizon.
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
# Where a parked message really goes.
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
# Retries: the topic a retried message was first consumed from, the id of the original record, and the most
# times the group consumes it again before it goes to the dead-letter topic.
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
# The last reason a message was sent back (mqgate's own, for people reading a dead letter).
PROPERTY_DLQ_REASON = "DLQ_ORIGIN_REASON"
# Transactions: a half message, its producer group, the client's transaction id, how often it was checked.
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
# mqgate's own: the commit-log offset of the record a moved copy was made from.
PROPERTY_MOVED_FROM = "__MOVED_FROM"

# A message carrying any of these is not stored as it is: it is parked first (or refused).
PARKING_PROPERTIES = frozenset({PROPERTY_DELAY_LEVEL, *TIMER_PROPERTIES, PROPERTY_TRANSACTION_PREPARED})


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_PREFIX)


def is_system_topic(topic: str) -> bool:
    """The broker's own topics, which consumers never subscribe to by name (retry topics are subscribed for them)."""
    return topic in SYSTEM_TOPICS
