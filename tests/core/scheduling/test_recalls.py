"""Recalls (core/scheduling/recalls.py): a timer or delay-level message recalled before it is due never reaches its
topic, also across a clean restart and a SIGKILL, while one sent beside it arrives; a recall once it is due, of a
malformed handle, of another topic or broker is refused with its RecallProblem; a recall that could not be recorded
is refused and its message arrives; and recalls are forgotten only once both services are durably past them."""

import asyncio
import json

import pytest

from core import (
    ConfigFileError,
    LocalTransactionState,
    Producer,
    RecallError,
    RecallProblem,
    TopicNotFoundError,
    TransactionProducer,
)
from core.clock import ManualClock
from core.scheduling.recall_handle import RecallHandle, decode_recall_handle
from tests.core.child_broker import run_killed_child
from tests.core.reading import eventually, everything_in

START_MS = 1_800_000_000_000
TIMER = {"TIMER_DELAY_SEC": "10"}
DELAY = {"DELAY": "2"}  # the second level: 5 s
DUE_MS = {"timer": 10_000, "delay": 5_000}


async def bodies_in(broker, topic):
    return [message.body for message in await everything_in(broker, topic)]


async def broker_with_topic(make_broker, directory, clock):
    broker = await make_broker(directory, clock=clock)
    broker.create_topic("t", queue_nums=1)
    return broker


@pytest.mark.parametrize("kind", ["timer", "delay"])
async def test_a_message_recalled_before_it_is_due_never_arrives_and_its_neighbour_does(make_broker, tmp_path, kind):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    producer = Producer(broker)
    properties = TIMER if kind == "timer" else DELAY
    recalled = await producer.send("t", b"recalled", properties=properties)
    kept = await producer.send("t", b"kept", properties=properties)
    handle = decode_recall_handle(recalled.recall_handle)
    assert handle == RecallHandle("t", "broker-a", START_MS + DUE_MS[kind], recalled.msg_id)
    clock.advance(DUE_MS[kind] / 1000 - 0.001)
    assert await broker.recall_message("t", recalled.recall_handle) == recalled.msg_id
    # A second recall before it is due answers the same, as RocketMQ's.
    assert await broker.recall_message("t", recalled.recall_handle) == recalled.msg_id
    clock.advance(0.001)
    await eventually(lambda: broker.max_offset("t", 0) == 1)
    await asyncio.sleep(0.1)  # the recalled one would show up now
    assert await bodies_in(broker, "t") == [b"kept"]
    with pytest.raises(RecallError, match="now is past it") as refused:
        await broker.recall_message("t", kept.recall_handle)
    assert refused.value.problem is RecallProblem.NOT_PENDING
    if kind == "delay":
        assert broker.schedule.offsets() == {2: 2}  # the level moved past both


async def test_only_delay_level_and_timer_messages_get_a_handle(make_broker, tmp_path):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    producer = Producer(broker)
    assert (await producer.send("t", b"plain")).recall_handle == ""
    assert (await producer.send("t", b"past", properties={"TIMER_DELIVER_MS": str(START_MS - 1)})).recall_handle == ""
    assert (await producer.send("t", b"no delay", properties={"DELAY": "0"})).recall_handle == ""
    [batch] = await producer.send_batch("t", [b"batch"])
    assert batch.recall_handle == ""
    transactions = TransactionProducer(broker, "tx-g", lambda check: LocalTransactionState.ROLLBACK_MESSAGE)
    await transactions.start()
    rollback = LocalTransactionState.ROLLBACK_MESSAGE
    half = await transactions.send_message_in_transaction("t", b"tx", lambda message, arg: rollback)
    assert half.recall_handle == ""
    timer = await producer.send("t", b"timer", properties={"TIMER_DELIVER_MS": str(START_MS + 1)})
    assert decode_recall_handle(timer.recall_handle).due_ms == START_MS + 1


