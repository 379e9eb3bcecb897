"""The compiled client (core/client/producer.py, push_consumer.py, process_queue.py, send_retry.py, message_codec.py,
transaction_producer.py) against its pure twin, the same .py files interpreted on a twin broker and store
(tests/compiled_modules.py): the same messages built, sent to the same queues and offsets, consumed by a push
consumer with the same filter and committed at the same offsets, as a plain reference says; the same retries and
errors; a process queue's bookkeeping the same for a generated sequence of pulls and completions."""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.broker as compiled_broker
import core.client.message_codec as compiled_codec
import core.client.process_queue as compiled_process_queue
import core.client.producer as compiled_producer
import core.client.push_consumer as compiled_push_consumer
import core.client.send_retry as compiled_send_retry
import core.client.transaction_producer as compiled_transaction_producer
import core.store.message_store as compiled_store
from core.errors import ServiceNotAvailableError
from core.store.config import StoreConfig
from core.store.message import PROPERTY_TAGS, PROPERTY_UNIQ_KEY, StoredMessage
from mqgate.process import run
from tests.compiled_modules import is_compiled, pure_twin

from ..conftest import SMALL_STORE

pure_broker = pure_twin("core.broker")
pure_store = pure_twin("core.store.message_store")
pure_codec = pure_twin("core.client.message_codec")
pure_process_queue = pure_twin("core.client.process_queue")
pure_producer = pure_twin("core.client.producer")
pure_push_consumer = pure_twin("core.client.push_consumer")
pure_send_retry = pure_twin("core.client.send_retry")
pure_transaction_producer = pure_twin("core.client.transaction_producer")

COMPILED = (compiled_broker, compiled_store, compiled_producer, compiled_push_consumer)
PURE = (pure_broker, pure_store, pure_producer, pure_push_consumer)
# Generous: the consumer's wait for its messages is a guard against a hang, not a timing assertion.
CONSUME_WAIT_S = 30.0


def test_the_twins_are_apart():
    assert pure_push_consumer.Broker is pure_producer.Broker is pure_broker.Broker is not compiled_broker.Broker
    assert pure_push_consumer.ProcessQueue is pure_process_queue.ProcessQueue
    assert pure_transaction_producer.Producer is pure_producer.Producer
    assert not is_compiled(pure_push_consumer.__name__)


tags = st.sampled_from([None, "a", "b", "c"])
outgoing = st.lists(
    st.tuples(st.binary(min_size=1, max_size=60), tags, st.sampled_from([None, "k1", "k2", "k3"])), max_size=25
)


def stored_view(message: StoredMessage) -> tuple[Any, ...]:
    properties = {name: value for name, value in message.properties.items() if name != PROPERTY_UNIQ_KEY}
    return (message.topic, message.queue_id, message.queue_offset, message.body, properties)


async def produce_and_consume(
    modules: tuple[Any, ...], directory: Path, messages: list[Any], expression: str, batch_size: int
) -> tuple[Any, ...]:
    broker_module, store_module, producer_module, consumer_module = modules
    store = store_module.MessageStore(StoreConfig(store_dir=directory / "store", **SMALL_STORE))  # type: ignore[arg-type]
    store.open()
    broker = broker_module.Broker(store, directory / "config")
    await broker.start()
    wanted = {tag.strip() for tag in expression.split("||")}
    expected = sum(1 for _, tag, _ in messages if expression == "*" or tag in wanted)
    consumed: list[StoredMessage] = []
    enough = asyncio.Event()

    async def listener(batch: list[StoredMessage], context: Any) -> Any:
        assert len(batch) <= batch_size
        consumed.extend(batch)
        if len(consumed) >= expected:
            enough.set()
        return consumer_module.ConsumeStatus.CONSUME_SUCCESS

    try:
        broker.create_topic("t", queue_nums=4)
        options = consumer_module.PushConsumerOptions(
            consume_from=consumer_module.ConsumeFromWhere.FIRST_OFFSET,
            consume_message_batch_max_size=batch_size,
            consume_thread_min=2,
            consume_thread_max=4,
            long_poll_ms=200,
        )
        consumer = consumer_module.PushConsumer(broker, "g", listener, options=options)
        consumer.subscribe("t", expression)
        await consumer.start()
        producer = producer_module.Producer(broker)
        results = []
        for body, tag, key in messages:
            result = await producer.send("t", body, tags=tag, sharding_key=key)
            results.append((result.status.value, result.message_queue.queue_id, result.queue_offset))
        if expected:
            await asyncio.wait_for(enough.wait(), CONSUME_WAIT_S)
        await consumer.shutdown()
        # Only where a message was consumed: a queue that had none commits where its first empty pull ended, if
        # that pull ended before the shutdown (a matter of timing).
        held = {m.queue_id for m in consumed}
        committed = [(queue_id, broker.query_offset("g", "t", queue_id)) for queue_id in sorted(held)]
    finally:
        await broker.close()
        store.close()
    return results, sorted(stored_view(message) for message in consumed), committed


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=outgoing,
    expression=st.sampled_from(["*", "a", "a || b"]),
    batch_size=st.integers(1, 3),
)
def test_producer_and_push_consumer_work_as_their_pure_twins(messages, expression, batch_size):
    outcomes = []
    for modules in (COMPILED, PURE):
        with tempfile.TemporaryDirectory() as directory:
            outcomes.append(run(produce_and_consume(modules, Path(directory), messages, expression, batch_size)))
    assert outcomes[0] == outcomes[1]
    results, consumed, committed = outcomes[0]
    # The reference: each message once, to the queue its sharding key or the round robin names, in order there.
    round_robin = 0
    queues: dict[int, list[tuple[bytes, str | None]]] = {q: [] for q in range(4)}
    for (body, tag, key), (status, queue_id, queue_offset) in zip(messages, results, strict=True):
        assert status == "SEND_OK"
        if key is None:
            assert queue_id == round_robin % 4
            round_robin += 1
        assert queue_offset == len(queues[queue_id])
        queues[queue_id].append((body, tag))
    wanted = {tag.strip() for tag in expression.split("||")}
    assert Counter((m[1], m[2], m[3]) for m in consumed) == Counter(
        (queue_id, offset, body)
        for queue_id, held in queues.items()
        for offset, (body, tag) in enumerate(held)
        if expression == "*" or tag in wanted
    )
    assert all((m[4].get(PROPERTY_TAGS)) == queues[m[1]][m[2]][1] for m in consumed)
    # Everything consumed: each queue is committed past its last message consumed.
    last = {}
    for m in consumed:
        last[m[1]] = max(last.get(m[1], -1), m[2])
    assert committed == [(queue_id, offset + 1) for queue_id, offset in sorted(last.items())]


