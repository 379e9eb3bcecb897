"""proxy.message_codec without a socket: generated protocol messages go into the core and back out as a consumer
receives them, compared with what a plain reference says must arrive; each refusal gets the proxy's code."""

from __future__ import annotations

import gzip
import hashlib
import uuid
import zlib

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import Code, DigestType, Encoding, MessageType, definition_pb2

from core import StoredMessage
from proxy.message_codec import SYSTEM_PROPERTY_NAMES, message_type_of, timestamp_ms, to_core, to_proto
from proxy.status_codes import RequestError

NOW_MS = 1_790_000_000_000
LIMITS = {
    "peer_host": lambda: "10.0.0.9",
    "max_body_bytes": 4 * 1024 * 1024,
    "max_delay_ms": 86_400_000,
    "now_ms": NOW_MS,
}

words = st.text(
    alphabet=st.characters(min_codepoint=0xA0, max_codepoint=0x2FFF) | st.sampled_from("abcXYZ019_-."),
    min_size=1,
    max_size=12,
)
user_names = words.filter(lambda w: w not in SYSTEM_PROPERTY_NAMES)


@st.composite
def sent_messages(draw: st.DrawFn) -> definition_pb2.Message:
    kind = draw(st.sampled_from(["normal", "fifo", "delay", "transaction"]))
    system = definition_pb2.SystemProperties(
        message_id=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))).hex,
        born_host=draw(st.sampled_from(["192.168.1.7", "not-an-ip", ""])),
        born_timestamp=Timestamp(seconds=draw(st.integers(1_600_000_000, 1_800_000_000))),
        delivery_attempt=draw(st.integers(0, 5)),
    )
    tag = draw(st.none() | words.filter(lambda w: "|" not in w and w.strip() == w))
    if tag is not None:
        system.tag = tag
    # A key of nothing but white space (U+00A0, U+2000...) is refused as RocketMQ refuses it: tested below.
    keys = words.filter(lambda w: " " not in w and w.strip())
    system.keys.extend(draw(st.lists(keys, max_size=3, unique=True)))
    if kind == "fifo":
        system.message_group = draw(words)
        system.message_type = MessageType.FIFO
    elif kind == "delay":
        system.delivery_timestamp.CopyFrom(Timestamp(seconds=NOW_MS // 1000 + draw(st.integers(1, 3600))))
        system.message_type = MessageType.DELAY
    elif kind == "transaction":
        system.message_type = MessageType.TRANSACTION
    else:
        system.message_type = draw(st.sampled_from([MessageType.NORMAL, MessageType.MESSAGE_TYPE_UNSPECIFIED]))
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name="orders"),
        user_properties=draw(st.dictionaries(user_names, words, max_size=4)),
        system_properties=system,
        body=draw(st.binary(min_size=1, max_size=6000)),
    )


def stored(message, queue_offset: int = 7) -> StoredMessage:
    """The record the store would give back for an appended core message (its body decompressed, as a pop does)."""
    body = zlib.decompress(message.body) if message.sys_flag & 1 else message.body
    return StoredMessage(
        topic=message.topic,
        body=body,
        queue_id=message.queue_id,
        queue_offset=queue_offset,
        commit_log_offset=4096,
        store_size=len(body) + 200,
        body_crc=zlib.crc32(body),
        flag=0,
        sys_flag=message.sys_flag & ~1,
        born_timestamp=message.born_timestamp,
        born_host=message.born_host,
        store_timestamp=NOW_MS + 5,
        store_host=("127.0.0.1", 10911),
        reconsume_times=message.reconsume_times,
        prepared_transaction_offset=0,
        properties=dict(message.properties),
    )


@given(sent_messages())
def test_a_message_arrives_as_it_was_sent(sent: definition_pb2.Message) -> None:
    core_message = to_core(sent, **LIMITS)
    got = to_proto(stored(core_message), receipt_handle="h1", delivery_attempt=2, invisible_ms=30_000)
    system, sent_system = got.system_properties, sent.system_properties
    # The reference: what the proxy promises a consumer.
    assert got.body == sent.body
    assert got.topic.name == "orders"
    assert dict(got.user_properties) == dict(sent.user_properties)
    assert system.message_id == sent_system.message_id
    assert (system.tag if system.HasField("tag") else None) == (
        sent_system.tag if sent_system.HasField("tag") else None
    )
    assert sorted(system.keys) == sorted(sent_system.keys)
    assert system.message_group == sent_system.message_group
    expected_type = sent_system.message_type or MessageType.NORMAL
    assert system.message_type == expected_type
    assert system.HasField("delivery_timestamp") == sent_system.HasField("delivery_timestamp")
    if sent_system.HasField("delivery_timestamp"):
        assert timestamp_ms(system.delivery_timestamp) == timestamp_ms(sent_system.delivery_timestamp)
    assert timestamp_ms(system.born_timestamp) == timestamp_ms(sent_system.born_timestamp)
    assert system.born_host == (sent_system.born_host if sent_system.born_host == "192.168.1.7" else "10.0.0.9")
    assert (system.receipt_handle, system.delivery_attempt, system.invisible_duration.seconds) == ("h1", 2, 30)
    assert system.body_digest.type == DigestType.MD5
    assert system.body_digest.checksum == hashlib.md5(sent.body).hexdigest().upper()
    assert system.body_encoding == Encoding.IDENTITY
    assert (system.queue_offset, system.store_host) == (7, "127.0.0.1:10911")
    if expected_type == MessageType.TRANSACTION:
        assert core_message.properties["PGROUP"] == "orders"  # the proxy's producer group: the topic


