"""Broker.dead_letters on real stores: listing a group's dead letters a page at a time, resending one (by unique id,
by offset message id), a time range or all of them to their original topic as fresh messages, never twice."""

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core import (
    GroupNotFoundError,
    IllegalArgumentError,
    MessageNotFoundError,
    Producer,
    PullConsumer,
    PullStatus,
    ResendStatus,
)
from core.client import ConsumeFromWhere
from core.system_topics import (
    PROPERTY_DLQ_REASON,
    PROPERTY_MOVED_FROM,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    dlq_topic,
)
from tests.core.conftest import SMALL_STORE
from tests.core.dead_letter_fixtures import record_of, send_dead_letter

ROOT = Path(__file__).resolve().parents[3]

BIG = b"a dead letter with a long body " * 300  # over 4 KiB: stored compressed


async def read_topic(broker, topic):
    """Every message of `topic`, as a consumer sees it, queue by queue."""
    await broker.wait_visible()
    consumer = PullConsumer(broker, "auditor", consume_from=ConsumeFromWhere.FIRST_OFFSET)
    messages = []
    for queue in consumer.fetch_queues(topic):
        offset = 0
        while True:
            got = await consumer.pull(queue, offset, max_nums=64)
            if got.status is not PullStatus.FOUND:
                break
            messages += got.messages
            offset = got.next_begin_offset
    return messages


async def dead_letters(broker, count, topic="orders", group="g", pause_after=None):
    """`count` messages sent to `topic` and dead-lettered for `group`: (send result, dead-letter send result)."""
    if not broker.has_topic(topic):
        broker.create_topic(topic, queue_nums=4)
    producer = Producer(broker)
    made = []
    for n in range(count):
        body = BIG if n == 0 else b"body-%d" % n
        sent = await producer.send(topic, body, tags=f"t{n % 2}", keys=[f"k{n}", "all"], properties={"n": str(n)})
        dead = await send_dead_letter(broker, group, record_of(broker, sent), reason=f"failed {n}")
        made.append((sent, dead))
        if pause_after is not None and n == pause_after:
            await asyncio.sleep(0.02)
    await broker.wait_visible()
    return made


async def test_list_pages_through_dead_letters_with_their_story(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 5)
    page = await broker.dead_letters.list_page("g", limit=2)
    letters = list(page.letters)
    while page.next_offset is not None:
        page = await broker.dead_letters.list_page("g", start_offset=page.next_offset, limit=2)
        letters += page.letters
    assert len(letters) == 5
    for n, (letter, (sent, dead)) in enumerate(zip(letters, made, strict=True)):
        assert letter.message.body == (BIG if n == 0 else b"body-%d" % n)
        assert letter.offset_msg_id == dead.offset_msg_id and letter.unique_id == sent.msg_id
        assert letter.original_topic == "orders" and letter.origin_message_id == sent.offset_msg_id
        assert letter.reason == f"failed {n}" and letter.message.reconsume_times == 16
        assert letter.message.tags == f"t{n % 2}" and letter.message.properties["n"] == str(n)
        assert not letter.resent


async def test_list_keeps_to_the_time_range(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 6, pause_after=2)
    later = record_of(broker, made[3][1]).store_timestamp
    page = await broker.dead_letters.list_page("g", begin_ms=later)
    assert [letter.message.properties["n"] for letter in page.letters] == ["3", "4", "5"]
    page = await broker.dead_letters.list_page("g", end_ms=later - 1)
    assert [letter.message.properties["n"] for letter in page.letters] == ["0", "1", "2"]
    assert page.next_offset is None


async def test_list_refuses_what_it_cannot_answer(make_broker):
    broker = await make_broker()
    await dead_letters(broker, 1)
    with pytest.raises(GroupNotFoundError, match="consumer group 'nobody' does not exist and has no dead letters"):
        await broker.dead_letters.list_page("nobody")
    for limit in (0, 1001):
        with pytest.raises(IllegalArgumentError, match=f"page size {limit} is out of range"):
            await broker.dead_letters.list_page("g", limit=limit)
    with pytest.raises(IllegalArgumentError, match="begins at 9 ms, after its end at 1 ms"):
        await broker.dead_letters.list_page("g", begin_ms=9, end_ms=1)


