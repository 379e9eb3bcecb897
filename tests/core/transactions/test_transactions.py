"""Transactional messages on one broker with a ManualClock: half messages are invisible, commit shows a message once,
rollback never, undecided halves are checked back with a live producer of their group after the transaction timeout
and then every check interval, at most transaction_check_max times, after which they go to
TRANS_CHECK_MAX_TIME_TOPIC with a warning. Restarts are in test_transaction_crash.py."""

import asyncio
import logging

import pytest

from core import (
    BrokerConfig,
    IllegalArgumentError,
    IllegalMessageError,
    LocalTransactionState,
    Producer,
    SendStatus,
    TransactionCheck,
    TransactionProducer,
)
from core.clock import ManualClock
from core.errors import ServiceNotAvailableError
from core.store.message import SYSFLAG_TRANSACTION_COMMIT, SYSFLAG_TRANSACTION_MASK
from core.system_topics import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_MOVED_FROM,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    TRANS_CHECK_GROUP,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from tests.core.reading import everything_in, settle, until
from tests.core.refusing_store import FILLER_MB, refusing_broker

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


def answers(state):
    return lambda message, arg: state


@pytest.fixture
async def transactions(make_broker):
    """A broker on a ManualClock with the RocketMQ defaults (6 s, 30 s, 15 checks) and a started producer whose
    checker answers what `answer` holds and records each check."""
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    broker.create_topic("orders", queue_nums=2)
    checks: list = []
    answer = {"state": COMMIT}

    def checker(message):
        checks.append(message)
        return answer["state"]

    producer = TransactionProducer(broker, "pg-orders", checker)
    await producer.start()
    yield broker, clock, producer, checks, answer
    await producer.shutdown()


async def test_commit_shows_the_message_once_with_its_body_keys_tags_and_properties(transactions):
    broker, _, producer, checks, _ = transactions
    seen = []
    result = await producer.send_message_in_transaction(
        "orders",
        b"order 17",
        lambda message, arg: seen.append((message, arg)) or COMMIT,
        arg="context",
        tags="created",
        keys=["o-17", "shop-3"],
        properties={"region": "eu"},
    )
    assert result.status is SendStatus.SEND_OK and result.local_transaction_state is COMMIT
    [(local, arg)] = seen
    assert arg == "context" and local.topic == "orders" and local.body == b"order 17"
    assert local.properties[PROPERTY_TRANSACTION_ID] == result.transaction_id == result.msg_id
    [message] = await everything_in(broker, "orders")
    assert (message.body, message.tags, message.keys, message.properties["region"]) == (
        b"order 17",
        "created",
        ["o-17", "shop-3"],
        "eu",
    )
    assert message.unique_id == result.msg_id and message.queue_id == result.message_queue.queue_id
    assert "TRAN_MSG" not in message.properties and message.properties["PGROUP"] == "pg-orders"
    assert message.sys_flag & SYSFLAG_TRANSACTION_MASK == SYSFLAG_TRANSACTION_COMMIT
    assert message.properties[PROPERTY_MOVED_FROM] == str(result.commit_log_offset)
    [half] = await everything_in(broker, TRANS_HALF_TOPIC)
    [op] = await everything_in(broker, TRANS_OP_HALF_TOPIC)
    assert (op.tags, op.body) == ("d", str(half.queue_offset).encode())
    assert half.properties[PROPERTY_REAL_TOPIC] == "orders" and half.commit_log_offset == result.commit_log_offset
    assert broker.query_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0) == 1
    assert broker.query_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0) == 1
    assert not checks


async def test_rollback_is_never_visible_and_never_checked(transactions):
    broker, clock, producer, checks, _ = transactions
    result = await producer.send_message_in_transaction("orders", b"cancelled", answers(ROLLBACK))
    assert result.local_transaction_state is ROLLBACK
    clock.advance(3600)
    await settle(broker)
    assert await everything_in(broker, "orders") == []
    assert [op.body for op in await everything_in(broker, TRANS_OP_HALF_TOPIC)] == [b"0"]
    assert checks == []


async def test_a_half_message_is_invisible_to_consumers_of_its_topic(transactions):
    broker, clock, producer, _, _ = transactions
    await producer.send_message_in_transaction("orders", b"pending", answers(UNKNOW))
    await broker.wait_visible()
    assert [broker.max_offset("orders", queue) for queue in range(2)] == [0, 0]
    assert await everything_in(broker, "orders") == []
    clock.advance(5.999)  # not due yet: no check, still invisible
    await settle(broker)
    assert await everything_in(broker, "orders") == []


