"""Topic configurations and the table that keeps them in `topics.json` (RocketMQ's TopicConfig and
TopicConfigManager).

File layout, as RocketMQ's broker writes it (so a RocketMQ topics.json loads here):

    {
        "topicConfigTable": {
            "TopicTest": {
                "topicName": "TopicTest", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false,
                "attributes": {"message.type": "NORMAL"}
            }
        },
        "dataVersion": {"timestamp": 1700000000000, "counter": 3}
    }
"""

from __future__ import annotations

import asyncio
import builtins
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.errors import TopicConfigError, TopicNotFoundError
from core.store.topic_name import MAX_TOPIC_LENGTH, validate_name
from core.tables.config_table import ConfigTable
from core.tables.json_file import DataVersion

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
TABLE_KEY = "topicConfigTable"
# A queue is a directory of consume-queue files and a slot in every route; RocketMQ sets no ceiling, but beyond
# a thousand queues per topic the per-queue files and rebalance lists cost more than the parallelism gives.
MAX_QUEUE_NUMS = 1024
DEFAULT_QUEUE_NUMS = 4
MESSAGE_TYPE_ATTRIBUTE = "message.type"


def validate_topic(topic: str) -> str:
    """Return `topic` if it is a legal topic name, 1 to MAX_TOPIC_LENGTH (127) characters from [%|a-zA-Z0-9_-],
    else raise TopicConfigError saying what is wrong."""
    return validate_name("topic", topic, MAX_TOPIC_LENGTH, TopicConfigError)


class Perm(enum.IntFlag):
    """RocketMQ's PermName bits."""

    INHERIT = 1
    WRITE = 2
    READ = 4
    PERM_PRIORITY = 8


# RocketMQ's PermName.isValid: the priority bit is not accepted in a topic's permissions.
_VALID_PERM = Perm.READ | Perm.WRITE | Perm.INHERIT


