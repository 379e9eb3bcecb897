"""What an operator asks of a broker, as RocketMQ's mqadmin asks it (topicList, topicStatus, updateTopic,
deleteTopic, updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection, resetOffsetByTime): used as
`broker.admin`, by the admin HTTP API of `mqgate serve` and nothing on the message path.

Consumer progress follows RocketMQ's consumerProgress: per queue the broker offset (the queue's max offset), the
group's committed offset, the lag between them (the "diff" of mqadmin and rocketmq-exporter's
rocketmq_group_diff) and the store time of the last message the group consumed (the one before its offset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.consume_state import GroupProgress
from core.errors import (
    ConsumersOnlineError,
    GroupNotFoundError,
    IllegalArgumentError,
    TopicConfigError,
)
from core.store.message import LIGHT_QUEUE_PREFIX
from core.store.message_store import GetStatus, MessageStore
from core.system_topics import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_TOPICS, retry_topic
from core.tables.consumer_offsets import ConsumerOffsetManager
from core.tables.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager, validate_group
from core.tables.topic_config import MessageType, Perm, TopicConfig, TopicConfigManager, validate_topic


@dataclass(slots=True, frozen=True)
class QueueStatus:
    """One queue of a topic (mqadmin topicStatus): its offsets and the store time of its newest message."""

    queue_id: int
    min_offset: int
    max_offset: int
    last_update_ms: int | None  # None: the queue holds no message


@dataclass(slots=True, frozen=True)
class QueueProgress:
    """One queue a group consumes (mqadmin consumerProgress)."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int  # -1: the group never committed one here
    lag: int
    last_consume_ms: int | None  # store time of the last message consumed; None before the first


@dataclass(slots=True, frozen=True)
class ConsumerMember:
    """A live member of a consumer group (mqadmin consumerConnection): a heartbeating push consumer, a reader of
    this process (consume_type PULL: a connector's sink task, an EventBridge target, an MQTT session) or a
    pop client of the gRPC endpoint (POP)."""

    group: str
    client_id: str
    message_model: str
    topics: tuple[str, ...]
    seconds_since_heartbeat: float | None  # None: a member that does not heartbeat (it leaves when it stops)
    consume_type: str = "PUSH"


def topic_kind(topic: str) -> str:
    """ "retry", "dlq", "light" (a light queue), "system" (the broker's own topics) or "normal"."""
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if topic.startswith(LIGHT_QUEUE_PREFIX):
        return "light"
    if topic in SYSTEM_TOPICS:
        return "system"
    return "normal"


class AdminBroker(GroupProgress, Protocol):
    """The broker as its operator's commands see it (core.broker.Broker is one): its tables, store and queues."""

    @property
    def store(self) -> MessageStore: ...

    @property
    def topics(self) -> TopicConfigManager: ...

    @property
    def groups(self) -> SubscriptionGroupManager: ...

    @property
    def offsets(self) -> ConsumerOffsetManager: ...

    def topic_config(self, topic: str) -> TopicConfig: ...

    def has_topic(self, topic: str) -> bool: ...

    def delete_topic(self, topic: str) -> bool: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def reset_offsets_to_time(self, group: str, topic: str, timestamp_ms: int) -> dict[int, int]: ...


