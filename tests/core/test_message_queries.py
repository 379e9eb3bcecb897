"""Broker.queries on real stores: by offset message id, by unique id (with a group's retry and dead-letter copies),
by key within a time range, across a restart; malformed input refused with what and where."""

import asyncio
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import (
    MAX_QUERY_COUNT,
    IllegalArgumentError,
    MessageNotFoundError,
    Producer,
    TopicNotFoundError,
    parse_offset_msg_id,
)
from core.store.message_id import encode_offset_msg_id
from core.system_topics import PROPERTY_ORIGIN_MESSAGE_ID, dlq_topic, retry_topic

from .dead_letter_fixtures import record_of, send_dead_letter, send_retry

BIG = b"compressible " * 1000  # over 4 KiB: the producer compresses it


async def test_by_offset_id_returns_the_record_as_consumers_see_it(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=2)
    producer = Producer(broker)
    await producer.send("orders", b"first")
    sent = await producer.send("orders", BIG, tags="paid", keys=["o-1", "shop-9"], properties={"region": "eu"})
    assert record_of(broker, sent).body != BIG  # stored compressed
    found = broker.queries.by_offset_id(sent.offset_msg_id)
    assert found.body == BIG
    assert (found.topic, found.queue_id, found.queue_offset) == ("orders", sent.message_queue.queue_id, 0)
    assert found.commit_log_offset == sent.commit_log_offset and found.offset_msg_id == sent.offset_msg_id
    assert found.tags == "paid" and found.keys == ["o-1", "shop-9"] and found.properties["region"] == "eu"
    assert found.unique_id == sent.msg_id and found.store_timestamp > 0
    # Lower case is the same id.
    assert broker.queries.by_offset_id(sent.offset_msg_id.lower()).body == BIG


@pytest.mark.parametrize(
    "bad", ["", "xyz", "C0A8010A00002A9F00000000075BCD1", "C0A8010A 0002A9F00000000075BCD15", "0" * 40]
)
async def test_a_malformed_offset_id_is_refused_naming_it(make_broker, bad):
    broker = await make_broker()
    with pytest.raises(IllegalArgumentError, match="is not an offset message id") as caught:
        broker.queries.by_offset_id(bad)
    assert repr(bad) in str(caught.value)


async def test_an_offset_id_naming_no_record_here_is_not_found(make_broker):
    broker = await make_broker()
    sent = await Producer(broker).send("orders", b"payload")
    host = broker.store.config.store_host, broker.store.config.store_port
    inside = encode_offset_msg_id(host, sent.commit_log_offset + 7)
    with pytest.raises(MessageNotFoundError, match="no record starts at commit-log offset"):
        broker.queries.by_offset_id(inside)
    past_end = encode_offset_msg_id(host, broker.store.end_offset + 1000)
    with pytest.raises(MessageNotFoundError, match="no record at commit-log offset"):
        broker.queries.by_offset_id(past_end)
    elsewhere = encode_offset_msg_id(("10.1.2.3", 10911), sent.commit_log_offset)
    with pytest.raises(MessageNotFoundError, match=r"ask the broker at 10\.1\.2\.3:10911"):
        broker.queries.by_offset_id(elsewhere)


ipv4 = st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n)))
ipv6 = st.integers(0, 2**128 - 1).map(lambda n: ipaddress.IPv6Address(n)).filter(lambda a: a.ipv4_mapped is None)


@given(host=st.one_of(ipv4, ipv6.map(str)), port=st.integers(0, 0xFFFF), offset=st.integers(0, 2**63 - 1))
def test_offset_ids_round_trip(host, port, offset):
    msg_id = encode_offset_msg_id((host, port), offset)
    assert parse_offset_msg_id(msg_id) == ((host, port), offset)
    assert parse_offset_msg_id(msg_id.lower()) == ((host, port), offset)


@given(st.one_of(st.text(max_size=60), st.text("0123456789abcdefABCDEF \n", min_size=30, max_size=58)))
def test_any_text_parses_to_the_id_it_is_or_is_refused(text):
    try:
        host, offset = parse_offset_msg_id(text)
    except IllegalArgumentError as exc:
        assert "message id" in str(exc)
    else:
        assert encode_offset_msg_id(host, offset) == text.upper()


