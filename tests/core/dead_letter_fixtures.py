"""Retry and dead-letter copies made as the retry code will make them (the contract in core.system_topics): the
original's body, UNIQ_KEY, KEYS, TAGS and user properties kept, RETRY_TOPIC and ORIGIN_MESSAGE_ID added, the
reconsume count set, DLQ_ORIGIN_REASON on a dead letter. Sent through the broker like any message."""

from core import Broker, Message, SendResult, StoredMessage
from core.system_topics import (
    PROPERTY_DELAY_LEVEL,
    PROPERTY_DLQ_REASON,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    dlq_topic,
    retry_topic,
)


def record_of(broker: Broker, result: SendResult) -> StoredMessage:
    """The record a send stored, as stored (a compressed body stays compressed)."""
    return broker.store.read_message(result.commit_log_offset)


def _copy(original: StoredMessage, topic: str, reconsume_times: int, **extra: str) -> Message:
    properties = dict(original.public_properties)
    properties.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, original.offset_msg_id)
    properties.update(extra)
    return Message(
        topic=topic,
        body=original.body,
        queue_id=0,
        properties=properties,
        sys_flag=original.sys_flag,
        born_timestamp=original.born_timestamp,
        reconsume_times=reconsume_times,
    )


def ensure_copy_topics(broker: Broker, group: str) -> None:
    for topic in (retry_topic(group), dlq_topic(group)):
        if not broker.has_topic(topic):
            broker.create_topic(topic, queue_nums=1)


async def send_retry(
    broker: Broker, group: str, original: StoredMessage, times: int = 1, delay_level: int | None = None
) -> SendResult:
    ensure_copy_topics(broker, group)
    extra = {PROPERTY_DELAY_LEVEL: str(delay_level)} if delay_level else {}
    return await broker.send(_copy(original, retry_topic(group), times, **extra))


async def send_dead_letter(
    broker: Broker, group: str, original: StoredMessage, reason: str = "listener kept failing", times: int = 16
) -> SendResult:
    ensure_copy_topics(broker, group)
    return await broker.send(_copy(original, dlq_topic(group), times, **{PROPERTY_DLQ_REASON: reason}))
