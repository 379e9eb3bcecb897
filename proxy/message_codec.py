"""Messages between the protocol and the core: a `SendMessageRequest`'s messages become core Messages
(`to_core`), and a stored message handed out by a receive becomes the protocol's Message (`to_proto`). Pure code,
no I/O: tested byte for byte without a socket.

Sending, as RocketMQ's proxy builds a message (SendMessageActivity), with the same refusals:

- `system_properties.message_id` becomes UNIQ_KEY (required: ILLEGAL_MESSAGE_ID); `tag` TAGS; `keys` KEYS;
  `message_group` the FIFO group (__SHARDINGKEY); `delivery_timestamp` TIMER_DELIVER_MS (a timer message);
  `trace_context` TRACE_CONTEXT; `born_timestamp` and `born_host` the record's; `delivery_attempt` its reconsume
  times; `orphaned_transaction_recovery_duration` CHECK_IMMUNITY_TIME_IN_SECONDS; message type TRANSACTION the
  half-message flag, with the topic as producer group (the proxy's choice: gRPC producers name no group, and
  check-backs go to producers that publish to the topic). User properties are kept as given.
- Refused: an empty body (MESSAGE_BODY_EMPTY) or one over the limit (MESSAGE_BODY_TOO_LARGE); a tag that is blank,
  holds `|` or a control character (ILLEGAL_MESSAGE_TAG); a key that is blank, holds a control character or a space
  (ILLEGAL_MESSAGE_KEY; RocketMQ keeps keys space-separated in one property, so a key with a space would come back
  as two: stricter than RocketMQ, which stores it and splits it); a message group that is blank, holds a control
  character or takes 64 bytes or more (ILLEGAL_MESSAGE_GROUP); a user property named like a system property
  (SYSTEM_PROPERTY_NAMES) or holding a control character (ILLEGAL_MESSAGE_PROPERTY_KEY); more than 128 user
  properties or more than 16 KiB of them with tag and keys (MESSAGE_PROPERTIES_TOO_LARGE); a delivery time more
  than the broker's timer_max_delay_s ahead (ILLEGAL_DELIVERY_TIME); a declared message type its properties
  contradict, e.g. FIFO without a message group (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE); a namespace (BAD_REQUEST:
  mqgate has none yet); a body encoding other than IDENTITY or GZIP, or GZIP that does not decompress.
- A gzip body is stored decompressed (and compressed again by the core's own rule, over 4 KiB): every consumer,
  whatever its protocol, reads it as sent.

The Python client 5.1.2 puts milliseconds into the Timestamp's `seconds` field of `delivery_timestamp` (its
documentation says milliseconds; Producer.__send_req copies them into `.seconds`). A `seconds` beyond the
Timestamp's range (year 9999) cannot be a time in seconds, so it is read as milliseconds: both that client and
clients that fill the Timestamp correctly get the delivery time they meant.

Receiving, as the proxy's GrpcConverter: every property that is not a system property is a user property (MQTT
messages thus show MQTT_TOPIC, MQTT_USER, ... to a RocketMQ consumer); the body digest is MD5 in upper-case hex.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import ipaddress
import zlib
from collections.abc import Callable, Mapping

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from core import (
    DLQ_PREFIX,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    Message,
    StoredMessage,
    build_message,
)
from proxy.status_codes import RequestError
from proxy.stubs import Code, DigestType, Encoding, MessageType, definition_pb2

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_MESSAGE_GROUP = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_DELAY_LEVEL = "DELAY"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

# RocketMQ's MessageConst.STRING_HASH_SET (the names a user property may not take, and which a consumer does not see
# as user properties), with the names RocketMQ leaves out of that set but uses itself (the FIFO group, the trace
# context, the transaction's bookkeeping) and the core's own (light queues, tag codes, moved copies).
SYSTEM_PROPERTY_NAMES = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
        "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
        "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
        "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
        # used by RocketMQ, not in its set
        "__SHARDINGKEY", "TRACE_CONTEXT", "__transactionId__", "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS", "INNER_MULTI_DISPATCH", "INNER_NUM", "INNER_BASE",
        # the core's
        "__TAG_CODE", "__MOVED_FROM", "DLQ_ORIGIN_REASON",
    }
)  # fmt: skip

# The proxy's limits (ProxyConfig): userPropertyMaxNum, maxUserPropertySize (user properties, tag and keys
# together), maxMessageGroupSize (a group of this many UTF-8 bytes or more is refused).
MAX_USER_PROPERTIES = 128
MAX_USER_PROPERTY_BYTES = 16 * 1024
MAX_MESSAGE_GROUP_BYTES = 64
# google.protobuf.Timestamp's range ends at 9999-12-31T23:59:59Z.
MAX_TIMESTAMP_SECONDS = 253_402_300_799

# What a topic of each type accepts; MIXED takes any (RocketMQ's TopicMessageType).
TYPE_NAMES = {
    MessageType.NORMAL: "NORMAL",
    MessageType.FIFO: "FIFO",
    MessageType.DELAY: "DELAY",
    MessageType.TRANSACTION: "TRANSACTION",
}


def _has_control(text: str) -> bool:
    # Java's Character.isISOControl, as the proxy's GrpcValidator checks: U+0000..U+001F and U+007F..U+009F.
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def timestamp_ms(value: Timestamp) -> int:
    """Milliseconds since the epoch; a `seconds` past the Timestamp's range is taken as milliseconds already (the
    Python client 5.1.2 fills it so, see the module docstring)."""
    if value.seconds > MAX_TIMESTAMP_SECONDS:
        return int(value.seconds)
    return int(value.seconds) * 1000 + value.nanos // 1_000_000


def to_timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def to_duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(value: Duration) -> int:
    return int(value.seconds) * 1000 + value.nanos // 1_000_000


def message_type_of(properties: Mapping[str, str]) -> int:
    """The type a message's properties make it, as RocketMQ decides (TopicMessageType.parseFromMessageProperty)."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return MessageType.TRANSACTION
    if (
        PROPERTY_DELAY_LEVEL in properties
        or PROPERTY_TIMER_DELIVER_MS in properties
        or PROPERTY_TIMER_DELAY_SEC in properties
        or PROPERTY_TIMER_DELAY_MS in properties
    ):
        return MessageType.DELAY
    if PROPERTY_MESSAGE_GROUP in properties:
        return MessageType.FIFO
    return MessageType.NORMAL