@settings(max_examples=100, deadline=None)
@given(
    body=st.binary(max_size=6000),
    tag=st.one_of(st.none(), st.text(max_size=5)),
    keys=st.one_of(st.none(), st.text(max_size=5), st.lists(st.text(min_size=1, max_size=4), max_size=3)),
    properties=st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=4), st.text(max_size=4), max_size=3)),
    group=st.one_of(st.none(), st.text(max_size=4)),
    compress_over=st.integers(0, 8000),
)
def test_build_message_builds_as_its_pure_twin(body, tag, keys, properties, group, compress_over):
    built = [
        codec.build_message(
            "t", body, tags=tag, keys=keys, properties=properties, compress_over=compress_over, message_group=group
        )
        for codec in (compiled_codec, pure_codec)
    ]
    fields = ("topic", "body", "queue_id", "properties", "sys_flag", "born_host")
    assert [getattr(built[0], f) for f in fields] == [getattr(built[1], f) for f in fields]


class ScriptedAttempts:
    """Attempts that answer as `answers` says, in turn (the last answer repeats): stored ("ok"), stored but not
    confirmed ("not_ok"), refused, or failing otherwise ("error"). `made` counts them, from `made` given."""

    def __init__(self, answers: list[str], made: int = 0) -> None:
        self.answers = answers
        self.made = made

    async def __call__(self) -> str:
        answer = self.answers[min(self.made, len(self.answers) - 1)]
        self.made += 1
        if answer == "refused":
            raise ServiceNotAvailableError(f"refused at attempt {self.made}")
        if answer == "error":
            raise ValueError(f"failed at attempt {self.made}")
        return f"{answer} {self.made}"


async def send_scripted(module: Any, attempts: ScriptedAttempts, policy: Any, may_wait: bool, **first: Any) -> Any:
    """What send_with_retries of `module` makes of the attempts: (attempts made, result or (error type, text))."""
    try:
        result: Any = await module.send_with_retries(
            attempts, policy, lambda r: r.startswith("ok"), "message m", may_wait, **first
        )
    except Exception as exc:
        result = (type(exc).__name__, str(exc))
    return attempts.made, result


