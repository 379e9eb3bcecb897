"""Messages in RocketMQ 4's layout (remoting/message_codec.py): stored records and producer batches round-trip,
the properties text is read as RocketMQ's string2messageProperties reads it (checked against a transcription of
its index arithmetic), a record's fixed fields sit where MessageDecoder reads them, what the layout cannot carry is
refused, and the offset message id is RocketMQ's."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.message_codec import (
    COMPRESSED_FLAG,
    MESSAGE_MAGIC,
    MessageLayoutError,
    MessageRecord,
    decode_batch,
    decode_properties,
    decode_records,
    encode_batch,
    encode_properties,
    encode_record,
    offset_message_id,
)

name = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)
properties = st.dictionaries(name, name, max_size=5)
hosts = st.tuples(st.sampled_from(["127.0.0.1", "10.1.2.3", "::1", "fe80::1"]), st.integers(0, 65535))
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(0, 2**62)

records = st.builds(
    MessageRecord,
    topic=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=127),
    body=st.binary(max_size=300),
    queue_id=st.integers(0, 1000),
    flag=I32,
    queue_offset=I64,
    commit_log_offset=I64,
    sys_flag=st.sampled_from([0, 2, 4, 8, 12]),
    born_timestamp=I64,
    born_host=hosts,
    store_timestamp=I64,
    store_host=hosts,
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=I64,
    properties=properties,
)


@given(st.lists(records, max_size=4))
def test_records_round_trip(sent):
    got = decode_records(b"".join(encode_record(record) for record in sent))
    assert [(r.topic, r.body, r.queue_id, r.flag, r.queue_offset, r.commit_log_offset, r.born_timestamp, r.born_host,
             r.store_timestamp, r.store_host, r.reconsume_times, r.prepared_transaction_offset, r.properties,
             r.sys_flag & 0xF) for r in got] == [
        (r.topic, r.body, r.queue_id, r.flag, r.queue_offset, r.commit_log_offset, r.born_timestamp, r.born_host,
         r.store_timestamp, r.store_host, r.reconsume_times, r.prepared_transaction_offset, r.properties,
         r.sys_flag & 0xF) for r in sent]  # fmt: skip
    assert all(record.body_crc == zlib.crc32(record.body) & 0x7FFFFFFF for record in got)


def test_fixed_fields_sit_where_messagedecoder_reads_them():
    record = MessageRecord("t", b"body", 3, 7, 42, 1000, 0, 111, ("10.0.0.1", 5000), 222, ("10.0.0.2", 10911), 2, 0,
                           {"KEYS": "k"})  # fmt: skip
    data = encode_record(record)
    assert struct.unpack_from(">iiiiiqqiq", data, 0) == (
        len(data), MESSAGE_MAGIC, zlib.crc32(b"body") & 0x7FFFFFFF, 3, 7, 42, 1000, 0, 111,
    )  # fmt: skip
    assert data[48:52] == bytes([10, 0, 0, 1]) and struct.unpack_from(">iq", data, 52) == (5000, 222)
    assert data[64:68] == bytes([10, 0, 0, 2]) and struct.unpack_from(">iiq", data, 68) == (10911, 2, 0)
    assert data.endswith(b"\x01t" + struct.pack(">h", 7) + b"KEYS\x01k\x02")


def test_a_compressed_body_is_inflated():
    record = MessageRecord("t", zlib.compress(b"x" * 1000), sys_flag=COMPRESSED_FLAG)
    [got] = decode_records(encode_record(record))
    assert got.body == b"x" * 1000
    [kept] = decode_records(encode_record(record), decompress=False)
    assert kept.body == record.body


def java_string2message_properties(text: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties, transcribed index for index."""
    found: dict[str, str] = {}
    index, length = 0, len(text)
    while index < length:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = text.find("\x01", index)
            if index < kv < new_index - 1:
                found[text[index:kv]] = text[kv + 1 : new_index]
        index = new_index + 1
    return found


@given(st.text(st.sampled_from("ab\x01\x02"), max_size=30))
def test_properties_are_read_as_rocketmq_reads_them(text):
    assert decode_properties(text) == java_string2message_properties(text)


@given(properties)
def test_properties_round_trip(values):
    assert decode_properties(encode_properties(values)) == values


@given(st.lists(st.tuples(I32, st.binary(max_size=100), properties), max_size=5))
def test_batches_round_trip(messages):
    assert decode_batch(encode_batch(messages)) == messages


@pytest.mark.parametrize(
    "data",
    [b"\x00\x00\x00\x05", struct.pack(">iiiii", 30, 0, 0, 0, 99), struct.pack(">iiiii", 99, 0, 0, 0, 0) + b"\x00\x00"],
)
def test_a_batch_that_does_not_fit_is_refused(data):
    with pytest.raises(MessageLayoutError, match="byte 0"):
        decode_batch(data)


def test_what_the_layout_cannot_carry_is_refused():
    with pytest.raises(MessageLayoutError, match="127 at most"):
        encode_record(MessageRecord("t" * 128, b""))
    with pytest.raises(MessageLayoutError, match="32,767 at most"):
        encode_record(MessageRecord("t", b"", properties={"k": "v" * 40_000}))
    with pytest.raises(MessageLayoutError, match="no message at byte 0"):
        decode_records(b"\x00" * 60)


def test_the_offset_message_id_is_rocketmqs():
    assert offset_message_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"
    assert offset_message_id(("10.0.0.2", 10911), 0x1234) == "0A00000200002A9F0000000000001234"