class MessageType(enum.Enum):
    """What a topic accepts (RocketMQ 5 TopicMessageType, the `message.type` attribute)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    # Any of the four: RocketMQ 5's MIXED, for a topic that predates message types or takes several kinds.
    MIXED = "MIXED"


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


def _member(data: Mapping[str, object], key: str, default: object) -> Any:
    # Typed Any on purpose: the constructor checks every value and names the member that is wrong.
    return data.get(key, default)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(slots=True, frozen=True)
class TopicConfig:
    """One topic. `attributes` holds (key, value) pairs sorted by key, without `message.type`, which is
    `message_type`; build it from a dict with `tuple(d.items())`."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: Perm = Perm.READ | Perm.WRITE
    message_type: MessageType = MessageType.NORMAL
    order: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0

    def __post_init__(self) -> None:
        validate_topic(self.topic_name)
        where = f"topic {self.topic_name!r}"
        for name, value in (("readQueueNums", self.read_queue_nums), ("writeQueueNums", self.write_queue_nums)):
            if not _is_int(value) or not 1 <= value <= MAX_QUEUE_NUMS:
                raise TopicConfigError(f"{where}: {name} is {value!r}; use an integer from 1 to {MAX_QUEUE_NUMS}")
        if not _is_int(self.perm) or not 0 <= self.perm <= _VALID_PERM:
            raise TopicConfigError(
                f"{where}: perm {self.perm!r} is not valid; use a sum of READ=4, WRITE=2 and INHERIT=1 (6 = read/write)"
            )
        object.__setattr__(self, "perm", Perm(self.perm))
        if not isinstance(self.message_type, MessageType):
            raise TopicConfigError(f"{where}: message_type {self.message_type!r} is not a MessageType")
        if not isinstance(self.topic_filter_type, TopicFilterType):
            raise TopicConfigError(f"{where}: topic_filter_type {self.topic_filter_type!r} is not a TopicFilterType")
        if not isinstance(self.order, bool):
            raise TopicConfigError(f"{where}: order is {self.order!r}; use true or false")
        if not _is_int(self.topic_sys_flag) or self.topic_sys_flag < 0:
            raise TopicConfigError(f"{where}: topicSysFlag is {self.topic_sys_flag!r}; use a non-negative integer")
        object.__setattr__(self, "attributes", _normalize_attributes(where, self.attributes))

    @property
    def attribute_map(self) -> dict[str, str]:
        return dict(self.attributes)

    def to_json(self) -> dict[str, object]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": int(self.perm),
            "topicFilterType": self.topic_filter_type.value,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
            "attributes": {**dict(self.attributes), MESSAGE_TYPE_ATTRIBUTE: self.message_type.value},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> TopicConfig:
        """Decode one entry of topicConfigTable; a missing member takes its default. Raises TopicConfigError."""
        name = data.get("topicName")
        if not isinstance(name, str):
            raise TopicConfigError(f"topicName is {name!r}; every topic entry needs its name as a string")
        where = f"topic {name!r}"
        attributes = data.get("attributes", {})
        if not isinstance(attributes, dict):
            raise TopicConfigError(f"{where}: attributes must be an object, found {attributes!r}")
        attributes = dict(attributes)
        message_type_name = attributes.pop(MESSAGE_TYPE_ATTRIBUTE, MessageType.NORMAL.value)
        try:
            message_type = MessageType(message_type_name)
        except ValueError:
            allowed = ", ".join(m.value for m in MessageType)
            raise TopicConfigError(
                f"{where}: {MESSAGE_TYPE_ATTRIBUTE} is {message_type_name!r}; use one of {allowed}"
            ) from None
        filter_name = data.get("topicFilterType", TopicFilterType.SINGLE_TAG.value)
        try:
            filter_type = TopicFilterType(filter_name)
        except ValueError:
            raise TopicConfigError(
                f"{where}: topicFilterType is {filter_name!r}; use SINGLE_TAG or MULTI_TAG"
            ) from None
        return cls(
            topic_name=name,
            read_queue_nums=_member(data, "readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=_member(data, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=_member(data, "perm", int(Perm.READ | Perm.WRITE)),
            message_type=message_type,
            order=_member(data, "order", False),
            attributes=tuple(attributes.items()),
            topic_filter_type=filter_type,
            topic_sys_flag=_member(data, "topicSysFlag", 0),
        )


def _normalize_attributes(where: str, attributes: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(attributes, tuple):
        raise TopicConfigError(f"{where}: attributes must be a tuple of (key, value) pairs, found {attributes!r}")
    seen: dict[str, str] = {}
    for pair in attributes:
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            raise TopicConfigError(f"{where}: attribute {pair!r} is not a (key, value) pair of strings")
        key, value = pair
        if key == MESSAGE_TYPE_ATTRIBUTE:
            raise TopicConfigError(f"{where}: set the message type with message_type, not as the attribute {key!r}")
        if key in seen:
            raise TopicConfigError(f"{where}: attribute {key!r} is given twice")
        seen[key] = value
    return tuple(sorted(seen.items()))


class TopicCreator(Protocol):
    """Who creates topics with the broker's defaults (core.broker.Broker is one): the broker's services create the
    topics of their own (parking, retry and dead-letter topics) through it."""

    def has_topic(self, topic: str) -> bool: ...

    def create_topic(
        self,
        topic: str,
        queue_nums: int | None = None,
        message_type: MessageType = MessageType.NORMAL,
        perm: Perm = Perm.READ | Perm.WRITE,
    ) -> TopicConfig: ...


class TopicConfigManager:
    """The broker's topics, kept in `config_dir/topics.json` (core.tables.config_table: lock-free reads, writes
    first)."""

    def __init__(self, config_dir: Path, auto_create: bool, default_queue_nums: int = DEFAULT_QUEUE_NUMS) -> None:
        if not _is_int(default_queue_nums) or not 1 <= default_queue_nums <= MAX_QUEUE_NUMS:
            raise TopicConfigError(
                f"default_queue_nums is {default_queue_nums!r}; use an integer from 1 to {MAX_QUEUE_NUMS}"
            )
        self.path = Path(config_dir) / TOPICS_FILE
        self.auto_create = auto_create
        self.default_queue_nums = default_queue_nums
        self._table: ConfigTable[TopicConfig] = ConfigTable(
            self.path,
            TABLE_KEY,
            "topicName",
            lambda config: config.topic_name,
            TopicConfig.from_json,
            TopicConfigError,
        )
        log.info(
            "loaded %d topics from %s (data version %d)", len(self._table), self.path, self._table.data_version.counter
        )

    @property
    def data_version(self) -> DataVersion:
        return self._table.data_version

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each change of the topics
        (core.tables.config_table.ConfigTable.add_change_listener)."""
        self._table.add_change_listener(listener)

    def get(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def list(self) -> builtins.list[TopicConfig]:
        """Every topic, sorted by name."""
        return self._table.list()

    def create_or_update(self, config: TopicConfig) -> None:
        """Store `config`, replacing the topic's current configuration; a config equal to the current one
        changes nothing (no write, same data version)."""
        if self._table.put(config):
            log.info(
                "topic %r created or updated: %d read and %d write queues, perm %d, %s%s",
                config.topic_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                config.message_type.value,
                ", ordered" if config.order else "",
            )

    def delete(self, topic: str) -> bool:
        """Remove `topic`; False when it did not exist. The topic's messages and offsets are not touched here."""
        deleted = self._table.delete(topic)
        if deleted:
            log.info("topic %r deleted", topic)
        return deleted

    def get_or_auto_create(self, topic: str) -> TopicConfig:
        """The topic's configuration; a missing topic is created with `default_queue_nums` queues when
        auto-creation is on, exactly once however many threads ask at the same moment."""
        config = self._table.get(topic)
        if config is not None:
            return config
        if not self.auto_create:
            raise TopicNotFoundError(
                f"topic {topic!r} does not exist and autoCreateTopicEnable is off; create it with the admin API "
                "(updateTopic / TopicConfigManager.create_or_update) or turn autoCreateTopicEnable on",
                topic,
            )
        # Built outside the lock: an illegal name fails here without making others wait.
        config, created = self._table.add_if_absent(
            TopicConfig(topic, self.default_queue_nums, self.default_queue_nums)
        )
        if created:
            log.info("topic %r auto-created with %d queues", topic, self.default_queue_nums)
        return config

    async def get_or_auto_create_async(self, topic: str) -> TopicConfig:
        """get_or_auto_create for the event loop: a creation (lock wait and fsync) runs in a worker thread."""
        config = self._table.get(topic)
        if config is not None:
            return config
        return await asyncio.to_thread(self.get_or_auto_create, topic)