async def test_unknown_then_commit_by_a_check_back_after_the_transaction_timeout(transactions):
    broker, clock, producer, checks, answer = transactions
    answer["state"] = COMMIT
    result = await producer.send_message_in_transaction("orders", b"late", answers(UNKNOW), tags="t", keys="k-1")
    assert result.local_transaction_state is UNKNOW
    clock.advance(5.999)
    await settle(broker)
    assert checks == []
    clock.advance(0.001)
    await until(lambda: len(checks) == 1, "the first check")
    [asked] = checks
    assert (asked.topic, asked.queue_id, asked.body, asked.tags, asked.keys) == (
        "orders",
        result.message_queue.queue_id,
        b"late",
        "t",
        ["k-1"],
    )
    assert asked.properties[PROPERTY_TRANSACTION_ID] == result.transaction_id
    assert asked.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
    assert PROPERTY_REAL_TOPIC not in asked.properties
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the commit")
    [message] = await everything_in(broker, "orders")
    assert message.body == b"late" and message.unique_id == result.msg_id
    clock.advance(3600)
    await settle(broker)
    assert len(checks) == 1 and len(await everything_in(broker, "orders")) == 1


async def test_unknown_then_rollback_by_a_check_back(transactions):
    broker, clock, producer, checks, answer = transactions
    answer["state"] = ROLLBACK
    await producer.send_message_in_transaction("orders", b"never", answers(UNKNOW))
    clock.advance(6)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the rollback")
    clock.advance(3600)
    await settle(broker)
    assert len(checks) == 1
    assert await everything_in(broker, "orders") == []


async def test_unknown_is_asked_again_every_interval_then_moved_after_the_maximum_with_a_warning(transactions, caplog):
    broker, clock, producer, checks, answer = transactions
    answer["state"] = UNKNOW
    result = await producer.send_message_in_transaction("orders", b"undecided", answers(UNKNOW))
    clock.advance(6)
    await until(lambda: len(checks) == 1, "check 1")
    for number in range(2, 16):
        clock.advance(29.999)
        await settle(broker)
        assert len(checks) == number - 1
        clock.advance(0.001)
        await until(lambda n=number: len(checks) == n, f"check {number}")
    assert [message.properties[PROPERTY_TRANSACTION_CHECK_TIMES] for message in checks] == [
        str(n) for n in range(1, 16)
    ]
    with caplog.at_level(logging.WARNING, logger="core.transactions.service"):
        clock.advance(30)
        await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the move")
    [moved] = await everything_in(broker, TRANS_CHECK_MAX_TIME_TOPIC)
    assert moved.body == b"undecided" and moved.unique_id == result.msg_id
    assert moved.properties[PROPERTY_REAL_TOPIC] == "orders"
    assert moved.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "15"
    assert any(
        record.levelno == logging.WARNING and result.msg_id in record.getMessage() and "15 times" in record.getMessage()
        for record in caplog.records
    )
    assert await everything_in(broker, "orders") == []
    clock.advance(3600)
    await settle(broker)
    assert len(checks) == 15 and len(await everything_in(broker, TRANS_CHECK_MAX_TIME_TOPIC)) == 1


async def test_ending_twice_decides_once(transactions):
    broker, _, producer, _, _ = transactions
    result = await producer.send_message_in_transaction("orders", b"twice", answers(UNKNOW))
    end = broker.transactions.end
    assert await end("pg-orders", result.commit_log_offset, COMMIT) is True
    assert await end("pg-orders", result.commit_log_offset, COMMIT) is False
    assert await end("pg-orders", result.offset_msg_id, ROLLBACK, from_check=True) is False
    both = await asyncio.gather(
        *(end("pg-orders", result.commit_log_offset, COMMIT, queue_offset=result.queue_offset) for _ in range(5))
    )
    assert both == [False] * 5
    assert [m.body for m in await everything_in(broker, "orders")] == [b"twice"]
    assert len(await everything_in(broker, TRANS_OP_HALF_TOPIC)) == 1


async def test_concurrent_ends_decide_once(transactions):
    broker, _, producer, _, _ = transactions
    result = await producer.send_message_in_transaction("orders", b"race", answers(UNKNOW))
    outcomes = await asyncio.gather(
        *(broker.transactions.end("pg-orders", result.commit_log_offset, state) for state in [COMMIT, ROLLBACK] * 4)
    )
    assert outcomes.count(True) == 1 and outcomes[0] is True
    assert [m.body for m in await everything_in(broker, "orders")] == [b"race"]


