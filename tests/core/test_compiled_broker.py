"""The compiled broker (core/broker.py, core/long_poll.py, the store's modules) against its pure twin, core/broker.py
and all it reaches interpreted (tests/compiled_modules.py; the twin runs on a twin of the message store too): a
generated sequence of sends, batches, pulls (with and without a tag filter, at legal and illegal offsets and
queues), offset commits and queries gives the same answers and the same errors, with the same causes, on both, and
every pull answers what a plain list of the sent messages says."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.broker as compiled_broker
import core.long_poll as compiled_long_poll
import core.store.message_store as compiled_store
from core.filter import build_filter
from core.store.config import StoreConfig
from core.store.message import PROPERTY_TAGS, PROPERTY_UNIQ_KEY, Message
from mqgate.process import run
from tests.compiled_modules import is_compiled, pure_twin

from .conftest import SMALL_STORE

pure_broker = pure_twin("core.broker")
pure_long_poll = pure_twin("core.long_poll")
pure_store = pure_twin("core.store.message_store")

TOPICS = ("t0", "t1")  # t0 is created with 4 queues, t1 auto-created on its first send
QUEUES = 4
GROUPS = ("g0", "g1")
TAG_EXPRESSIONS = ("*", "a", "a || b", "c")


def test_the_twins_are_apart():
    assert pure_broker.MessageStore is pure_store.MessageStore is not compiled_store.MessageStore
    assert pure_broker.LongPollWaiters is pure_long_poll.LongPollWaiters is not compiled_long_poll.LongPollWaiters
    assert not is_compiled(pure_broker.__name__)


tags = st.sampled_from([None, "a", "b", "c"])
topics = st.sampled_from(TOPICS)
queue_ids = st.integers(0, QUEUES)  # QUEUES itself does not exist
operations = st.lists(
    st.one_of(
        st.tuples(st.just("send"), topics, queue_ids, st.binary(max_size=40), tags),
        st.tuples(st.just("batch"), topics, queue_ids, st.lists(st.binary(max_size=20), max_size=4), tags),
        st.tuples(
            st.just("pull"),
            st.sampled_from(GROUPS),
            topics,
            queue_ids,
            st.integers(-1, 8),
            st.integers(1, 5),
            st.sampled_from(TAG_EXPRESSIONS),
        ),
        st.tuples(st.just("commit"), st.sampled_from(GROUPS), topics, queue_ids, st.integers(0, 8)),
        st.tuples(st.just("query"), st.sampled_from(GROUPS), topics, queue_ids),
        st.tuples(st.just("unstorable"), topics, queue_ids),  # the store refuses it: a core error with its cause
    ),
    max_size=30,
)


def message(topic: str, queue_id: int, body: bytes, tag: str | None) -> Message:
    return Message(topic, body, queue_id, {PROPERTY_TAGS: tag} if tag else {})


def seen(stored: Any) -> tuple[Any, ...]:
    """What a consumer sees of a message, but its UNIQ_KEY (each broker makes its own)."""
    properties = {name: value for name, value in stored.properties.items() if name != PROPERTY_UNIQ_KEY}
    return (stored.topic, stored.queue_id, stored.queue_offset, stored.commit_log_offset, stored.body, properties)


def sent(result: Any) -> tuple[Any, ...]:
    queue = result.message_queue
    return (result.status.value, queue.topic, queue.queue_id, result.queue_offset, result.commit_log_offset)


async def run_operations(broker_module: Any, store_module: Any, directory: Path, ops: list[tuple[Any, ...]]) -> list:
    store = store_module.MessageStore(StoreConfig(store_dir=directory / "store", **SMALL_STORE))  # type: ignore[arg-type]
    store.open()
    broker = broker_module.Broker(store, directory / "config")
    await broker.start()
    answers: list[Any] = []
    try:
        broker.create_topic("t0", queue_nums=QUEUES)
        for op in ops:
            try:
                answers.append(await apply(broker, op))
            except Exception as exc:
                cause = exc.__cause__
                answers.append(("error", type(exc).__name__, str(exc), type(cause).__name__, str(cause)))
    finally:
        await broker.close()
        store.close()
    return answers


async def apply(broker: Any, op: tuple[Any, ...]) -> Any:
    kind = op[0]
    if kind == "send":
        _, topic, queue_id, body, tag = op
        return sent(await broker.send(message(topic, queue_id, body, tag)))
    if kind == "batch":
        _, topic, queue_id, bodies, tag = op
        return [sent(result) for result in await broker.send_batch([message(topic, queue_id, b, tag) for b in bodies])]
    if kind == "pull":
        _, group, topic, queue_id, offset, max_count, expression = op
        assert await broker.wait_visible()  # what was sent is in its queue, on both
        got = await broker.pull(group, topic, queue_id, offset, max_count, build_filter("TAG", expression))
        messages = [seen(m) for m in got.messages]
        return (got.status.value, got.next_begin_offset, got.min_offset, got.max_offset, messages)
    if kind == "unstorable":
        _, topic, queue_id = op
        return sent(await broker.send(Message(topic, b"x", queue_id, {"a\x02": "b"})))
    if kind == "commit":
        _, group, topic, queue_id, offset = op
        return broker.commit_offset(group, topic, queue_id, offset)
    _, group, topic, queue_id = op
    return broker.query_offset(group, topic, queue_id)


def reference_pulls(ops: list[tuple[Any, ...]], answers: list[Any]) -> None:
    """Each FOUND pull holds what a plain list of the stored messages of its queue says, from its offset."""
    queues: dict[tuple[str, int], list[tuple[bytes, str | None]]] = {}
    for op, answer in zip(ops, answers, strict=True):
        if op[0] in ("send", "batch") and not (isinstance(answer, tuple) and answer[0] == "error"):
            bodies = [op[3]] if op[0] == "send" else op[3]
            queues.setdefault((op[1], op[2]), []).extend((body, op[4]) for body in bodies)
        elif op[0] == "pull" and answer[0] == "FOUND":
            _, _, topic, queue_id, offset, max_count, expression = op
            wanted = set(expression.replace(" ", "").split("||"))
            held = queues[(topic, queue_id)]
            expected = [
                (index, body)
                for index, (body, tag) in enumerate(held)
                if index >= offset and (expression == "*" or tag in wanted)
            ][:max_count]
            assert [(m[2], m[4]) for m in answer[4]] == expected


# Each example opens two stores and starts two brokers (about 2 s): few examples, long sequences.
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_the_broker_answers_as_its_pure_twin(ops):
    answers = []
    for broker_module, store_module in ((compiled_broker, compiled_store), (pure_broker, pure_store)):
        with tempfile.TemporaryDirectory() as directory:
            answers.append(run(run_operations(broker_module, store_module, Path(directory), ops)))
    assert answers[0] == answers[1]
    reference_pulls(ops, answers[0])
    for op, answer in zip(ops, answers[0], strict=True):
        if op[0] == "unstorable" and op[2] < QUEUES:
            assert answer[:2] == ("error", "IllegalMessageError") and answer[3] == "InvalidMessageError", answer


@settings(max_examples=30, deadline=None)
@given(
    waits=st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 2), st.booleans()), min_size=1, max_size=6),
    notified=st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 2))),
)
def test_long_poll_wakes_as_its_pure_twin(waits, notified):
    """Pulls waiting on queues (some already `ready`): those notified, or ready, wake; the others time out."""

    async def wake(module: Any) -> tuple[list[bool], int]:
        waiters = module.LongPollWaiters(asyncio.get_running_loop())
        tasks = [
            asyncio.ensure_future(waiters.wait(topic, queue_id, 0.2, lambda ready=ready: ready))
            for topic, queue_id, ready in waits
        ]
        await asyncio.sleep(0)
        waiting = waiters.waiting
        waiters.notify(notified)
        return list(await asyncio.gather(*tasks)), waiting

    outcomes = [run(wake(module)) for module in (compiled_long_poll, pure_long_poll)]
    assert outcomes[0] == outcomes[1]
    woken, waiting = outcomes[0]
    assert woken == [ready or (topic, queue_id) in notified for topic, queue_id, ready in waits]
    assert waiting == sum(not ready for _, _, ready in waits)
