"""The broker's counters (core/traffic.py), compiled, against their pure twin, the same .py interpreted
(tests/compiled_modules.py): a generated sequence of stores, deliveries and refusals leaves the same counts per
topic and the same refusals by reason, and each count is what a plain sum of the sequence says."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import core.traffic as compiled
from core.store import errors as store_errors
from tests.compiled_modules import is_compiled, outcome, pure_twin

pure = pure_twin("core.traffic")


def test_the_twins_are_apart():
    assert pure.TopicTraffic is not compiled.TopicTraffic
    assert not is_compiled(pure.__name__)


topics = st.sampled_from(["orders", "audit", "%LMQ%x"])
counts = st.integers(0, 1000)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("stored"), topics, counts, counts),
        st.tuples(st.just("delivered"), topics, counts, counts),
        st.tuples(st.just("refuse"), st.sampled_from(["store_not_writable", "message_too_large"]), counts),
    ),
    max_size=40,
)


def run(module: Any, ops: list[tuple[Any, ...]]) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    traffic = module.TopicTraffic()
    for kind, *arguments in ops:
        getattr(traffic, kind)(*arguments)
    snapshot = {
        topic: (c.messages_in, c.bytes_in, c.messages_out, c.bytes_out) for topic, c in traffic.snapshot().items()
    }
    return snapshot, dict(traffic.refused)


@given(ops=operations)
def test_the_counters_count_as_their_pure_twin_and_a_plain_sum(ops):
    ours = run(compiled, ops)
    assert ours == run(pure, ops)
    snapshot, refused = ours
    for topic, (messages_in, bytes_in, messages_out, bytes_out) in snapshot.items():
        assert messages_in == sum(op[2] for op in ops if op[:2] == ("stored", topic))
        assert bytes_in == sum(op[3] for op in ops if op[:2] == ("stored", topic))
        assert messages_out == sum(op[2] for op in ops if op[:2] == ("delivered", topic))
        assert bytes_out == sum(op[3] for op in ops if op[:2] == ("delivered", topic))
    assert set(snapshot) == {op[1] for op in ops if op[0] != "refuse"}
    reasons = {op[1] for op in ops if op[0] == "refuse"}
    assert refused == {reason: sum(op[2] for op in ops if op[:2] == ("refuse", reason)) for reason in reasons}


def test_refusal_reasons_are_the_same_labels():
    errors = [
        store_errors.StoreNotWritableError("full"),
        store_errors.MessageTooLargeError("big"),
        store_errors.InvalidMessageError("bad"),
        ValueError("other"),
    ]
    assert [outcome(compiled.refusal_reason, error) for error in errors] == [
        outcome(pure.refusal_reason, error) for error in errors
    ]
    assert compiled.refusal_reason(errors[0]) == "store_not_writable"