async def test_an_answer_that_comes_later_through_end(make_broker):
    # The gRPC endpoint's way: the checker sends a recovery command and answers None; EndTransaction comes later.
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    asked: list[TransactionCheck] = []
    unregister = broker.transactions.register_checker("pg-remote", lambda check: asked.append(check))
    sender = Producer(broker, "pg-remote")  # what a remote client's half message looks like
    sent = await sender.send("remote", b"r", properties={"TRAN_MSG": "true", "PGROUP": "pg-remote"})
    clock.advance(6)
    await until(lambda: len(asked) == 1, "the check")
    [check] = asked
    assert (check.producer_group, check.commit_log_offset, check.queue_offset, check.check_times) == (
        "pg-remote",
        sent.commit_log_offset,
        sent.queue_offset,
        1,
    )
    assert check.msg_id == check.transaction_id == sent.msg_id and check.offset_msg_id == sent.offset_msg_id
    assert check.message.topic == "remote" and check.message.body == b"r"
    await settle(broker)
    assert await everything_in(broker, "remote") == []
    decided = await broker.transactions.end(
        check.producer_group,
        check.offset_msg_id,
        COMMIT,
        transaction_id=check.transaction_id,
        queue_offset=check.queue_offset,
        from_check=True,
    )
    assert decided is True
    assert [m.body for m in await everything_in(broker, "remote")] == [b"r"]
    unregister()


async def test_an_async_checker_is_awaited(make_broker):
    clock = ManualClock()
    broker = await make_broker(clock=clock)
    asked = []

    async def checker(message):
        asked.append(message.body)
        await asyncio.sleep(0.01)
        return COMMIT

    producer = TransactionProducer(broker, "pg-async", checker)
    await producer.start()
    await producer.send_message_in_transaction("async", b"a", answers(UNKNOW))
    clock.advance(6)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the commit")
    assert asked == [b"a"]
    assert [m.body for m in await everything_in(broker, "async")] == [b"a"]
    await producer.shutdown()


async def test_without_a_live_producer_a_check_counts_as_in_rocketmq(make_broker, caplog):
    clock = ManualClock()
    config = BrokerConfig(transaction_timeout_ms=1_000, transaction_check_interval_ms=5_000, transaction_check_max=3)
    broker = await make_broker(config=config, clock=clock)
    producer = TransactionProducer(broker, "pg-gone", lambda message: COMMIT)
    await producer.start()
    result = await producer.send_message_in_transaction("gone", b"g", answers(UNKNOW))
    await producer.shutdown()
    with caplog.at_level(logging.WARNING, logger="core.transactions.service"):
        clock.advance(1)
        for _ in range(3):
            await settle(broker)
            clock.advance(5)
        await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the move")
    no_producer = [r for r in caplog.records if "no live producer of group 'pg-gone'" in r.getMessage()]
    assert len(no_producer) == 3
    assert [m.unique_id for m in await everything_in(broker, TRANS_CHECK_MAX_TIME_TOPIC)] == [result.msg_id]


async def test_check_immunity_time_sets_the_first_check(transactions):
    broker, clock, producer, checks, answer = transactions
    answer["state"] = UNKNOW
    await producer.send_message_in_transaction(
        "orders", b"slow", answers(UNKNOW), properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "60"}
    )
    clock.advance(59.9)
    await settle(broker)
    assert checks == []
    clock.advance(0.1)
    await until(lambda: len(checks) == 1, "the first check")


async def test_an_executor_that_raises_means_unknow(transactions, caplog):
    broker, clock, producer, checks, _ = transactions

    def executor(message, arg):
        raise RuntimeError("the database is down")

    with caplog.at_level(logging.ERROR):
        result = await producer.send_message_in_transaction("orders", b"x", executor)
    assert result.local_transaction_state is UNKNOW
    assert any("the database is down" in (record.exc_text or "") for record in caplog.records)
    assert await everything_in(broker, "orders") == []
    clock.advance(6)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the commit by check-back")
    assert len(checks) == 1 and len(await everything_in(broker, "orders")) == 1


@pytest.mark.parametrize("delay", [{"DELAY": "3"}, {"TIMER_DELAY_SEC": "10"}, {"TIMER_DELIVER_MS": "99999999999999"}])
async def test_a_delay_on_a_transactional_message_is_refused_and_nothing_is_stored(transactions, delay):
    broker, _, producer, _, _ = transactions
    ran = []
    with pytest.raises(IllegalMessageError, match="a transactional message cannot be delayed"):
        await producer.send_message_in_transaction("orders", b"d", lambda m, a: ran.append(m), properties=delay)
    assert ran == []
    assert await everything_in(broker, TRANS_HALF_TOPIC) == []


