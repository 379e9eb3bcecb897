"""The custom headers of the requests a broker serves, read from a command's extFields (RocketMQ's
CommandCustomHeader classes), and the reply headers it writes.

A field RocketMQ marks @CFNotNull that is missing, or a number that is not one, raises HeaderFieldError naming the
request code and the field (RocketMQ answers "the custom field <name> is null" the same way, as SYSTEM_ERROR).
Booleans are Java's Boolean.parseBoolean: "true" in any case is true, anything else false. A reply's fields are all
strings: the C++ client reads a reply's extFields only when they are JSON strings.

SEND_MESSAGE_V2 (and SEND_BATCH_MESSAGE from clients that send it so) names its fields a..n for brevity
(SendMessageRequestHeaderV2); both spellings are read.
"""

from __future__ import annotations

from dataclasses import dataclass

from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError

# PullSysFlag's bits.
PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8

# SendMessageRequestHeaderV2's letters, for SendMessageRequestHeader's names.
_V2_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}  # fmt: skip


class HeaderFieldError(RemotingRequestError):
    """A request header the broker cannot read: answered SYSTEM_ERROR with this message."""


class HeaderFields:
    """A request's extFields read as RocketMQ reads a custom header: required fields, numbers, Java booleans."""

    def __init__(self, command: RemotingCommand, names: dict[str, str] | None = None) -> None:
        ext = command.ext_fields
        if names is not None and any(letter in ext for letter in names):
            ext = {names.get(key, key): value for key, value in ext.items()}
        self._ext = ext
        self._code = command.code

    def text(self, name: str, default: str | None = None) -> str:
        value = self._ext.get(name)
        if value is None:
            if default is None:
                raise HeaderFieldError(f"request code {self._code}: the custom field {name} is null")
            return default
        return value

    def int(self, name: str, default: int | None = None) -> int:
        value = self._ext.get(name)
        if value is None or value == "":
            if default is None:
                raise HeaderFieldError(f"request code {self._code}: the custom field {name} is null")
            return default
        try:
            return int(value)
        except ValueError:
            raise HeaderFieldError(
                f"request code {self._code}: the custom field {name}, {value!r}, is not a number"
            ) from None

    def bool(self, name: str) -> bool:
        return self._ext.get(name, "").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class SendHeader:
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    unit_mode: bool
    max_reconsume_times: int | None
    batch: bool


def send_header(command: RemotingCommand) -> SendHeader:
    """SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)'s header."""
    fields = HeaderFields(command, _V2_NAMES)
    max_reconsume = fields.int("maxReconsumeTimes", -1)
    return SendHeader(
        producer_group=fields.text("producerGroup"),
        topic=fields.text("topic"),
        default_topic=fields.text("defaultTopic", "TBW102"),
        default_topic_queue_nums=fields.int("defaultTopicQueueNums", 4),
        queue_id=fields.int("queueId"),
        sys_flag=fields.int("sysFlag", 0),
        born_timestamp=fields.int("bornTimestamp", 0),
        flag=fields.int("flag", 0),
        properties=fields.text("properties", ""),
        reconsume_times=fields.int("reconsumeTimes", 0),
        unit_mode=fields.bool("unitMode"),
        max_reconsume_times=None if max_reconsume < 0 else max_reconsume,
        # The C++ client marks a batch "1" on SEND_MESSAGE, which Java's Boolean.parseBoolean reads as false.
        batch=fields.bool("batch") or fields.text("batch", "") == "1",
    )


@dataclass(frozen=True, slots=True)
class PullHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_ms: int
    subscription: str | None
    sub_version: int
    expression_type: str

    @property
    def commits_offset(self) -> bool:
        return bool(self.sys_flag & PULL_COMMIT_OFFSET)

    @property
    def suspends(self) -> bool:
        return bool(self.sys_flag & PULL_SUSPEND)


def pull_header(command: RemotingCommand) -> PullHeader:
    """PULL_MESSAGE (11)'s header."""
    fields = HeaderFields(command)
    return PullHeader(
        consumer_group=fields.text("consumerGroup"),
        topic=fields.text("topic"),
        queue_id=fields.int("queueId"),
        queue_offset=fields.int("queueOffset"),
        max_msg_nums=fields.int("maxMsgNums"),
        sys_flag=fields.int("sysFlag"),
        commit_offset=fields.int("commitOffset", 0),
        suspend_timeout_ms=fields.int("suspendTimeoutMillis", 0),
        subscription=command.ext_fields.get("subscription"),
        sub_version=fields.int("subVersion", 0),
        expression_type=fields.text("expressionType", "TAG"),
    )


def send_reply_fields(
    msg_id: str, queue_id: int, queue_offset: int, transaction_id: str | None = None
) -> dict[str, str]:
    """SendMessageResponseHeader, as strings."""
    fields = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(queue_offset)}
    if transaction_id is not None:
        fields["transactionId"] = transaction_id
    return fields


def pull_reply_fields(
    next_begin_offset: int, min_offset: int, max_offset: int, suggest_broker_id: int = 0
) -> dict[str, str]:
    """PullMessageResponseHeader, as strings."""
    return {
        "nextBeginOffset": str(next_begin_offset),
        "minOffset": str(min_offset),
        "maxOffset": str(max_offset),
        "suggestWhichBrokerId": str(suggest_broker_id),
    }
