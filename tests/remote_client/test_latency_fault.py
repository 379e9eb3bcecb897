"""Which broker groups a producer passes over (RocketMQ 5's MQFaultStrategy table), and the queue it chooses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core import MessageQueue
from remote_client.latency_fault import ISOLATION_LATENCY_MS, LatencyFaults, passed_over_ms

QUEUES = [MessageQueue("t", name, i) for name in ("a", "b", "c") for i in range(2)]


@pytest.mark.parametrize(
    ("latency", "passed_over"),
    [(0, 0), (99, 0), (549, 0), (550, 2000), (1800, 5000), (2999, 5000), (3000, 6000), (5000, 10000),
     (ISOLATION_LATENCY_MS, 10000), (15000, 30000), (10**9, 30000)],
)  # fmt: skip
def test_the_slower_a_group_answered_the_longer_it_is_passed_over(latency: int, passed_over: int):
    assert passed_over_ms(latency) == passed_over


def test_a_failed_group_is_passed_over_for_ten_seconds_then_tried_again():
    faults = LatencyFaults()
    faults.update("b", 3, failed=True, now_ms=1000)
    assert faults.passed_over(1000) == ["b"]
    assert {faults.choose(QUEUES, start, None, 1000).broker_name for start in range(6)} == {"a", "c"}
    assert faults.available("b", 11_000) and faults.passed_over(11_000) == []
    faults.update("b", 20, failed=False, now_ms=11_000)  # one good answer clears it
    assert faults.choose(QUEUES, 2, None, 11_001).broker_name == "b"


def test_a_retry_avoids_the_group_that_just_failed_even_when_every_group_is_passed_over():
    faults = LatencyFaults()
    for name in "abc":
        faults.update(name, 0, failed=True, now_ms=0)
    assert faults.choose(QUEUES, 0, "a", 1).broker_name == "b"
    assert faults.choose(QUEUES, 0, None, 1) == QUEUES[0]  # nothing better: the round robin's queue


@given(
    st.dictionaries(st.sampled_from("abc"), st.tuples(st.integers(0, 20_000), st.booleans())),
    st.integers(0, 100),
    st.sampled_from([None, "a", "b", "c"]),
    st.integers(0, 40_000),
)
def test_choose_takes_an_available_group_other_than_the_failed_one_whenever_there_is_one(
    updates: dict[str, tuple[int, bool]], start: int, last_failed: str | None, now: int
):
    faults = LatencyFaults()
    for name, (latency, failed) in updates.items():
        faults.update(name, latency, failed, 0)
    chosen = faults.choose(QUEUES, start, last_failed, now)
    good = [q for q in QUEUES if q.broker_name != last_failed and faults.available(q.broker_name, now)]
    if good:
        assert chosen in good
    elif last_failed is not None:
        assert chosen.broker_name != last_failed