async def test_by_unique_id_finds_the_original_and_with_a_group_its_copies(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=1)
    broker.create_topic("invoices", queue_nums=1)
    producer = Producer(broker)
    sent = await producer.send("orders", b"pay me", keys="o-1")
    other = await producer.send("orders", b"someone else")
    original = record_of(broker, sent)
    retried = await send_retry(broker, "billing", original)
    dead = await send_dead_letter(broker, "billing", record_of(broker, retried))
    # A copy with the same unique id made from another topic's message is not this message's.
    foreign = record_of(broker, await producer.send("invoices", b"x"))
    foreign.properties["UNIQ_KEY"] = sent.msg_id
    await send_retry(broker, "billing", foreign)
    await broker.wait_visible()

    alone = broker.queries.by_unique_id("orders", sent.msg_id)
    assert [m.offset_msg_id for m in alone] == [sent.offset_msg_id]
    chain = broker.queries.by_unique_id("orders", sent.msg_id, group="billing")
    assert [(m.topic, m.offset_msg_id) for m in chain] == [
        ("orders", sent.offset_msg_id),
        (retry_topic("billing"), retried.offset_msg_id),
        (dlq_topic("billing"), dead.offset_msg_id),
    ]
    assert all(m.body == b"pay me" and m.keys == ["o-1"] for m in chain)
    assert chain[2].properties[PROPERTY_ORIGIN_MESSAGE_ID] == sent.offset_msg_id
    assert broker.queries.by_unique_id("orders", other.msg_id, group="billing")[0].body == b"someone else"


async def test_by_unique_id_refuses_unknown_topics_and_finds_nothing_honestly(make_broker):
    broker = await make_broker()
    sent = await Producer(broker).send("orders", b"x")
    await broker.wait_visible()
    with pytest.raises(TopicNotFoundError, match="'nope' does not exist"):
        broker.queries.by_unique_id("nope", sent.msg_id)
    with pytest.raises(MessageNotFoundError, match="no message with unique id 'ABC' in topic 'orders'"):
        broker.queries.by_unique_id("orders", "ABC")
    with pytest.raises(IllegalArgumentError, match="whitespace"):
        broker.queries.by_unique_id("orders", "A B")


async def test_by_key_within_a_time_range_newest_first(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=3)
    producer = Producer(broker)
    phases = []
    for phase in range(3):
        sent = [await producer.send("orders", b"%d-%d" % (phase, n), keys=["k", f"n{n}"]) for n in range(5)]
        await producer.send("orders", b"unkeyed")
        phases.append([record_of(broker, result) for result in sent])
        await asyncio.sleep(0.02)  # store times of the phases do not overlap
    await producer.send("other", b"same key, other topic", keys="k")
    await broker.wait_visible()
    everything = broker.queries.by_key("orders", "k", max_count=MAX_QUERY_COUNT)
    assert [m.body for m in everything] == [m.body for phase in reversed(phases) for m in reversed(phase)]
    middle = phases[1]
    found = broker.queries.by_key("orders", "k", middle[0].store_timestamp, middle[-1].store_timestamp)
    assert {m.body for m in found} == {m.body for m in middle}
    assert [m.store_timestamp for m in found] == sorted((m.store_timestamp for m in found), reverse=True)
    newest = broker.queries.by_key("orders", "k", max_count=3)
    assert [m.body for m in newest] == [b"2-4", b"2-3", b"2-2"]
    assert [m.body for m in broker.queries.by_key("orders", "n3")] == [b"2-3", b"1-3", b"0-3"]
    assert broker.queries.by_key("orders", "absent") == []
    # A key is a key: the unique id of a message does not find it here.
    assert broker.queries.by_key("orders", middle[0].unique_id) == []
    before = broker.queries.by_key("orders", "k", 0, phases[0][0].store_timestamp - 1)
    assert before == []


async def test_by_key_refuses_bad_ranges_and_counts(make_broker):
    broker = await make_broker()
    await Producer(broker).send("orders", b"x", keys="k")
    with pytest.raises(IllegalArgumentError, match="begins at 10 ms, after its end at 5 ms"):
        broker.queries.by_key("orders", "k", 10, 5)
    for count in (0, MAX_QUERY_COUNT + 1):
        with pytest.raises(IllegalArgumentError, match=f"max count {count} is out of range; give 1 to 64"):
            broker.queries.by_key("orders", "k", max_count=count)
    with pytest.raises(TopicNotFoundError):
        broker.queries.by_key("missing", "k")
    with pytest.raises(IllegalArgumentError, match="whitespace"):
        broker.queries.by_key("orders", "a b")


async def test_queries_answer_the_same_after_a_restart(make_broker, tmp_path):
    broker = await make_broker(tmp_path)
    producer = Producer(broker)
    sent = [await producer.send("orders", b"m%d" % n, keys=f"k{n % 3}") for n in range(30)]
    await broker.wait_visible()
    before = [m.body for m in broker.queries.by_key("orders", "k1")]
    await broker.close()
    broker.store.close()
    again = await make_broker(tmp_path)
    assert [m.body for m in again.queries.by_key("orders", "k1")] == before
    assert again.queries.by_unique_id("orders", sent[7].msg_id)[0].body == b"m7"
    assert again.queries.by_offset_id(sent[8].offset_msg_id).body == b"m8"