attempt_answers = st.lists(st.sampled_from(["ok", "not_ok", "refused", "error"]), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(
    script=attempt_answers, retries=st.integers(0, 3), retry_when_not_stored_ok=st.booleans(), may_wait=st.booleans()
)
def test_send_with_retries_retries_as_its_pure_twin(script, retries, retry_when_not_stored_ok, may_wait):
    """A scripted attempt under a policy: the same attempts made, the same result or error. The time limit is never
    reached (a minute; the pauses are 10-40 ms)."""
    outcomes = []
    for module in (compiled_send_retry, pure_send_retry):
        policy = module.SendRetryPolicy(60_000, retries, retry_when_not_stored_ok)
        outcomes.append(run(send_scripted(module, ScriptedAttempts(script), policy, may_wait)))
    assert outcomes[0] == outcomes[1]


@settings(max_examples=40, deadline=None)
@given(
    first=st.sampled_from(["not_ok", "refused"]),
    script=attempt_answers,
    retries=st.integers(0, 3),
    retry_when_not_stored_ok=st.booleans(),
)
def test_a_first_attempt_made_by_the_caller_goes_on_as_in_the_loop(first, script, retries, retry_when_not_stored_ok):
    """Producer.send makes the first attempt itself and hands its outcome on: the same attempts follow, with the
    same result or error, as when the loop made it (compiled and pure)."""
    handed_on = (
        {"first_refused": ServiceNotAvailableError("refused at attempt 1")}
        if first == "refused"
        else {"first_not_ok": "not_ok 1"}
    )
    for module in (compiled_send_retry, pure_send_retry):
        policy = module.SendRetryPolicy(60_000, retries, retry_when_not_stored_ok)
        in_the_loop = run(send_scripted(module, ScriptedAttempts([first, *script]), policy, False))
        assert run(send_scripted(module, ScriptedAttempts([first, *script], made=1), policy, False, **handed_on)) == (
            in_the_loop
        )


offsets = st.integers(0, 30)
queue_operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(st.tuples(offsets, st.integers(0, 9)), max_size=5)),
        st.tuples(st.just("remove"), st.lists(offsets, max_size=5)),
        st.tuples(st.just("take"), st.integers(1, 4)),
        st.tuples(st.just("room"), st.tuples(st.integers(0, 6), st.integers(0, 40))),
    ),
    max_size=30,
)


def stored(offset: int, size: int) -> StoredMessage:
    return StoredMessage("t", b"x" * size, 0, offset, offset * 100, 0, 0, 0, 0, 0, ("::1", 0), 0, ("::1", 0), 0, 0, {})


@settings(max_examples=200)
@given(ops=queue_operations)
def test_process_queue_keeps_books_as_its_pure_twin(ops):
    async def books(module: Any) -> list[Any]:
        pq = module.ProcessQueue()
        made: dict[int, StoredMessage] = {}
        trail: list[Any] = []
        rooms: list[Any] = []
        for kind, argument in ops:
            if kind == "room":
                rooms.append(pq.room(*argument))
                trail.append(None)
            elif kind == "put":
                pq.put([made.setdefault(offset, stored(offset, size)) for offset, size in argument])
                trail.append(None)
            elif kind == "remove":
                pq.remove([made[offset] for offset in argument if offset in made])
                trail.append(None)
            else:
                trail.append([m.queue_offset for m in pq.take_in_order(argument)])
            trail.append((pq.count, pq.cached_bytes, pq.max_pulled, pq.commit_offset(), sorted(pq.consuming)))
            trail.append([room.cancelled() or room.done() for room in rooms])
        return trail

    trails = [run(books(module)) for module in (compiled_process_queue, pure_process_queue)]
    assert trails[0] == trails[1]


answers = st.sampled_from(["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW", "none", "raise"])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(st.tuples(st.binary(min_size=1, max_size=30), answers), max_size=6))
def test_transactions_end_as_their_pure_twins(script):
    """Half messages whose local transactions answer as scripted: the same results, and the same messages (those
    committed) reach the topic."""

    async def transact(modules: tuple[Any, ...], module: Any, directory: Path) -> tuple[Any, ...]:
        broker_module, store_module = modules[:2]
        store = store_module.MessageStore(StoreConfig(store_dir=directory / "store", **SMALL_STORE))  # type: ignore[arg-type]
        store.open()
        broker = broker_module.Broker(store, directory / "config")
        await broker.start()
        try:
            broker.create_topic("t", queue_nums=2)
            # The twin's own states: its imports that reach compiled code are twins too (tests/compiled_modules.py).
            states = module.LocalTransactionState
            producer = module.TransactionProducer(broker, "pg", lambda message: states.UNKNOW)
            await producer.start()
            ended = []
            for body, answer in script:

                def executor(message: Any, arg: Any, answer: str = answer) -> Any:
                    if answer == "raise":
                        raise RuntimeError("the local transaction failed")
                    return None if answer == "none" else states(answer)

                result = await producer.send_message_in_transaction("t", body, executor)
                ended.append((result.status.value, result.message_queue.queue_id, result.local_transaction_state.value))
            await producer.shutdown()
            assert await broker.wait_visible()
            visible = []
            for queue_id in range(2):
                visible.extend(m.body for m in (await broker.pull("g", "t", queue_id, 0, 100)).messages)
            visible.sort()
        finally:
            await broker.close()
            store.close()
        return ended, visible

    outcomes = []
    for modules, module in ((COMPILED, compiled_transaction_producer), (PURE, pure_transaction_producer)):
        with tempfile.TemporaryDirectory() as directory:
            outcomes.append(run(transact(modules, module, Path(directory))))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == sorted(body for body, answer in script if answer == "COMMIT_MESSAGE")
