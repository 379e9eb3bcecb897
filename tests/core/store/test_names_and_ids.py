import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.store.errors import InvalidMessageIdError, InvalidTopicError
from core.store.message_id import (
    UniqueIdGenerator,
    decode_offset_msg_id,
    encode_offset_msg_id,
)
from core.store.topic_name import validate_topic


@pytest.mark.parametrize("name", ["a", "TopicTest", "%RETRY%group", "%DLQ%g", "a_b-c|d", "x" * 127])
def test_legal_topics(name):
    assert validate_topic(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("a/b", "'/' is not allowed"),
        ("../etc", "'.' is not allowed"),
        ("..", "'.' is not allowed"),
        ("a b", "' ' is not allowed"),
        ("x" * 128, "at most 127"),
        ("caf\u00e9", "is not allowed"),
    ],
)
def test_illegal_topics_say_why(name, message):
    with pytest.raises(InvalidTopicError, match=message):
        validate_topic(name)


def test_offset_msg_id_ipv4_is_rocketmq_shape():
    msg_id = encode_offset_msg_id(("192.168.1.10", 10911), 123456789)
    assert len(msg_id) == 32
    assert msg_id == "C0A8010A00002A9F00000000075BCD15"
    assert decode_offset_msg_id(msg_id) == (("192.168.1.10", 10911), 123456789)


def test_offset_msg_id_ipv6():
    msg_id = encode_offset_msg_id(("2001:db8::1", 9876), 2**40)
    assert len(msg_id) == 56
    assert decode_offset_msg_id(msg_id) == (("2001:db8::1", 9876), 2**40)


@pytest.mark.parametrize("bad", ["xyz", "ABCD", "00" * 17])
def test_bad_offset_msg_id(bad):
    with pytest.raises(InvalidMessageIdError):
        decode_offset_msg_id(bad)


def test_unique_ids_are_unique_and_32_hex():
    generator = UniqueIdGenerator("10.1.2.3")
    ids = [generator.next_id() for _ in range(200_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids[:100])
    assert ids[0].startswith("0A010203")
    other = UniqueIdGenerator("10.1.2.3")
    assert not set(ids[:1000]) & {other.next_id() for _ in range(1000)}


def test_ids_taken_in_batches_and_one_by_one_never_repeat():
    generator = UniqueIdGenerator("10.1.2.3")
    ids = []
    for n in range(500):
        ids += generator.next_ids(n % 7) if n % 2 else [generator.next_id()]
    assert len(set(ids)) == len(ids) == 250 + sum(n % 7 for n in range(1, 500, 2))
    assert all(len(i) == 32 for i in ids)


def test_threads_taking_ids_at_once_never_get_the_same_one():
    generator = UniqueIdGenerator("10.1.2.3")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        with ThreadPoolExecutor(4) as pool:
            taken = list(
                pool.map(
                    lambda n: [
                        i for _ in range(2_000) for i in (generator.next_ids(3) if n % 2 else [generator.next_id()])
                    ],
                    range(8),
                )
            )
    finally:
        sys.setswitchinterval(interval)
    ids = [i for part in taken for i in part]
    assert len(ids) == 4 * 2_000 * 3 + 4 * 2_000
    assert len(set(ids)) == len(ids)