def to_core(
    message: definition_pb2.Message,
    *,
    peer_host: Callable[[], str],
    max_body_bytes: int,
    max_delay_ms: int,
    now_ms: int,
) -> Message:
    """The core Message for one message of a SendMessageRequest, or RequestError saying what is wrong with it.
    `peer_host` gives the sender's address, asked for only when the message's born_host is not an IP address."""
    topic = message.topic
    if topic.resource_namespace:
        raise RequestError(
            Code.BAD_REQUEST,
            f"topic {topic.name!r}: namespace {topic.resource_namespace!r} given, but mqgate has no namespaces yet; "
            "leave ClientConfiguration's namespace empty",
        )
    system = message.system_properties
    body = _body(message, max_body_bytes)
    message_id = system.message_id
    if not message_id.strip():
        raise RequestError(Code.ILLEGAL_MESSAGE_ID, f"topic {topic.name!r}: the message has no message_id")
    properties = _user_properties(message)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in properties.items())
    tag = system.tag
    if tag:
        if not tag.strip():
            raise RequestError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag or _has_control(tag):
            raise RequestError(Code.ILLEGAL_MESSAGE_TAG, f"tag {tag[:64]!r} holds '|' or a control character")
        size += len(tag.encode())
    for key in system.keys:
        if not key.strip():
            raise RequestError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if _has_control(key) or " " in key:
            raise RequestError(
                Code.ILLEGAL_MESSAGE_KEY,
                f"key {key[:64]!r} holds a space or a control character; keys are stored space-separated",
            )
        size += len(key.encode())
    if size > MAX_USER_PROPERTY_BYTES:
        raise RequestError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"user properties, tag and keys take {size} bytes; at most {MAX_USER_PROPERTY_BYTES} are allowed",
        )
    group = system.message_group
    if group:
        if not group.strip():
            raise RequestError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES or _has_control(group):
            raise RequestError(
                Code.ILLEGAL_MESSAGE_GROUP,
                f"message group {group[:80]!r}: at most {MAX_MESSAGE_GROUP_BYTES - 1} bytes of UTF-8 and no control"
                " character",
            )
    if system.trace_context:
        properties[PROPERTY_TRACE_CONTEXT] = system.trace_context
    declared = system.message_type
    if declared == MessageType.TRANSACTION:
        properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        properties[PROPERTY_PRODUCER_GROUP] = topic.name
        if system.HasField("orphaned_transaction_recovery_duration"):
            properties[PROPERTY_CHECK_IMMUNITY] = str(system.orphaned_transaction_recovery_duration.seconds)
    if system.HasField("delivery_timestamp"):
        deliver_ms = timestamp_ms(system.delivery_timestamp)
        if deliver_ms - now_ms > max_delay_ms:
            raise RequestError(
                Code.ILLEGAL_DELIVERY_TIME,
                f"delivery time {deliver_ms} ms is {(deliver_ms - now_ms) // 1000} s ahead; the max delay time of a"
                f" message is {max_delay_ms // 1000} s ([broker] timer_max_delay_s)",
            )
        properties[PROPERTY_TIMER_DELIVER_MS] = str(max(deliver_ms, 0))
    core_message = build_message(
        topic.name,
        body,
        tags=tag or None,
        keys=list(system.keys) or None,
        properties=properties,
        born_host=_ip(system.born_host) or peer_host(),
        message_group=group or None,
    )
    core_message.properties[PROPERTY_UNIQ_KEY] = message_id
    if system.HasField("born_timestamp"):
        core_message.born_timestamp = timestamp_ms(system.born_timestamp)
    core_message.reconsume_times = max(system.delivery_attempt, 0)
    actual = message_type_of(core_message.properties)
    if declared == MessageType.TRANSACTION and (group or system.HasField("delivery_timestamp")):
        raise RequestError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a TRANSACTION message can have neither a message_group nor a delivery_timestamp",
        )
    if declared not in (MessageType.MESSAGE_TYPE_UNSPECIFIED, actual):
        raise RequestError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"message_type is {MessageType.Name(declared)} but its properties make it {MessageType.Name(actual)}"
            " (FIFO needs a message_group, DELAY a delivery_timestamp, TRANSACTION neither)",
        )
    return core_message


