"""Transactions across restarts: a clean one, and SIGKILL of a broker child process at the worst moment (between a
copy and its op record, found through a stored listener) and at random moments of a stream of transactions with
check-backs running. After the restart, on a ManualClock, every half message the child stored ends as its producer
meant it, once: committed ones visible exactly once, rolled back ones never, and the checks counted before the
crash still count."""

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core import BrokerConfig, LocalTransactionState, TransactionProducer
from core.clock import ManualClock
from core.system_topics import (
    PROPERTY_TRANSACTION_CHECK_TIMES,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from tests.core.conftest import SMALL_STORE
from tests.core.reading import everything_in, settle, until

ROOT = Path(__file__).resolve().parents[3]
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


def child(directory: Path, config: str, body: str, flush_mode: str = "ASYNC_FLUSH") -> str:
    """A broker child process on `directory` (the same store layout as make_broker) running `body` in main()."""
    return (
        textwrap.dedent(f"""
        import asyncio, os, signal, sys
        from pathlib import Path
        from core import Broker, BrokerConfig, LocalTransactionState, TransactionProducer
        from core.store.config import FlushMode, StoreConfig
        from core.store.message_store import MessageStore
        COMMIT = LocalTransactionState.COMMIT_MESSAGE
        ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
        UNKNOW = LocalTransactionState.UNKNOW
        def say(text):
            print(text, flush=True)
        def die():
            os.kill(os.getpid(), signal.SIGKILL)
        async def main():
            directory = Path({str(directory)!r})
            store = MessageStore(
                StoreConfig(store_dir=directory / "store", flush_mode=FlushMode.{flush_mode}, **{SMALL_STORE!r})
            )
            store.open()
            broker = Broker(store, directory / "config", {config})
            await broker.start()
            broker.create_topic("orders", queue_nums=2)
    """)
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\nasyncio.run(main())\n"
    )


def run_to_death(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    return done.stdout.split()


async def test_a_clean_restart_keeps_decisions_undecided_halves_and_check_counts(make_broker, tmp_path):
    clock = ManualClock()
    config = BrokerConfig(transaction_check_max=3)
    broker = await make_broker(tmp_path, config=config, clock=clock)
    checks = []
    producer = TransactionProducer(broker, "pg", lambda message: checks.append(message) or UNKNOW)
    await producer.start()
    committed = await producer.send_message_in_transaction("orders", b"yes", lambda m, a: COMMIT)
    await producer.send_message_in_transaction("orders", b"no", lambda m, a: ROLLBACK)
    pending = await producer.send_message_in_transaction("orders", b"maybe", lambda m, a: UNKNOW)
    clock.advance(6)
    await until(lambda: len(checks) == 1, "check 1")
    clock.advance(30)
    await until(lambda: len(checks) == 2, "check 2")
    await settle(broker)
    await producer.shutdown()
    await broker.close()
    broker.store.close()

    clock = ManualClock(clock.now_ms())
    again = await make_broker(tmp_path, config=config, clock=clock)
    assert [half.queue_offset for half in again.transactions.ledger.undecided()] == [pending.queue_offset]
    producer = TransactionProducer(again, "pg", lambda message: checks.append(message) or UNKNOW)
    await producer.start()
    assert await again.transactions.end("pg", committed.commit_log_offset, COMMIT) is False
    clock.advance(30)
    await until(lambda: len(checks) == 3, "check 3")
    assert checks[-1].properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "3"
    clock.advance(30)
    await until(lambda: again.transactions.ledger.undecided_count() == 0, "the move")
    assert len(checks) == 3
    assert [m.body for m in await everything_in(again, "orders")] == [b"yes"]
    assert [m.body for m in await everything_in(again, TRANS_CHECK_MAX_TIME_TOPIC)] == [b"maybe"]
    await producer.shutdown()


@pytest.mark.parametrize("killed_storing", ["orders", TRANS_CHECK_MAX_TIME_TOPIC])
async def test_sigkill_between_a_copy_and_its_op_record_neither_loses_nor_repeats_it(
    make_broker, tmp_path, killed_storing
):
    # The stored listener hears the copy the moment it is appended, before the op record: the worst moment.
    config = (
        "BrokerConfig(transaction_timeout_ms=50, transaction_check_interval_ms=50, transaction_check_max=1,"
        " offset_persist_interval_s=0.05)"
    )
    lines = run_to_death(
        child(
            tmp_path,
            config,
            f"""
            def stored(message, result):
                if message.topic == {killed_storing!r}:
                    say("copied")
                    die()
            broker.add_stored_listener(stored)
            answer = COMMIT if {killed_storing!r} == "orders" else UNKNOW
            producer = TransactionProducer(broker, "pg", lambda message: answer)
            await producer.start()
            result = await producer.send_message_in_transaction("orders", b"x", lambda m, a: UNKNOW)
            say(f"half {{result.commit_log_offset}}")
            await asyncio.sleep(30)
            """,
        )
    )
    assert lines[-1] == "copied"
    half = int(lines[lines.index("half") + 1])

    clock = ManualClock()
    broker = await make_broker(tmp_path, config=BrokerConfig(auto_create_topic=False), clock=clock)
    assert broker.store.recovery.clean is False
    asked = []
    producer = TransactionProducer(broker, "pg", lambda message: asked.append(message) or COMMIT)
    await producer.start()
    clock.advance(3600)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the missing op record")
    clock.advance(3600)
    await settle(broker)
    assert asked == []  # settled from the copy found, not by asking again
    assert await broker.transactions.end("pg", half, COMMIT) is False
    assert [m.body for m in await everything_in(broker, killed_storing)] == [b"x"]
    other = TRANS_CHECK_MAX_TIME_TOPIC if killed_storing == "orders" else "orders"
    assert await everything_in(broker, other) == []
    assert len(await everything_in(broker, TRANS_OP_HALF_TOPIC)) == 1
    await producer.shutdown()


INTENTS = [COMMIT, ROLLBACK, "check-commit", "check-rollback"]


def intent(number: int):
    # Each sender sends every fourth number; this gives each of them every kind of transaction in turn.
    return INTENTS[(number + number // 4) % 4]


def meant_to_commit(number: int) -> bool:
    return intent(number) in (COMMIT, "check-commit")


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_sigkill_at_a_random_moment_loses_and_repeats_nothing(make_broker, tmp_path, seed):
    """Four senders of transactions, a quarter of each kind, on SYNC_FLUSH (so copies wait for the disk before their
    op records), check-backs every 20 ms, killed at a random moment."""
    chance = random.Random(seed)
    wanted = chance.randrange(8, 80)
    code = child(
        tmp_path,
        "BrokerConfig(transaction_timeout_ms=20, transaction_check_interval_ms=20, transaction_check_max=1000)",
        """
        INTENTS = ["commit", "rollback", "check-commit", "check-rollback"]
        def intent(number):
            return INTENTS[(number + number // 4) % 4]
        def check(message):
            return COMMIT if intent(int(message.body.split(b"-")[1])) == "check-commit" else ROLLBACK
        def local(message, number):
            return {"commit": COMMIT, "rollback": ROLLBACK}.get(intent(number), UNKNOW)
        producer = TransactionProducer(broker, "pg", check)
        await producer.start()
        async def sender(first):
            for number in range(first, 100_000, 4):
                await producer.send_message_in_transaction("orders", b"tx-%d" % number, local, arg=number)
                say(f"sent-{number}")
        await asyncio.gather(*(sender(first) for first in range(4)))
        """,
        flush_mode="SYNC_FLUSH",
    )
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    acked: set[int] = set()
    assert process.stdout is not None
    for line in process.stdout:
        acked.add(int(line.split("-")[1]))
        if len(acked) >= wanted:
            break
    time.sleep(chance.uniform(0, 0.05))
    process.send_signal(signal.SIGKILL)
    rest, _ = process.communicate(timeout=60)
    acked |= {int(line.split("-")[1]) for line in rest.split()}
    assert process.returncode == -signal.SIGKILL

    clock = ManualClock()
    broker = await make_broker(tmp_path, config=BrokerConfig(transaction_check_max=1000), clock=clock)
    checker_answers = {True: COMMIT, False: ROLLBACK}
    producer = TransactionProducer(
        broker, "pg", lambda message: checker_answers[meant_to_commit(int(message.body.split(b"-")[1]))]
    )
    await producer.start()
    clock.advance(3600)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "every half decided")
    halves = {int(m.body.split(b"-")[1]) for m in await everything_in(broker, TRANS_HALF_TOPIC)}
    visible = [int(m.body.split(b"-")[1]) for m in await everything_in(broker, "orders")]
    assert acked <= halves  # every transaction the child was told about has its half
    assert len(visible) == len(set(visible)), "a transaction was committed twice"
    assert set(visible) == {number for number in halves if meant_to_commit(number)}
    assert await everything_in(broker, TRANS_CHECK_MAX_TIME_TOPIC) == []
    await producer.shutdown()


async def test_check_counts_survive_a_sigkill(make_broker, tmp_path):
    lines = run_to_death(
        child(
            tmp_path,
            "BrokerConfig(transaction_timeout_ms=100, transaction_check_interval_ms=100, transaction_check_max=3)",
            """
            def check(message):
                say("check-" + message.properties["TRANSACTION_CHECK_TIMES"])
                if message.properties["TRANSACTION_CHECK_TIMES"] == "2":
                    die()
                return UNKNOW
            producer = TransactionProducer(broker, "pg", check)
            await producer.start()
            await producer.send_message_in_transaction("orders", b"undecided", lambda m, a: UNKNOW)
            await asyncio.sleep(30)
            """,
        )
    )
    assert lines == ["check-1", "check-2"]
    clock = ManualClock()
    config = BrokerConfig(transaction_timeout_ms=100, transaction_check_interval_ms=100, transaction_check_max=3)
    broker = await make_broker(tmp_path, config=config, clock=clock)
    asked = []
    producer = TransactionProducer(broker, "pg", lambda message: asked.append(message) or UNKNOW)
    await producer.start()
    clock.advance(1)
    await until(lambda: len(asked) == 1, "check 3")
    assert asked[0].properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "3"
    clock.advance(1)
    await until(lambda: broker.transactions.ledger.undecided_count() == 0, "the move")
    assert len(asked) == 1
    assert [m.body for m in await everything_in(broker, TRANS_CHECK_MAX_TIME_TOPIC)] == [b"undecided"]
    await producer.shutdown()