async def test_refused_recalls_say_why_and_recall_nothing(make_broker, tmp_path):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    broker.create_topic("other", queue_nums=1)
    sent = await Producer(broker).send("t", b"x", properties=TIMER)
    fields = decode_recall_handle(sent.recall_handle)

    async def refused(topic, handle):
        with pytest.raises(RecallError) as error:
            await broker.recall_message(topic, handle)
        return error.value.problem, str(error.value)

    assert (await refused("t", "garbage!"))[0] is RecallProblem.MALFORMED
    assert (await refused("t", ""))[0] is RecallProblem.MALFORMED
    problem, message = await refused("other", sent.recall_handle)
    assert problem is RecallProblem.OTHER_TOPIC and "topic 't', not 'other'" in message
    elsewhere = RecallHandle("t", "broker-b", fields.due_ms, fields.unique_id).encode()
    assert (await refused("t", elsewhere))[0] is RecallProblem.OTHER_BROKER
    too_far = RecallHandle("t", "broker-a", START_MS + 31 * 24 * 3600_000, fields.unique_id).encode()
    problem, message = await refused("t", too_far)
    assert problem is RecallProblem.NOT_PENDING and "further ahead" in message
    with pytest.raises(TopicNotFoundError):
        await broker.recall_message("nowhere", sent.recall_handle)
    assert len(broker.recalls) == 0
    clock.advance(10)
    await eventually(lambda: broker.max_offset("t", 0) == 1)


async def test_a_recall_holds_across_a_restart_and_is_forgotten_once_both_services_are_past_it(make_broker, tmp_path):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    producer = Producer(broker)
    sent = {}
    for kind, properties in (("timer", TIMER), ("delay", DELAY)):
        for body in (b"recalled", b"kept"):
            sent[kind, body] = await producer.send("t", b"%s %s" % (kind.encode(), body), properties=properties)
    for kind in ("timer", "delay"):
        await broker.recall_message("t", sent[kind, b"recalled"].recall_handle)
    await broker.close()
    broker.store.close()
    later = ManualClock(START_MS + 3600_000)  # both due while the broker was down
    again = await broker_with_topic(make_broker, tmp_path, later)
    assert len(again.recalls) == 2
    await eventually(lambda: again.max_offset("t", 0) == 2)
    await asyncio.sleep(0.1)
    assert sorted(await bodies_in(again, "t")) == [b"delay kept", b"timer kept"]
    # Both services have moved past them and say so in their files: the recalls can go.
    await eventually(lambda: again.timers.wheel.firing is None and len(again.timers.wheel) == 0)
    again.schedule.persist()
    again.timers.persist()
    later.advance(120)  # past the services' slack for a clock stepped back
    again.timers.persist()
    assert await again.recalls.prune(again._recalls_settled_before()) == 2
    assert (tmp_path / "config" / "recalls.jsonl").read_text() == ""