async def test_resend_one_makes_a_fresh_message_for_the_group_alone(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 3)
    sent, dead = made[0]
    summary = await broker.dead_letters.resend_by_unique_id("g", sent.msg_id)
    [outcome] = summary.outcomes
    assert outcome.status is ResendStatus.RESENT and outcome.topic == "%RETRY%g"
    assert outcome.dead_letter_id == dead.offset_msg_id and outcome.unique_id == sent.msg_id
    await broker.wait_visible()
    copy = broker.queries.by_offset_id(outcome.new_message_id)
    assert copy.topic == "%RETRY%g" and copy.properties[PROPERTY_RETRY_TOPIC] == "orders"
    assert copy.body == BIG and copy.unique_id == sent.msg_id
    assert copy.tags == "t0" and copy.keys == ["k0", "all"] and copy.properties["n"] == "0"
    assert copy.reconsume_times == 0
    for gone in (PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_DLQ_REASON):
        assert gone not in copy.properties
    assert copy.properties[PROPERTY_MOVED_FROM] == str(dead.commit_log_offset)
    # The group's members get it from their retry topic (under "orders"); other groups of "orders" do not.
    assert [m.body for m in await read_topic(broker, "%RETRY%g")] == [BIG]
    assert [m.body for m in await read_topic(broker, "orders")].count(BIG) == 1
    # Again: already resent, nothing stored.
    again = await broker.dead_letters.resend_by_offset_id("g", dead.offset_msg_id)
    assert [o.status for o in again.outcomes] == [ResendStatus.ALREADY_RESENT]
    # It names the topic the copy went to, as the first resend did.
    assert [o.topic for o in again.outcomes] == [outcome.topic] == ["%RETRY%g"]
    assert len(await read_topic(broker, "%RETRY%g")) == 1
    page = await broker.dead_letters.list_page("g")
    assert [letter.resent for letter in page.letters] == [True, False, False]


async def test_resend_by_offset_id_takes_only_the_groups_dead_letters(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 1)
    sent, dead = made[0]
    with pytest.raises(MessageNotFoundError, match="names a message of topic 'orders', not a dead letter of group"):
        await broker.dead_letters.resend_by_offset_id("g", sent.offset_msg_id)
    await send_dead_letter(broker, "h", record_of(broker, sent))
    with pytest.raises(MessageNotFoundError, match=f"not a dead letter of group 'h' \\('{dlq_topic('h')}'\\)"):
        await broker.dead_letters.resend_by_offset_id("h", dead.offset_msg_id)
    with pytest.raises(IllegalArgumentError, match="'nonsense' is not an offset message id"):
        await broker.dead_letters.resend_by_offset_id("g", "nonsense")
    with pytest.raises(MessageNotFoundError, match="no dead letter with unique id 'FFFF'"):
        await broker.dead_letters.resend_by_unique_id("g", "FFFF")


async def test_resend_a_range_then_all_resends_each_once(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 8, pause_after=3)
    first_late = record_of(broker, made[4][1]).store_timestamp
    early = await broker.dead_letters.resend_range("g", 0, first_late - 1)
    assert [o.unique_id for o in early.resent] == [sent.msg_id for sent, _ in made[:4]]
    everything = await broker.dead_letters.resend_all("g")
    assert [o.unique_id for o in everything.already_resent] == [sent.msg_id for sent, _ in made[:4]]
    assert [o.unique_id for o in everything.resent] == [sent.msg_id for sent, _ in made[4:]]
    assert not everything.failed and everything.stopped is None
    messages = await read_topic(broker, "%RETRY%g")
    resent = [m for m in messages if PROPERTY_MOVED_FROM in m.properties]
    assert sorted(m.unique_id for m in resent) == sorted(sent.msg_id for sent, _ in made)
    assert {m.properties[PROPERTY_RETRY_TOPIC] for m in resent} == {"orders"}
    assert (await broker.dead_letters.resend_all("g")).resent == []


async def test_a_sharding_key_keeps_resent_letters_in_one_queue(make_broker):
    broker = await make_broker()
    broker.create_topic("fifo", queue_nums=4)
    producer = Producer(broker)
    for n in range(6):
        sent = await producer.send("fifo", b"step %d" % n, sharding_key="order-42")
        await send_dead_letter(broker, "g", record_of(broker, sent))
    await broker.wait_visible()
    summary = await broker.dead_letters.resend_all("g")
    assert len(summary.resent) == 6
    resent = [m for m in await read_topic(broker, "%RETRY%g") if PROPERTY_MOVED_FROM in m.properties]
    assert len({m.queue_id for m in resent}) == 1
    assert [m.body for m in sorted(resent, key=lambda m: m.queue_offset)] == [b"step %d" % n for n in range(6)]


