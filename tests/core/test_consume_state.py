"""A message's consumption state per group (Broker.queries.track), driven by real sends, copies and committed offsets:
consumed, not yet, in retry (parked and stored), in the dead-letter topic, resent, never consumed, broadcasting."""

import pytest

from core import ConsumeState, MessageNotFoundError, Producer
from core.system_topics import SCHEDULE_TOPIC, dlq_topic, retry_topic

from .dead_letter_fixtures import record_of, send_dead_letter, send_retry


@pytest.fixture
async def orders(make_broker):
    """Topic 'orders' (one queue) with m0..m3 at offsets 0..3; group 'g' has committed 2."""
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=1)
    producer = Producer(broker)
    sent = [await producer.send("orders", b"m%d" % n) for n in range(4)]
    broker.commit_offset("g", "orders", 0, 2)
    await broker.wait_visible()
    return broker, sent


def state(broker, group, sent):
    return broker.queries.track(group, "orders", sent.msg_id).state


async def test_the_committed_offset_tells_consumed_from_not_yet(orders):
    broker, sent = orders
    assert [state(broker, "g", s) for s in sent] == [ConsumeState.CONSUMED] * 2 + [ConsumeState.NOT_CONSUMED_YET] * 2
    track = broker.queries.track("g", "orders", sent[2].msg_id)
    assert track.committed_offset == 2 and track.record.offset_msg_id == sent[2].offset_msg_id
    assert track.record.body == b"m2" and track.group == "g"


async def test_a_group_that_never_consumed_the_queue_says_so(orders):
    broker, sent = orders
    assert state(broker, "newcomer", sent[0]) is ConsumeState.NO_OFFSET
    assert broker.queries.track("newcomer", "orders", sent[0].msg_id).committed_offset == -1


async def test_a_retry_is_in_retry_until_the_group_consumes_it(orders):
    broker, sent = orders
    await send_retry(broker, "g", record_of(broker, sent[1]))
    await broker.wait_visible()
    assert state(broker, "g", sent[1]) is ConsumeState.IN_RETRY
    assert state(broker, "other", sent[1]) is ConsumeState.NO_OFFSET  # g's retries are g's alone
    broker.commit_offset("g", retry_topic("g"), 0, 1)
    assert state(broker, "g", sent[1]) is ConsumeState.CONSUMED
    # Failing again makes a newer copy: in retry again.
    await send_retry(broker, "g", record_of(broker, sent[1]), times=2)
    await broker.wait_visible()
    track = broker.queries.track("g", "orders", sent[1].msg_id)
    assert track.state is ConsumeState.IN_RETRY and track.record.reconsume_times == 2


async def test_a_retry_waiting_its_delay_is_in_retry(orders):
    broker, sent = orders
    broker.commit_offset("g", "orders", 0, 3)
    await send_retry(broker, "g", record_of(broker, sent[2]), delay_level=5)
    await broker.wait_visible()
    track = broker.queries.track("g", "orders", sent[2].msg_id)
    assert track.state is ConsumeState.IN_RETRY and track.record.topic == SCHEDULE_TOPIC


async def test_a_dead_letter_is_in_the_dlq_until_resent_and_consumed(orders):
    broker, sent = orders
    retried = await send_retry(broker, "g", record_of(broker, sent[0]))
    broker.commit_offset("g", retry_topic("g"), 0, 1)
    await send_dead_letter(broker, "g", record_of(broker, retried))
    await broker.wait_visible()
    track = broker.queries.track("g", "orders", sent[0].msg_id)
    assert track.state is ConsumeState.IN_DLQ and track.record.topic == dlq_topic("g")
    summary = await broker.dead_letters.resend_by_unique_id("g", sent[0].msg_id)
    assert len(summary.resent) == 1
    await broker.wait_visible()
    # Resent to the group alone, through its retry topic (the retry topic's offset 1: after the earlier retry).
    track = broker.queries.track("g", "orders", sent[0].msg_id)
    assert track.state is ConsumeState.IN_RETRY and (track.record.topic, track.record.queue_offset) == (
        retry_topic("g"),
        1,
    )
    broker.commit_offset("g", retry_topic("g"), 0, 2)
    assert state(broker, "g", sent[0]) is ConsumeState.CONSUMED


async def test_a_broadcasting_group_cannot_be_told(orders):
    broker, sent = orders
    broker.consumers.heartbeat("fanout", "client-1", "BROADCASTING", {})
    assert state(broker, "fanout", sent[0]) is ConsumeState.BROADCASTING


async def test_an_unknown_message_is_not_found(orders):
    broker, _ = orders
    with pytest.raises(MessageNotFoundError, match="in topic 'orders' nor in the copies of group 'g'"):
        broker.queries.track("g", "orders", "0123456789ABCDEF")
