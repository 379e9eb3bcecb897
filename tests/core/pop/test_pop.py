import asyncio
import gc
import random
import weakref

import pytest

from core import Broker
from core.client import Producer
from core.filter import build_filter
from core.pop.errors import PopRequestError, ReceiptHandleError, ReceiptHandleProblem
from core.pop.receipt_handle import ReceiptHandle
from core.pop.request import MAX_POP_BATCH
from core.pop.service import (
    PROPERTY_MESSAGE_GROUP,
    PopService,
)
from core.tables.subscription_group import SubscriptionGroupConfig
from core.tables.topic_config import MessageType
from tests.core.conftest import open_broker_store

INVISIBLE_MS = 30_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def setup(make_broker, topic="t", queues=1, message_type=MessageType.NORMAL):
    broker = await make_broker()
    broker.create_topic(topic, queue_nums=queues, message_type=message_type)
    clock = FakeClock()
    return broker, PopService(broker, clock), clock, Producer(broker)


async def send_all(broker, producer, topic, bodies, **options):
    for body in bodies:
        await producer.send(topic, body, **options)
    await broker.store.wait_visible()


def bodies_of(popped):
    return [p.message.body for p in popped]


async def test_pop_then_ack_commits_the_next_offset_and_never_redelivers(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"a", b"b", b"c"])
    popped = await pops.pop("g", "t", 32, INVISIBLE_MS)
    assert bodies_of(popped) == [b"a", b"b", b"c"]
    assert [p.delivery_attempt for p in popped] == [1, 1, 1]
    assert [p.message.reconsume_times for p in popped] == [0, 0, 0]
    assert broker.query_offset("g", "t", 0) == 0
    for p in popped:
        pops.ack("g", p.receipt_handle)
    assert broker.query_offset("g", "t", 0) == 3
    clock.advance(3600)
    assert await pops.pop("g", "t", 32, INVISIBLE_MS) == []