async def test_failures_are_reported_and_do_not_hold_back_the_others(make_broker):
    broker = await make_broker()
    made = await dead_letters(broker, 2)
    await dead_letters(broker, 1, topic="doomed")
    orphan = record_of(broker, made[0][0])
    orphan.properties.pop("UNIQ_KEY")
    orphan.properties["RETRY_TOPIC"] = ""
    await send_dead_letter(broker, "g", orphan)
    broker.delete_topic("doomed")
    await broker.wait_visible()
    summary = await broker.dead_letters.resend_all("g")
    assert [o.status for o in summary.outcomes] == [
        ResendStatus.RESENT,
        ResendStatus.RESENT,
        ResendStatus.FAILED,
        ResendStatus.FAILED,
    ]
    assert "topic 'doomed' no longer exists; create it again to resend" in summary.outcomes[2].reason
    assert "no RETRY_TOPIC property" in summary.outcomes[3].reason
    assert not broker.has_topic("doomed")  # not created again by the resend


CRASH_LETTERS = 40


@pytest.mark.parametrize("kill_after", [1, 25])
async def test_a_resend_killed_midway_and_repeated_resends_each_dead_letter_once(make_broker, tmp_path, kill_after):
    # The child dead-letters 40 messages, then resends them all and is SIGKILLed once `kill_after` copies are in
    # the log (its stored listener kills it: a batch of copies may be partly heard). The parent repeats the resend.
    code = textwrap.dedent(f"""
        import asyncio, os, signal
        from pathlib import Path
        from core import Broker, MessageStore, Producer, StoreConfig
        from core.tables.subscription_group import SubscriptionGroupConfig
        from core.system_topics import PROPERTY_MOVED_FROM
        from tests.core.dead_letter_fixtures import record_of, send_dead_letter

        async def main():
            directory = Path({str(tmp_path)!r})
            store = MessageStore(StoreConfig(store_dir=directory / "store", **{SMALL_STORE!r}))
            store.open()
            broker = Broker(store, directory / "config")
            await broker.start()
            broker.create_topic("orders", queue_nums=4)
            # Four retry queues: the copies go out in four batches, so a kill can fall between two.
            broker.groups.create_or_update(SubscriptionGroupConfig("g", retry_queue_nums=4))
            producer = Producer(broker)
            for n in range({CRASH_LETTERS}):
                sent = await producer.send("orders", b"m%d" % n, keys="k%d" % n)
                await send_dead_letter(broker, "g", record_of(broker, sent))
            copies = 0

            def listener(message, result):
                nonlocal copies
                if PROPERTY_MOVED_FROM in message.properties:
                    copies += 1
                    if copies >= {kill_after}:
                        os.kill(os.getpid(), signal.SIGKILL)

            broker.add_stored_listener(listener)
            await broker.dead_letters.resend_all("g")
            print("finished", flush=True)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert "finished" not in done.stdout
    broker = await make_broker(tmp_path)
    assert broker.store.recovery.clean is False
    letters = (await broker.dead_letters.list_page("g", limit=100)).letters
    assert len(letters) == CRASH_LETTERS
    resent_before = sum(letter.resent for letter in letters)
    assert kill_after <= resent_before < CRASH_LETTERS
    summary = await broker.dead_letters.resend_all("g")
    assert len(summary.already_resent) == resent_before and not summary.failed
    assert len(summary.resent) == CRASH_LETTERS - resent_before
    copies = [m for m in await read_topic(broker, "%RETRY%g") if PROPERTY_MOVED_FROM in m.properties]
    assert sorted(m.unique_id for m in copies) == sorted(letter.unique_id for letter in letters)
    assert sorted(int(m.properties[PROPERTY_MOVED_FROM]) for m in copies) == sorted(
        letter.message.commit_log_offset for letter in letters
    )
    assert sorted(m.body for m in copies) == sorted(b"m%d" % n for n in range(CRASH_LETTERS))
    assert len((await broker.dead_letters.resend_all("g")).already_resent) == CRASH_LETTERS
    # The index the child built, recovered: each message's story found by its unique id, its copy resent once.
    for letter in letters[:: CRASH_LETTERS // 4]:
        story = broker.queries.by_unique_id("orders", letter.unique_id, group="g")
        assert [m.topic for m in story] == ["orders", dlq_topic("g"), "%RETRY%g"]
        assert story[1].offset_msg_id == letter.offset_msg_id
        assert story[2].properties[PROPERTY_MOVED_FROM] == str(letter.message.commit_log_offset)
