"""The compiled per-message work of a batch send (core/batch_send.py) and the results it builds (core/results.py)
against their pure twins, the same .py files interpreted (tests/compiled_modules.py): generated batches, with
parked messages, mixed topics and queues, oversized bodies, light queues named by the message, by its property and by
send hooks, and fields of the wrong type, give the same properties, the same results and the same refusals."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import core.batch_send as compiled
import core.results as compiled_results
from core.message_queue import MessageQueue
from core.store.message import Message
from core.store.put_result import PutResult, PutStatus
from tests.compiled_modules import is_compiled, outcome, pure_twin

pure = pure_twin("core.batch_send")
pure_results = pure_twin("core.results")


def test_the_twins_are_apart():
    assert is_compiled("core.batch_send") and is_compiled("core.results")
    assert pure.__name__.endswith("__pure") and pure_results.SendResult is not compiled_results.SendResult


light = st.sampled_from(["%LMQ%a", "%LMQ%b", "%LMQ%c"])
messages = st.builds(
    lambda topic, queue_id, size, own, given, delay, extra: (topic, queue_id, size, own, given, delay, extra),
    st.sampled_from(["t", "t", "u", 7]),
    st.sampled_from([0, 0, 1, "0"]),
    st.sampled_from([0, 3, 2 * 1024 * 1024 + 1]),
    st.lists(light, max_size=2),
    st.one_of(st.none(), st.sampled_from(["%LMQ%a", "%LMQ%x,%LMQ%a", ""])),
    st.booleans(),
    st.one_of(st.none(), st.sampled_from(["id-given"])),
)
hook_answers = st.lists(st.one_of(st.none(), st.lists(light, max_size=2), st.just(())), max_size=3)


def build(fields: tuple[Any, ...]) -> Message:
    topic, queue_id, size, own, given, delay, unique_id = fields
    properties: dict[str, str] = {}
    if given is not None:
        properties["INNER_MULTI_DISPATCH"] = given
    if delay:
        properties["DELAY"] = "3"
    if unique_id is not None:
        properties["UNIQ_KEY"] = unique_id
    message = Message.__new__(Message)  # no checks of its own: what a careless caller may hand over
    for name, value in (
        ("topic", topic),
        ("queue_id", queue_id),
        ("body", b"x" * size),
        ("properties", properties),
        ("light_queues", list(own)),
    ):
        object.__setattr__(message, name, value)
    return message


@settings(max_examples=300)
@given(st.lists(messages, min_size=1, max_size=6), hook_answers)
def test_a_batch_is_checked_and_named_as_by_its_pure_twin(batch, answers):
    ours, theirs = [build(fields) for fields in batch], [build(fields) for fields in batch]
    hooks = [lambda message, answer=answer: copy.copy(answer) for answer in answers]
    assert outcome(compiled.refuse_parked, ours) == outcome(pure.refuse_parked, theirs)
    assert outcome(compiled.batch_bytes, ours) == outcome(pure.batch_bytes, theirs)
    ids = [f"id-{n}" for n in range(len(batch))]
    assert outcome(compiled.name_queues_and_ids, ours, ids, hooks) == outcome(
        pure.name_queues_and_ids, theirs, ids, hooks
    )
    assert [m.properties for m in ours] == [m.properties for m in theirs]


@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**20)), min_size=1, max_size=5))
def test_results_are_those_of_the_pure_twin(places):
    batch = [Message("t", b"x", 0, {"UNIQ_KEY": f"id-{n}"}) for n in range(len(places))]
    puts = [
        PutResult(PutStatus.PUT_OK, "t", 0, n, offset, 100, 1_700_000_000_000, ("10.0.0.1", 10911))
        for n, (offset, _) in enumerate(places)
    ]
    queue = MessageQueue("t", "broker-a", 0)
    ours = compiled.send_results(batch, puts, queue)
    theirs = pure.send_results(batch, puts, queue)
    assert [(r.status.value, r.msg_id, r.message_queue, r.queue_offset, r.offset_msg_id) for r in ours] == [
        (r.status.value, r.msg_id, r.message_queue, r.queue_offset, r.offset_msg_id) for r in theirs
    ]
    assert repr(ours[0]).split("(", 1)[1].split(",", 1)[1] == repr(theirs[0]).split("(", 1)[1].split(",", 1)[1]