async def test_an_expired_message_comes_back_with_its_attempt_counted(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x"])
    [first] = await pops.pop("g", "t", 1, 10_000)
    assert first.invisible_until == clock.now + 10
    clock.advance(9.999)
    assert await pops.pop("g", "t", 1, 10_000) == []  # still invisible
    clock.advance(0.002)
    [second] = await pops.pop("g", "t", 1, 10_000)
    # Sent back to the group's retry topic (at once: the invisible time was the wait), seen under its own topic.
    assert (second.message.topic, second.message.body) == ("t", b"x")
    assert second.message.properties["RETRY_TOPIC"] == "t"
    assert second.delivery_attempt == 2 and second.message.reconsume_times == 1
    assert second.message.unique_id == first.message.unique_id
    assert second.receipt_handle != first.receipt_handle
    with pytest.raises(ReceiptHandleError, match="sent back") as refused:
        pops.ack("g", first.receipt_handle)
    assert refused.value.problem is ReceiptHandleProblem.SUPERSEDED
    assert broker.query_offset("g", "t", 0) == 1  # no longer held back by the unacked message
    assert broker.query_offset("g", "%RETRY%g", 0) == 0
    pops.ack("g", second.receipt_handle)
    assert broker.query_offset("g", "%RETRY%g", 0) == 1
    clock.advance(3600)
    assert await pops.pop("g", "t", 1, 10_000) == []


async def test_a_late_ack_before_the_message_is_popped_again_is_honoured(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x"])
    [popped] = await pops.pop("g", "t", 1, 10_000)
    clock.advance(60)  # visible again, but nobody popped it yet
    pops.ack("g", popped.receipt_handle)
    assert broker.query_offset("g", "t", 0) == 1
    assert await pops.pop("g", "t", 1, 10_000) == []


async def test_acking_twice_does_nothing(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x", b"y"])
    first, _ = await pops.pop("g", "t", 2, INVISIBLE_MS)
    pops.ack("g", first.receipt_handle)
    pops.ack("g", first.receipt_handle)
    assert broker.query_offset("g", "t", 0) == 1


async def test_consumers_of_one_group_share_messages_and_groups_each_get_all(make_broker):
    broker, pops, _clock, producer = await setup(make_broker, queues=4)
    await send_all(broker, producer, "t", [b"%d" % n for n in range(20)])
    first = await pops.pop("g", "t", 8, INVISIBLE_MS)
    second = await pops.pop("g", "t", 8, INVISIBLE_MS)
    third = await pops.pop("g", "t", 8, INVISIBLE_MS)
    seen = bodies_of(first) + bodies_of(second) + bodies_of(third)
    assert sorted(seen) == sorted(b"%d" % n for n in range(20))  # each once, none twice
    assert await pops.pop("g", "t", 8, INVISIBLE_MS) == []
    other = []
    while batch := await pops.pop("h", "t", 8, INVISIBLE_MS):
        other += bodies_of(batch)
    assert sorted(other) == sorted(seen)


async def test_pops_start_at_a_different_queue_each_time(make_broker):
    broker, pops, _clock, producer = await setup(make_broker, queues=4)
    await send_all(broker, producer, "t", [b"%d" % n for n in range(8)])  # round robin: 2 per queue
    queues = [(await pops.pop("g", "t", 1, INVISIBLE_MS))[0].message.queue_id for _ in range(4)]
    assert sorted(queues) == [0, 1, 2, 3]


async def test_out_of_order_acks_commit_the_lowest_unacked_offset(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"%d" % n for n in range(5)])
    popped = await pops.pop("g", "t", 5, INVISIBLE_MS)
    expected = {2: 0, 4: 0, 0: 1, 1: 3, 3: 5}
    for index, committed in expected.items():
        pops.ack("g", popped[index].receipt_handle)
        assert broker.query_offset("g", "t", 0) == committed, f"after acking offset {index}"


async def test_change_invisible_duration_extends(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x"])
    [popped] = await pops.pop("g", "t", 1, 10_000)
    clock.advance(5)
    handle = pops.change_invisible_duration("g", popped.receipt_handle, 60_000)
    clock.advance(10)  # past the first deadline
    assert await pops.pop("g", "t", 1, 10_000) == []
    with pytest.raises(ReceiptHandleError, match="change_invisible_duration returned") as refused:
        pops.ack("g", popped.receipt_handle)
    assert refused.value.problem is ReceiptHandleProblem.SUPERSEDED
    clock.advance(51)  # 66 s after the pop, 61 s after the change
    [again] = await pops.pop("g", "t", 1, 10_000)
    assert again.delivery_attempt == 2
    with pytest.raises(ReceiptHandleError, match="delivered again"):
        pops.ack("g", handle)


async def test_change_invisible_duration_shortens(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x"])
    [popped] = await pops.pop("g", "t", 1, 600_000)
    handle = pops.change_invisible_duration("g", popped.receipt_handle, 1_000)
    assert await pops.pop("g", "t", 1, 10_000) == []
    clock.advance(1)
    [again] = await pops.pop("g", "t", 1, 10_000)
    assert again.delivery_attempt == 2
    with pytest.raises(ReceiptHandleError):
        pops.change_invisible_duration("g", handle, 5_000)
    visible_now = pops.change_invisible_duration("g", again.receipt_handle, 0)
    [third] = await pops.pop("g", "t", 1, 10_000)
    assert third.delivery_attempt == 3
    with pytest.raises(ReceiptHandleError):
        pops.ack("g", visible_now)
    pops.ack("g", third.receipt_handle)
    with pytest.raises(ReceiptHandleError, match="already acked") as refused:
        pops.change_invisible_duration("g", third.receipt_handle, 5_000)
    assert refused.value.problem is ReceiptHandleProblem.ALREADY_ACKED


async def send_fifo(broker, producer, topic, pairs):
    for message_group, body in pairs:
        await producer.send(topic, body, sharding_key=message_group, properties={PROPERTY_MESSAGE_GROUP: message_group})
    await broker.store.wait_visible()


async def test_fifo_hands_out_one_message_per_group_until_it_is_acked(make_broker):
    broker, pops, clock, producer = await setup(make_broker, message_type=MessageType.FIFO)
    pairs = [(group, f"{group}{n}".encode()) for n in range(1, 4) for group in "ABC"]  # A1 B1 C1 A2 B2 C2 ...
    await send_fifo(broker, producer, "t", pairs)
    first = await pops.pop("g", "t", 32, 10_000)
    assert bodies_of(first) == [b"A1", b"B1", b"C1"]
    assert await pops.pop("g", "t", 32, 10_000) == []
    by_body = {p.message.body: p for p in first}
    pops.ack("g", by_body[b"A1"].receipt_handle)
    assert bodies_of(await pops.pop("g", "t", 32, 10_000)) == [b"A2"]
    clock.advance(10)  # B1 and C1 expire; A2 too
    again = await pops.pop("g", "t", 32, 10_000)
    assert sorted(bodies_of(again)) == [b"A2", b"B1", b"C1"]
    assert {p.delivery_attempt for p in again} == {2}
    assert await pops.pop("g", "t", 32, 10_000) == []
    for p in again:
        pops.ack("g", p.receipt_handle)
    assert sorted(bodies_of(await pops.pop("g", "t", 32, 10_000))) == [b"A3", b"B2", b"C2"]
    assert broker.query_offset("g", "t", 0) == 4  # A1 B1 C1 A2 acked; B2 (offset 4) is not


async def test_fifo_messages_without_a_group_are_not_ordered(make_broker):
    broker, pops, _clock, producer = await setup(make_broker, message_type=MessageType.FIFO)
    await send_all(broker, producer, "t", [b"1", b"2", b"3"])
    assert bodies_of(await pops.pop("g", "t", 32, 10_000)) == [b"1", b"2", b"3"]


async def test_an_orderly_group_gets_fifo_order_on_a_normal_topic(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    broker.groups.create_or_update(SubscriptionGroupConfig("orderly", consume_message_orderly=True))
    await send_fifo(broker, producer, "t", [("A", b"A1"), ("A", b"A2")])
    assert bodies_of(await pops.pop("orderly", "t", 32, 10_000)) == [b"A1"]
    assert bodies_of(await pops.pop("plain", "t", 32, 10_000)) == [b"A1", b"A2"]


@pytest.mark.parametrize("seed", range(12))
async def test_fifo_order_and_at_least_once_under_random_acks_and_expiries(make_broker, seed):
    rng = random.Random(seed)
    broker, pops, clock, producer = await setup(make_broker, queues=2, message_type=MessageType.FIFO)
    groups = ["A", "B", "C", "D", "E"]
    pairs = []
    for n in range(60):
        group = rng.choice(groups)
        pairs.append((group, f"{group}:{n}".encode()))
    await send_fifo(broker, producer, "t", pairs)
    sent = {group: [body for g, body in pairs if g == group] for group in groups}
    acked: dict[str, list[bytes]] = {group: [] for group in groups}
    in_flight: dict[bytes, str] = {}  # body -> receipt handle
    redelivered = 0
    for _ in range(400):
        action = rng.random()
        if action < 0.5:
            for p in await pops.pop("g", "t", rng.randint(1, 8), 10_000):
                group, body = p.message.properties[PROPERTY_MESSAGE_GROUP], p.message.body
                assert body not in acked[group], "an acked message was delivered again"
                # The message handed out is always the first of its group not acked yet...
                assert body == sent[group][len(acked[group])]
                # ...and nothing else of its group is out at the same time (its older handle, if any, expired).
                assert not any(b != body and g == group for b, g in _groups(in_flight, pairs))
                in_flight[body] = p.receipt_handle
                redelivered += p.delivery_attempt > 1
        elif action < 0.8 and in_flight:
            body = rng.choice(sorted(in_flight))
            pops.ack("g", in_flight.pop(body))
            group = body.decode().split(":")[0]
            acked[group].append(body)
        else:
            clock.advance(rng.choice([1, 5, 11]))
            # Expired messages stay in `in_flight` until popped again: their handles still ack them.
    for handle in list(in_flight.values()):
        pops.ack("g", handle)
    for body in in_flight:
        group = body.decode().split(":")[0]
        acked[group].append(body)
    clock.advance(60)
    while batch := await pops.pop("g", "t", 32, 10_000):
        for p in batch:
            group = p.message.properties[PROPERTY_MESSAGE_GROUP]
            assert p.message.body == sent[group][len(acked[group])]
            acked[group].append(p.message.body)
            pops.ack("g", p.receipt_handle)
    assert acked == sent  # every message acked, each group in send order
    assert redelivered > 0
    assert sum(broker.query_offset("g", "t", q) for q in range(2)) == 60


def _groups(in_flight, pairs):
    group_of = {body: group for group, body in pairs}
    return [(body, group_of[body]) for body in in_flight]


async def test_tag_filter_applies_to_pop_and_skipped_messages_count_as_done(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    for n, tag in enumerate(["a", "b", "a", "c"]):
        await producer.send("t", b"%d" % n, tags=tag)
    await broker.store.wait_visible()
    popped = await pops.pop("g", "t", 32, INVISIBLE_MS, build_filter("TAG", "a || c"))
    assert bodies_of(popped) == [b"0", b"2", b"3"]
    for p in popped:
        pops.ack("g", p.receipt_handle)
    assert broker.query_offset("g", "t", 0) == 4


async def test_sql92_filter_applies_to_pop(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    for n in range(6):
        await producer.send("t", b"%d" % n, properties={"n": str(n)})
    await broker.store.wait_visible()
    popped = await pops.pop("g", "t", 32, INVISIBLE_MS, build_filter("SQL92", "n > 3"))
    assert bodies_of(popped) == [b"4", b"5"]
    assert broker.query_offset("g", "t", 0) == 4  # 0..3 were skipped: done


async def test_long_poll_returns_when_a_message_arrives(make_broker):
    _broker, pops, _clock, producer = await setup(make_broker, queues=2)
    waiting = asyncio.ensure_future(pops.pop("g", "t", 4, INVISIBLE_MS, long_poll_ms=15_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await producer.send("t", b"late")
    popped = await asyncio.wait_for(waiting, 10)
    assert bodies_of(popped) == [b"late"]


async def test_long_poll_returns_when_an_ack_frees_the_next_fifo_message(make_broker):
    broker, pops, _clock, producer = await setup(make_broker, message_type=MessageType.FIFO)
    await send_fifo(broker, producer, "t", [("A", b"A1"), ("A", b"A2")])
    [first] = await pops.pop("g", "t", 4, INVISIBLE_MS)
    waiting = asyncio.ensure_future(pops.pop("g", "t", 4, INVISIBLE_MS, long_poll_ms=15_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    pops.ack("g", first.receipt_handle)
    assert bodies_of(await asyncio.wait_for(waiting, 10)) == [b"A2"]


async def test_long_poll_picks_up_a_message_whose_invisible_time_passes(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    pops = PopService(broker)  # the real clock: the wait must end at the message's deadline
    await send_all(broker, Producer(broker), "t", [b"x"])
    [_first] = await pops.pop("g", "t", 1, 200)
    again = await asyncio.wait_for(pops.pop("g", "t", 1, 10_000, long_poll_ms=15_000), 10)
    assert [(p.message.body, p.delivery_attempt) for p in again] == [(b"x", 2)]


async def test_a_new_group_starts_at_the_first_message_of_an_untrimmed_queue(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"old-1", b"old-2"])
    assert broker.query_offset("new", "t", 0) == -1
    assert bodies_of(await pops.pop("new", "t", 32, INVISIBLE_MS)) == [b"old-1", b"old-2"]
    assert broker.query_offset("new", "t", 0) == 0


async def test_an_offset_reset_restarts_delivery_from_there(make_broker):
    broker, pops, _clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"0", b"1", b"2", b"3"])
    popped = await pops.pop("g", "t", 2, INVISIBLE_MS)
    broker.offsets.reset_offsets("g", "t", {0: 3})
    assert bodies_of(await pops.pop("g", "t", 32, INVISIBLE_MS)) == [b"3"]
    pops.ack("g", popped[0].receipt_handle)  # below the new offset: already done
    assert broker.query_offset("g", "t", 0) == 3


async def test_bad_and_foreign_receipt_handles_are_refused(make_broker):
    broker, pops, clock, producer = await setup(make_broker)
    await send_all(broker, producer, "t", [b"x"])
    [popped] = await pops.pop("g", "t", 1, INVISIBLE_MS)
    cases = {
        "nonsense": (ReceiptHandleProblem.MALFORMED, "does not start with 'mqg1:'"),
        "mqg1:abc:1": (ReceiptHandleProblem.MALFORMED, "3 ':'-separated fields"),
        "mqg1:abc:x:1:0:0:t:g": (ReceiptHandleProblem.MALFORMED, "delivery id 'x'"),
    }
    for text, (problem, message) in cases.items():
        with pytest.raises(ReceiptHandleError, match=message) as refused:
            pops.ack("g", text)
        assert refused.value.problem is problem
    with pytest.raises(ReceiptHandleError, match="belongs to group 'g', not 'h'") as refused:
        pops.ack("h", popped.receipt_handle)
    assert refused.value.problem is ReceiptHandleProblem.OTHER_GROUP
    with pytest.raises(ReceiptHandleError, match="broker restarted") as refused:
        PopService(broker, clock).ack("g", popped.receipt_handle)
    assert refused.value.problem is ReceiptHandleProblem.OTHER_RUN
    forged = ReceiptHandle.decode(popped.receipt_handle)
    for wrong in (
        ReceiptHandle(forged.run, forged.delivery_id, 1, 3, 0, "t", "g"),  # a queue never popped
        ReceiptHandle(forged.run, forged.delivery_id, 1, 0, 7, "t", "g"),  # an offset never delivered
    ):
        with pytest.raises(ReceiptHandleError) as refused:
            pops.ack("g", wrong.encode())
        assert refused.value.problem is ReceiptHandleProblem.NOT_IN_FLIGHT
    pops.ack("g", popped.receipt_handle)  # none of the above disturbed the real one


async def test_pop_arguments_are_checked(make_broker):
    _broker, pops, _clock, _producer = await setup(make_broker)
    for max_nums in (0, MAX_POP_BATCH + 1):
        with pytest.raises(PopRequestError, match=f"max_nums {max_nums}"):
            await pops.pop("g", "t", max_nums, INVISIBLE_MS)
    with pytest.raises(PopRequestError, match="invisible time -1 ms"):
        await pops.pop("g", "t", 1, -1)


async def test_the_shared_service_is_one_per_broker(make_broker, tmp_path):
    broker = await make_broker()
    assert PopService.of(broker) is PopService.of(broker)
    assert PopService.of(broker) is not PopService(broker)
    other = await make_broker(tmp_path / "other")
    assert PopService.of(other) is not PopService.of(broker)
    assert PopService.of(other).broker is other


def test_a_shared_service_goes_with_its_broker(tmp_path):
    """The broker keeps its shared services (Broker.shared); a broker no longer referenced takes them with it."""
    store = open_broker_store(tmp_path)
    try:
        broker = Broker(store, tmp_path / "config")
        service = weakref.ref(PopService.of(broker))
        assert service() is PopService.of(broker)
        del broker
        gc.collect()
        assert service() is None
    finally:
        store.close()