def _body(message: definition_pb2.Message, max_body_bytes: int) -> bytes:
    body = message.body
    encoding = message.system_properties.body_encoding
    if encoding == Encoding.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise RequestError(Code.MESSAGE_CORRUPTED, f"body_encoding is GZIP but the body is not ({exc})") from None
    elif encoding not in (Encoding.IDENTITY, Encoding.ENCODING_UNSPECIFIED):
        raise RequestError(Code.BAD_REQUEST, f"body_encoding {encoding} is not one of IDENTITY and GZIP")
    if not body:
        raise RequestError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_body_bytes:
        raise RequestError(
            Code.MESSAGE_BODY_TOO_LARGE, f"message body of {len(body)} bytes is over the max {max_body_bytes}"
        )
    return bytes(body)


def _user_properties(message: definition_pb2.Message) -> dict[str, str]:
    given = message.user_properties
    if len(given) > MAX_USER_PROPERTIES:
        raise RequestError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE, f"{len(given)} user properties; at most {MAX_USER_PROPERTIES} allowed"
        )
    properties: dict[str, str] = {}
    for name, value in given.items():
        if name in SYSTEM_PROPERTY_NAMES:
            raise RequestError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {name}")
        if not name or _has_control(name) or _has_control(value):
            raise RequestError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"user property {name[:64]!r}: the name must not be empty, and neither name nor value may hold a"
                " control character",
            )
        properties[name] = value
    return properties


@functools.lru_cache(maxsize=4096)
def _ip(host: str) -> str | None:
    # A producer sends its own address with every message: parsed once.
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def to_proto(
    stored: StoredMessage,
    *,
    receipt_handle: str = "",
    delivery_attempt: int = 0,
    invisible_ms: int | None = None,
) -> definition_pb2.Message:
    """The protocol's Message for a message a consumer receives (its body as the producer sent it)."""
    properties = stored.properties
    system = definition_pb2.SystemProperties(
        message_id=properties.get(PROPERTY_UNIQ_KEY) or stored.offset_msg_id,
        body_digest=definition_pb2.Digest(type=DigestType.MD5, checksum=hashlib.md5(stored.body).hexdigest().upper()),
        body_encoding=Encoding.IDENTITY,
        message_type=message_type_of(properties),
        born_timestamp=to_timestamp(stored.born_timestamp),
        born_host=stored.born_host[0],
        store_timestamp=to_timestamp(stored.store_timestamp),
        store_host=f"{stored.store_host[0]}:{stored.store_host[1]}",
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        delivery_attempt=delivery_attempt or stored.reconsume_times + 1,
    )
    tag = properties.get(PROPERTY_TAGS)
    if tag is not None:
        system.tag = tag
    keys = stored.keys
    if keys:
        system.keys.extend(keys)
    group = properties.get(PROPERTY_MESSAGE_GROUP)
    if group:
        system.message_group = group
    trace = properties.get(PROPERTY_TRACE_CONTEXT)
    if trace:
        system.trace_context = trace
    deliver = properties.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        system.delivery_timestamp.CopyFrom(to_timestamp(int(deliver)))
    if receipt_handle:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.CopyFrom(to_duration(invisible_ms))
    if stored.topic.startswith(DLQ_PREFIX):
        origin_topic = properties.get(PROPERTY_RETRY_TOPIC)
        origin_id = properties.get(PROPERTY_UNIQ_KEY) or properties.get(PROPERTY_ORIGIN_MESSAGE_ID)
        if origin_topic and origin_id:
            system.dead_letter_queue.CopyFrom(definition_pb2.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=stored.topic),
        user_properties={name: value for name, value in properties.items() if name not in SYSTEM_PROPERTY_NAMES},
        system_properties=system,
        body=stored.body,
    )