async def test_a_recall_of_a_message_not_yet_due_is_kept_when_others_are_forgotten(make_broker, tmp_path):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    producer = Producer(broker)
    soon = await producer.send("t", b"soon", properties={"TIMER_DELAY_SEC": "1"})
    late = await producer.send("t", b"late", properties={"TIMER_DELAY_SEC": "3600"})
    for sent in (soon, late):
        await broker.recall_message("t", sent.recall_handle)
    clock.advance(600)
    wheel = broker.timers.wheel
    await eventually(lambda: wheel.fired_through >= (START_MS + 1000) // 1000 and wheel.firing is None)
    broker.timers.persist()
    broker.schedule.persist()
    assert await broker.recalls.prune(broker._recalls_settled_before()) == 1
    assert ("t", late.msg_id) in broker.recalls and ("t", soon.msg_id) not in broker.recalls
    assert [json.loads(line)[1] for line in (tmp_path / "config" / "recalls.jsonl").read_text().splitlines()] == [
        late.msg_id
    ]
    clock.advance(3600)
    await asyncio.sleep(0.1)
    await broker.wait_visible()
    assert broker.max_offset("t", 0) == 0


async def test_a_recall_that_cannot_be_recorded_is_refused_and_its_message_arrives(make_broker, tmp_path):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    sent = await Producer(broker).send("t", b"x", properties=TIMER)
    journal = tmp_path / "config" / "recalls.jsonl"
    journal.unlink()
    journal.mkdir()  # the journal cannot be opened for writing, even by root
    with pytest.raises(ConfigFileError, match="cannot be written"):
        await broker.recall_message("t", sent.recall_handle)
    assert len(broker.recalls) == 0
    clock.advance(10)
    await eventually(lambda: broker.max_offset("t", 0) == 1)
    journal.rmdir()


async def test_recalls_racing_their_due_time_are_either_answered_ok_and_dropped_or_refused_and_delivered(
    make_broker, tmp_path
):
    clock = ManualClock(START_MS)
    broker = await broker_with_topic(make_broker, tmp_path, clock)
    producer = Producer(broker)
    sent = []
    for n in range(40):
        properties = {"TIMER_DELIVER_MS": str(START_MS + 1000 + n)} if n % 2 else {"DELAY": "1"}
        sent.append(await producer.send("t", b"m%d" % n, properties=properties))
        if n % 2 == 0:
            clock.advance(0.001)  # delay level 1: due 1 s after each send, 1 ms apart

    async def recall(result):
        await asyncio.sleep(0)
        try:
            await broker.recall_message("t", result.recall_handle)
        except RecallError as exc:
            assert exc.problem is RecallProblem.NOT_PENDING
            return False
        return True

    clock.set(START_MS + 1000)
    answers = asyncio.gather(*(recall(result) for result in sent))
    for _ in range(40):  # the clock moves on while the recalls are written and the services fire
        clock.advance(0.001)
        await asyncio.sleep(0)
    recalled = await answers
    clock.advance(5)
    await eventually(lambda: broker.max_offset("t", 0) == recalled.count(False))
    await asyncio.sleep(0.1)
    arrived = {message.unique_id for message in await everything_in(broker, "t")}
    assert arrived == {result.msg_id for result, ok in zip(sent, recalled, strict=True) if not ok}


async def test_a_recall_answered_before_a_sigkill_holds_after_it(make_broker, tmp_path):
    total = 200
    output = run_killed_child(
        tmp_path,
        f"""
        broker = await open_broker(directory, BrokerConfig(), flush_mode="SYNC_FLUSH")
        broker.create_topic("t", queue_nums=1)
        producer = Producer(broker)
        due = str(broker.clock.now_ms() + 8000)
        sent = [await producer.send("t", b"m%d" % n, properties={{"TIMER_DELIVER_MS": due}}) for n in range({total})]
        for result in sent:
            print("sent", result.msg_id, flush=True)
        recalled = []
        kill_when(lambda: len(recalled) >= 60)

        async def recall(result):
            await broker.recall_message("t", result.recall_handle)
            print("recalled", result.msg_id, flush=True)
            recalled.append(result)

        # Every other message, ten recalls at a time: the kill comes while some are being written.
        for start in range(0, {total}, 20):
            await asyncio.gather(*(recall(result) for result in sent[start : start + 20 : 2]))
        """,
    )
    lines = [line.split() for line in output.splitlines()]
    sent = [words[1] for words in lines if words[0] == "sent"]
    recalled = {words[1] for words in lines if words[0] == "recalled"}
    assert len(sent) == total and len(recalled) >= 60
    tried = set(sent[: 2 * len(recalled) + 40 : 2])  # at most the batches under way at the kill were tried
    broker = await make_broker(tmp_path)
    await eventually(lambda: broker.max_offset("t", 0) >= total - len(tried), timeout=60)
    await asyncio.sleep(1.0)  # a recalled message that arrives anyway would show up now
    arrived = {message.unique_id for message in await everything_in(broker, "t")}
    assert not arrived & recalled
    assert arrived >= set(sent) - tried
