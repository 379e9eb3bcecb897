import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.allocate import (
    AllocateStrategy,
    allocate,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
)
from core.message_queue import MessageQueue

GROUP = "GID_test"
REPO = Path(__file__).resolve().parents[2]


def queues(count: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(count)]


def ids(result: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in result]


def share_out(strategy: AllocateStrategy, mqs: list[MessageQueue], cids: list[str]) -> dict[str, list[MessageQueue]]:
    return {cid: allocate(strategy, GROUP, cid, mqs, cids) for cid in cids}


consumer_ids = st.lists(
    st.text(alphabet="abcdefghij0123456789.@-", min_size=1, max_size=12), min_size=1, max_size=20, unique=True
)


@settings(max_examples=300, deadline=None)
@given(queue_count=st.integers(0, 64), cids=consumer_ids, strategy=st.sampled_from(AllocateStrategy))
def test_every_queue_has_exactly_one_owner(queue_count, cids, strategy):
    mqs = queues(queue_count)
    shares = share_out(strategy, mqs, cids)
    owned = [mq for share in shares.values() for mq in share]
    assert sorted(owned) == mqs  # all queues, and none twice


@settings(max_examples=300, deadline=None)
@given(
    queue_count=st.integers(0, 64),
    cids=consumer_ids,
    strategy=st.sampled_from([AllocateStrategy.AVG, AllocateStrategy.AVG_BY_CIRCLE]),
)
def test_average_strategies_are_balanced(queue_count, cids, strategy):
    sizes = [len(share) for share in share_out(strategy, queues(queue_count), cids).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(queue_count=st.integers(0, 64), cids=consumer_ids, strategy=st.sampled_from(AllocateStrategy))
def test_answer_does_not_depend_on_input_order(queue_count, cids, strategy):
    mqs = queues(queue_count)
    for cid in cids:
        forward = allocate(strategy, GROUP, cid, mqs, cids)
        backward = allocate(strategy, GROUP, cid, list(reversed(mqs)), list(reversed(cids)))
        assert forward == backward
        assert forward == sorted(forward)


@settings(max_examples=200, deadline=None)
@given(queue_count=st.integers(0, 64), cids=consumer_ids, newcomer=st.text(alphabet="klmnop", min_size=1, max_size=8))
def test_consistent_hash_moves_only_queues_that_go_to_the_newcomer(queue_count, cids, newcomer):
    mqs = queues(queue_count)
    before = {mq: cid for cid, share in share_out(AllocateStrategy.CONSISTENT_HASH, mqs, cids).items() for mq in share}
    after_cids = [*cids, newcomer]
    after = {
        mq: cid for cid, share in share_out(AllocateStrategy.CONSISTENT_HASH, mqs, after_cids).items() for mq in share
    }
    assert set(after) == set(mqs)
    for mq in mqs:
        assert after[mq] in (before[mq], newcomer)


def test_consistent_hash_leaves_most_queues_in_place():
    mqs = queues(64)
    cids = [f"10.0.0.{i}@{1000 + i}" for i in range(8)]
    before = {mq: cid for cid in cids for mq in allocate_consistent_hash(GROUP, cid, mqs, cids)}
    after_cids = [*cids, "10.0.0.99@2000"]
    after = {mq: cid for cid in after_cids for mq in allocate_consistent_hash(GROUP, cid, mqs, after_cids)}
    moved = sum(before[mq] != after[mq] for mq in mqs)
    # A newcomer among 9 should take about 64/9 queues; averagely would move most of them.
    assert 0 < moved < 32
    averagely_moved = sum(
        mq not in allocate_averagely(GROUP, cid, mqs, after_cids)
        for cid in cids
        for mq in allocate_averagely(GROUP, cid, mqs, cids)
    )
    assert moved < averagely_moved


# Worked by hand from RocketMQ's AllocateMessageQueueAveragely: index, mod = 8 % 3 = 2, averageSize 3 for the
# first two consumers and 2 for the last, startIndex = index * averageSize (+ mod for consumers at or past mod).
@pytest.mark.parametrize(
    ("queue_count", "consumer_count", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (4, 4, [[0], [1], [2], [3]]),
        (2, 3, [[0], [1], []]),
        (5, 1, [[0, 1, 2, 3, 4]]),
        (0, 2, [[], []]),
    ],
)
def test_averagely_by_hand(queue_count, consumer_count, expected):
    cids = [f"c{i}" for i in range(consumer_count)]
    assert [ids(allocate_averagely(GROUP, cid, queues(queue_count), cids)) for cid in cids] == expected


@pytest.mark.parametrize(
    ("queue_count", "consumer_count", "expected"),
    [
        (8, 3, [[0, 3, 6], [1, 4, 7], [2, 5]]),
        (10, 4, [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]),
        (2, 3, [[0], [1], []]),
    ],
)
def test_by_circle_by_hand(queue_count, consumer_count, expected):
    cids = [f"c{i}" for i in range(consumer_count)]
    assert [ids(allocate_averagely_by_circle(GROUP, cid, queues(queue_count), cids)) for cid in cids] == expected


def test_consumers_are_ranked_by_sorted_id_not_by_list_position():
    cids = ["c2", "c0", "c1"]
    assert ids(allocate_averagely(GROUP, "c0", queues(8), cids)) == [0, 1, 2]
    assert ids(allocate_averagely(GROUP, "c2", queues(8), cids)) == [6, 7]


def test_consumers_sort_as_java_strings():
    # U+FF5E is one UTF-16 unit, U+1F600 a surrogate pair starting 0xD83D: Java sorts the emoji first,
    # Python's code-point order would put it last.
    cids = ["\uff5e", "\U0001f600"]
    assert ids(allocate_averagely(GROUP, "\U0001f600", queues(4), cids)) == [0, 1]
    assert ids(allocate_averagely(GROUP, "\uff5e", queues(4), cids)) == [2, 3]


def test_queues_sort_by_topic_broker_then_queue_id():
    mqs = [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-a", 0)]
    cids = ["c0", "c1"]
    assert allocate_averagely(GROUP, "c0", mqs, cids) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
    ]
    assert allocate_averagely(GROUP, "c1", mqs, cids) == [MessageQueue("T", "broker-b", 0)]


def test_consistent_hash_matches_rocketmq_ring():
    # Expected values printed by a Java program that builds RocketMQ's ring (TreeMap of the first four MD5
    # bytes of "cid-i", ten points each, tailMap lookup of MessageQueue.toString()).
    mqs = queues(8, "TopicTest", "broker-a")
    cids = ["10.0.0.1@100", "10.0.0.2@200", "10.0.0.3@300"]
    assert [ids(allocate_consistent_hash(GROUP, cid, mqs, cids)) for cid in cids] == [[0, 2], [1, 5, 6, 7], [3, 4]]


def test_unknown_consumer_gets_nothing_and_is_logged(caplog):
    with caplog.at_level("INFO", logger="core.allocate"):
        result = allocate_averagely(GROUP, "stranger", queues(4), ["c0", "c1"])
    assert result == []
    assert "'stranger' is not among the group's consumers" in caplog.text


@pytest.mark.parametrize("strategy", list(AllocateStrategy))
def test_empty_inputs_give_nothing(strategy):
    assert allocate(strategy, GROUP, "c0", [], ["c0"]) == []
    assert allocate(strategy, GROUP, "c0", queues(4), []) == []


def test_empty_current_consumer_is_refused():
    with pytest.raises(ValueError, match="current consumer id is empty"):
        allocate_averagely(GROUP, "", queues(4), ["c0"])


def test_virtual_nodes_must_be_positive():
    with pytest.raises(ValueError, match="virtual_nodes is 0"):
        allocate_consistent_hash(GROUP, "c0", queues(4), ["c0"], virtual_nodes=0)


def test_consistent_hash_single_consumer_takes_all_and_more_virtual_nodes_still_cover_everything():
    mqs = queues(16)
    assert allocate_consistent_hash(GROUP, "only", mqs, ["only"]) == mqs
    cids = ["a", "b", "c"]
    shares = [allocate_consistent_hash(GROUP, cid, mqs, cids, virtual_nodes=100) for cid in cids]
    assert sorted(mq for share in shares for mq in share) == mqs


def test_consistent_hash_is_the_same_in_every_process():
    # Python's hash() of a str changes with PYTHONHASHSEED; the ring must not, or consumers in different
    # processes would disagree about who owns what.
    script = (
        "from core.allocate import allocate_consistent_hash\n"
        "from core.message_queue import MessageQueue\n"
        "mqs = [MessageQueue('T', 'b', i) for i in range(32)]\n"
        "cids = ['c0', 'c1', 'c2', 'c3']\n"
        "print([[mq.queue_id for mq in allocate_consistent_hash('g', c, mqs, cids)] for c in cids])\n"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    here = [
        [mq.queue_id for mq in allocate_consistent_hash("g", c, queues(32, "T", "b"), ["c0", "c1", "c2", "c3"])]
        for c in ["c0", "c1", "c2", "c3"]
    ]
    assert outputs == {f"{here}\n"}


def test_strategy_names_are_rocketmq_names():
    assert [s.value for s in AllocateStrategy] == ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]