def test_a_gzip_body_is_stored_as_sent_before_compression() -> None:
    sent = definition_pb2.Message(
        topic=definition_pb2.Resource(name="t"),
        body=gzip.compress(b"hello " * 100),
        system_properties=definition_pb2.SystemProperties(message_id="m1", body_encoding=Encoding.GZIP),
    )
    assert to_proto(stored(to_core(sent, **LIMITS))).body == b"hello " * 100


def test_milliseconds_in_the_seconds_field_are_read_as_milliseconds() -> None:
    # rocketmq-python-client 5.1.2 sends message.delivery_timestamp (ms) in Timestamp.seconds.
    assert timestamp_ms(Timestamp(seconds=NOW_MS + 2500)) == NOW_MS + 2500
    assert timestamp_ms(Timestamp(seconds=NOW_MS // 1000, nanos=250_000_000)) == NOW_MS + 250


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"body": b""}, Code.MESSAGE_BODY_EMPTY),
        ({"body": b"x" * (4 * 1024 * 1024 + 1)}, Code.MESSAGE_BODY_TOO_LARGE),
        ({"message_id": " "}, Code.ILLEGAL_MESSAGE_ID),
        ({"tag": "a|b"}, Code.ILLEGAL_MESSAGE_TAG),
        ({"tag": "a\tb"}, Code.ILLEGAL_MESSAGE_TAG),
        ({"keys": [""]}, Code.ILLEGAL_MESSAGE_KEY),
        ({"keys": ["a b"]}, Code.ILLEGAL_MESSAGE_KEY),
        ({"keys": ["\u00a0\u2003"]}, Code.ILLEGAL_MESSAGE_KEY),
        ({"message_group": "g" * 64}, Code.ILLEGAL_MESSAGE_GROUP),
        ({"user_properties": {"KEYS": "x"}}, Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"user_properties": {"__SHARDINGKEY": "x"}}, Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"user_properties": {f"p{i}": "v" for i in range(129)}}, Code.MESSAGE_PROPERTIES_TOO_LARGE),
        ({"user_properties": {"big": "v" * 17_000}}, Code.MESSAGE_PROPERTIES_TOO_LARGE),
        ({"delivery_timestamp": Timestamp(seconds=NOW_MS // 1000 + 86_401)}, Code.ILLEGAL_DELIVERY_TIME),
        ({"message_type": MessageType.DELAY}, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        ({"message_type": MessageType.TRANSACTION, "message_group": "g"}, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        ({"namespace": "ns1"}, Code.BAD_REQUEST),
        ({"body_encoding": Encoding.GZIP}, Code.MESSAGE_CORRUPTED),
    ],
)
def test_a_message_breaking_a_rule_is_refused_with_its_code(change: dict, code: int) -> None:
    change = dict(change)
    body = change.pop("body", b"ok")
    user = change.pop("user_properties", {})
    namespace = change.pop("namespace", "")
    system = {"message_id": "m1", **change}
    sent = definition_pb2.Message(
        topic=definition_pb2.Resource(name="t", resource_namespace=namespace),
        body=body,
        user_properties=user,
        system_properties=definition_pb2.SystemProperties(**system),
    )
    with pytest.raises(RequestError) as refused:
        to_core(sent, **LIMITS)
    assert Code.Name(refused.value.code) == Code.Name(code)
    assert refused.value.message


def test_the_type_of_a_message_follows_its_properties_as_rocketmq_decides() -> None:
    assert message_type_of({}) == MessageType.NORMAL
    assert message_type_of({"__SHARDINGKEY": "g"}) == MessageType.FIFO
    assert message_type_of({"__SHARDINGKEY": "g", "DELAY": "3"}) == MessageType.DELAY
    assert message_type_of({"TIMER_DELIVER_MS": "1", "TRAN_MSG": "true"}) == MessageType.TRANSACTION