async def test_bad_input_is_refused_with_what_to_do(transactions, make_broker):
    broker, _, producer, _, _ = transactions
    result = await producer.send_message_in_transaction("orders", b"b", answers(UNKNOW))
    end = broker.transactions.end
    with pytest.raises(IllegalArgumentError, match="belongs to producer group 'pg-orders', not 'other'"):
        await end("other", result.commit_log_offset, COMMIT)
    with pytest.raises(IllegalArgumentError, match="half-queue offset 0, not 5"):
        await end("pg-orders", result.commit_log_offset, COMMIT, queue_offset=5)
    with pytest.raises(IllegalArgumentError, match="not 'nope'"):
        await end("pg-orders", result.commit_log_offset, COMMIT, transaction_id="nope")
    with pytest.raises(IllegalArgumentError, match="holds no message"):
        await end("pg-orders", 10**9, COMMIT)
    with pytest.raises(IllegalArgumentError, match="not hexadecimal"):
        await end("pg-orders", "zz", COMMIT)
    plain = await Producer(broker).send("orders", b"plain")
    with pytest.raises(IllegalArgumentError, match="topic 'orders', not a half message"):
        await end("pg-orders", plain.commit_log_offset, COMMIT)
    assert await end("pg-orders", result.commit_log_offset, UNKNOW) is False
    with pytest.raises(IllegalMessageError, match="names its producer group in property PGROUP"):
        await Producer(broker).send("orders", b"no group", properties={"TRAN_MSG": "true"})
    with pytest.raises(IllegalMessageError, match="CHECK_IMMUNITY_TIME_IN_SECONDS must be a number"):
        await producer.send_message_in_transaction(
            "orders", b"i", answers(COMMIT), properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "soon"}
        )
    idle = TransactionProducer(broker, "pg-idle", lambda message: COMMIT)
    with pytest.raises(IllegalArgumentError, match=r"start\(\) the TransactionProducer"):
        await idle.send_message_in_transaction("orders", b"s", answers(COMMIT))
    # TRAN_MSG=false is an ordinary message.
    ordinary = await Producer(broker).send("orders", b"o", properties={"TRAN_MSG": "false"})
    assert ordinary.status is SendStatus.SEND_OK
    assert [m.body for m in await everything_in(broker, "orders")] == [b"plain", b"o"]


async def test_a_commit_the_store_refuses_leaves_the_half_undecided_until_it_is_ended_again(tmp_path):
    async with refusing_broker(tmp_path, clock=ManualClock()) as (broker, disk):
        producer = TransactionProducer(broker, "pg", lambda message: COMMIT)
        await producer.start()
        result = await producer.send_message_in_transaction("orders", b"later", answers(UNKNOW))
        await disk.fill()
        with pytest.raises(ServiceNotAvailableError, match="disk_refuse_ratio"):
            await broker.transactions.end("pg", result.commit_log_offset, COMMIT)
        assert [half.queue_offset for half in broker.transactions.ledger.undecided()] == [result.queue_offset]
        await disk.empty()
        assert await broker.transactions.end("pg", result.commit_log_offset, COMMIT) is True
        assert [m.body for m in await everything_in(broker, "orders")] == [b"later"]
        await producer.shutdown()


async def test_an_op_record_the_store_refuses_is_written_once_it_takes_writes_again(tmp_path):
    async with refusing_broker(tmp_path, clock=ManualClock()) as (broker, disk):

        def fill_when_copied(message, result):
            # Between the commit copy and its op record: the disk fills up (written here, on the loop).
            if message.topic == "orders":
                with disk.filler.open("wb") as out:
                    out.write(b"\0" * (FILLER_MB * 1024 * 1024))
                broker.store.retention.check_disk()

        broker.add_stored_listener(fill_when_copied)
        producer = TransactionProducer(broker, "pg", lambda message: COMMIT)
        await producer.start()
        result = await producer.send_message_in_transaction("orders", b"copied", answers(COMMIT))
        assert result.local_transaction_state is COMMIT
        assert not broker.store.writable
        assert broker.transactions.ledger.is_deciding(result.queue_offset)  # decided, its op record owed
        assert await broker.transactions.end("pg", result.commit_log_offset, COMMIT) is False
        await disk.empty()
        await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the owed op record")
        [op] = await everything_in(broker, TRANS_OP_HALF_TOPIC)
        assert op.body == str(result.queue_offset).encode()
        assert [m.body for m in await everything_in(broker, "orders")] == [b"copied"]
        await producer.shutdown()