class BrokerAdmin:
    def __init__(self, broker: AdminBroker) -> None:
        self._broker = broker

    # --- topics ------------------------------------------------------------------------------------------

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Every read queue of `topic`; TopicNotFoundError when it does not exist."""
        broker = self._broker
        config = broker.topic_config(topic)
        return [self._queue_status(topic, queue_id) for queue_id in range(config.read_queue_nums)]

    def _queue_status(self, topic: str, queue_id: int) -> QueueStatus:
        broker = self._broker
        low, high = broker.min_offset(topic, queue_id), broker.max_offset(topic, queue_id)
        return QueueStatus(queue_id, low, high, self._store_time(topic, queue_id, high - 1) if high > low else None)

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        if offset < 0:
            return None
        got = self._broker.store.get_messages(topic, queue_id, offset, 1)
        if got.status is not GetStatus.FOUND or not got.messages:
            return None
        return got.messages[0].store_timestamp

    def create_topic(
        self,
        topic: str,
        read_queue_nums: int,
        write_queue_nums: int,
        perm: Perm,
        order: bool = False,
        message_type: MessageType | None = None,
    ) -> TopicConfig:
        """Create a topic with its own read and write queue counts and message type (NORMAL unless given: mqadmin
        updateTopic on a new topic, `-a +message.type=FIFO`), or change it if it exists (then `order` stays as it
        was, and so does its message type unless one is given). TopicConfigError for values out of range."""
        if self._broker.has_topic(topic):
            return self.update_topic(topic, read_queue_nums, write_queue_nums, perm, message_type)
        self._check_not_internal(topic, "create")
        config = TopicConfig(
            topic, read_queue_nums, write_queue_nums, perm, message_type=message_type or MessageType.NORMAL, order=order
        )
        self._broker.topics.create_or_update(config)
        return config

    def update_topic(
        self,
        topic: str,
        read_queue_nums: int | None = None,
        write_queue_nums: int | None = None,
        perm: Perm | None = None,
        message_type: MessageType | None = None,
    ) -> TopicConfig:
        """Change an existing topic's queue counts or permissions (mqadmin updateTopic on a topic that exists); what
        is not given stays. Fewer read queues hide the messages of the queues left out until they come back, as in
        RocketMQ. TopicNotFoundError, or TopicConfigError for values out of range."""
        current = self._broker.topic_config(topic)
        self._check_not_internal(topic, "update")
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=current.read_queue_nums if read_queue_nums is None else read_queue_nums,
            write_queue_nums=current.write_queue_nums if write_queue_nums is None else write_queue_nums,
            perm=current.perm if perm is None else perm,
            message_type=current.message_type if message_type is None else message_type,
            order=current.order,
            attributes=current.attributes,
            topic_filter_type=current.topic_filter_type,
            topic_sys_flag=current.topic_sys_flag,
        )
        self._broker.topics.create_or_update(config)
        return config

    def delete_topic(self, topic: str) -> None:
        """Delete a topic, its queues and every group's offsets in it (mqadmin deleteTopic); its records stay in the
        log until retention removes them. TopicNotFoundError when it does not exist; the broker's own topics are
        refused."""
        self._broker.topic_config(topic)
        self._check_not_internal(topic, "delete")
        self._broker.delete_topic(topic)
        self._broker.offsets.delete_topic(topic)

    @staticmethod
    def _check_not_internal(topic: str, action: str) -> None:
        if topic_kind(topic) == "system":
            raise TopicConfigError(f"topic {topic!r} is one of the broker's own topics; it cannot be {action}d")

    # --- groups ------------------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Every group the broker knows: configured, with committed offsets, or with live members; sorted."""
        broker = self._broker
        names = {config.group_name for config in broker.groups.list()}
        names.update(broker.offsets.groups())
        names.update(broker.consumers.groups())
        return sorted(names)

    def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self._broker.groups.get(group)

    def create_group(
        self, group: str, retry_max_times: int | None = None, consume_enable: bool | None = None
    ) -> SubscriptionGroupConfig:
        """Create a group or update the given settings of one (mqadmin updateSubGroup). GroupConfigError."""
        current = self._broker.groups.get(group) or SubscriptionGroupConfig(validate_group(group))
        config = SubscriptionGroupConfig(
            group_name=group,
            consume_enable=current.consume_enable if consume_enable is None else consume_enable,
            consume_from_min_enable=current.consume_from_min_enable,
            consume_broadcast_enable=current.consume_broadcast_enable,
            retry_queue_nums=current.retry_queue_nums,
            retry_max_times=current.retry_max_times if retry_max_times is None else retry_max_times,
            consume_message_orderly=current.consume_message_orderly,
            retry_policy=current.retry_policy,
        )
        self._broker.groups.create_or_update(config)
        return config

    def delete_group(self, group: str) -> None:
        """Delete a group's configuration and its committed offsets (mqadmin deleteSubGroup with removeOffset).
        GroupNotFoundError when the broker knows nothing of it; ConsumersOnlineError while members are live."""
        self._check_known(group)
        self._check_offline(group, "deleted")
        self._broker.groups.delete(group)
        self._broker.offsets.delete_group(group)

    def topics_of(self, group: str) -> list[str]:
        """The topics and light queues a group has committed offsets in or subscribes to, sorted."""
        broker = self._broker
        topics = set(broker.offsets.topics_of(group))
        for member in broker.consumers.members(group):
            topics.update(member.subscriptions)
        if broker.has_topic(retry_topic(group)):
            topics.add(retry_topic(group))
        return sorted(topics)

    def groups_of(self, topic: str) -> list[str]:
        """The groups that consume `topic` (offsets or live subscriptions), sorted."""
        return [group for group in self.groups() if topic in self.topics_of(group)]

    def consumer_progress(self, group: str, last_consume: bool = True) -> list[QueueProgress]:
        """Per queue of every topic the group consumes: broker offset, committed offset, lag and last consume time
        (with `last_consume` False, None: finding it reads a record per queue, which a list of every group's lag
        does not need). GroupNotFoundError when the broker knows nothing of the group."""
        self._check_known(group)
        broker = self._broker
        progress = []
        for topic in self.topics_of(group):
            if topic.startswith(LIGHT_QUEUE_PREFIX):
                queue_ids = range(1)
            else:
                config = broker.topics.get(topic)
                if config is None:
                    continue
                queue_ids = range(config.read_queue_nums)
            for queue_id in queue_ids:
                high = broker.max_offset(topic, queue_id)
                committed = broker.query_offset(group, topic, queue_id)
                # No offset yet: everything still in the queue is ahead of the group.
                lag = max(0, high - (committed if committed >= 0 else broker.min_offset(topic, queue_id)))
                last = self._store_time(topic, queue_id, committed - 1) if last_consume and committed > 0 else None
                progress.append(QueueProgress(topic, queue_id, high, committed, lag, last))
        return progress

    def members(self, group: str | None = None) -> list[ConsumerMember]:
        """The live members of `group`, or of every group."""
        registry = self._broker.consumers
        now = registry.clock()
        return [
            ConsumerMember(
                name,
                member.client_id,
                member.message_model,
                tuple(sorted(member.subscriptions)),
                max(0.0, now - member.last_heartbeat) if member.heartbeats else None,
                member.consume_type.value,
            )
            for name in ([group] if group is not None else registry.groups())
            for member in registry.members(name)
        ]

    def reset_offsets_by_time(self, group: str, topic: str, timestamp_ms: int) -> dict[int, int]:
        """Move the group's offsets on every queue of `topic` to the first message stored at or after
        `timestamp_ms` (ms since the epoch; 0: the oldest kept, a time in the future: the end), as mqadmin
        resetOffsetByTime. Pop consumers (the gRPC endpoint's) follow at once. ConsumersOnlineError while members
        that hold their positions in memory are live (push consumers, and the readers of this process: connector
        sink tasks, EventBridge targets, MQTT sessions): they would commit theirs over the reset."""
        validate_group(group)
        validate_topic(topic)
        if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool) or timestamp_ms < 0:
            raise IllegalArgumentError(f"reset of group {group!r}: time {timestamp_ms!r} must be ms since the epoch")
        self._broker.topic_config(topic)
        self._check_offline(group, "reset")
        return self._broker.reset_offsets_to_time(group, topic, timestamp_ms)

    def _check_known(self, group: str) -> None:
        validate_group(group)
        broker = self._broker
        if (
            broker.groups.get(group) is None
            and not broker.offsets.topics_of(group)
            and not broker.consumers.members(group)
        ):
            raise GroupNotFoundError(f"consumer group {group!r} does not exist: no configuration, offsets or members")

    def _check_offline(self, group: str, what: str) -> None:
        members = [member for member in self._broker.consumers.members(group) if member.consume_type.holds_positions]
        if members:
            names = ", ".join(f"{member.client_id} ({member.consume_type.value})" for member in members)
            raise ConsumersOnlineError(
                f"consumer group {group!r} has {len(members)} live consumer(s) ({names}); stop them before its"
                f" offsets are {what}, or they commit their own over it"
            )
