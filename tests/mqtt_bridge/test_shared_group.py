"""SharedGroup: how the members of a shared subscription split one light queue (no sockets)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtt_bridge.shared_group import SharedGroup, shared_group_name


def make(next_offset: int = 0) -> SharedGroup:
    return SharedGroup("%LMQ%S%x", "g", "a/#", next_offset, members={"a", "b"})


def test_take_hands_out_each_offset_once():
    group = make(10)
    assert group.take("a", 15, 3) == [10, 11, 12]
    assert group.take("b", 15, 3) == [13, 14]
    assert group.take("a", 15, 3) == []
    assert group.backlog(15) == 0
    assert group.committed() == 10


def test_committed_is_the_lowest_unsettled():
    group = make()
    group.take("a", 5, 5)
    group.settle(1)
    group.settle(0)
    assert group.committed() == 2
    for offset in (2, 3, 4):
        group.settle(offset)
    assert group.committed() == 5


def test_given_back_offsets_go_out_first_and_hold_the_commit():
    group = make()
    group.take("a", 4, 4)
    group.take("b", 8, 2)
    group.settle(0)
    assert sorted(group.give_back_member("a")) == [1, 2, 3]
    assert group.committed() == 1
    assert group.backlog(8) == 3 + 2
    assert group.take("b", 8, 4) == [1, 2, 3, 6]
    assert group.taken == {4: "b", 5: "b", 1: "b", 2: "b", 3: "b", 6: "b"}


def test_give_back_ignores_offsets_not_held():
    group = make()
    group.take("a", 2, 2)
    group.settle(0)
    group.give_back([0, 1, 7])
    assert group.returned == [1]


def test_skip_to_drops_waiting_offsets_below():
    group = make()
    group.take("a", 6, 6)
    group.give_back([1, 4])
    assert group.skip_to(3) == 1  # the given-back 1 is dropped; 3..5 were never waiting (4 is kept)
    assert group.returned == [4]
    assert group.skip_to(10) == 1 + 4  # 4, and 6..9 never taken
    assert group.next_offset == 10


def test_group_names_differ_per_queue_and_are_core_names():
    one, two = shared_group_name("%LMQ%S%$share_g_a%1"), shared_group_name("%LMQ%S%$share_g_a%2")
    assert one != two
    assert one.startswith("MQTT_SHARED_") and "$" not in one and "%" not in one


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from("tsgk"), st.sampled_from("abc"), st.integers(1, 5)), max_size=60))
def test_every_offset_is_settled_once_at_most_and_never_lost(steps):
    """Whatever members take, settle, give back or lose, every offset below the end is with exactly one of:
    settled, taken by one member, given back, or not yet taken; and the commit never passes an unsettled one."""
    group = SharedGroup("q", "g", "#", 0, members={"a", "b", "c"})
    high = 0
    settled: set[int] = set()
    for action, member, count in steps:
        high += count
        if action == "t":
            for offset in group.take(member, high, count):
                assert offset not in settled
        elif action == "s":
            held = sorted(offset for offset, who in group.taken.items() if who == member)[:count]
            for offset in held:
                group.settle(offset)
                settled.add(offset)
        elif action == "g":
            group.give_back_member(member)
        else:
            held = sorted(offset for offset, who in group.taken.items() if who == member)[-count:]
            group.give_back(held)
        waiting = set(group.returned) | set(range(group.next_offset, high))
        taken = set(group.taken)
        assert not (waiting & taken) and not (settled & (waiting | taken))
        assert settled | waiting | taken == set(range(high))
        unsettled = waiting | taken
        assert group.committed() == (min(unsettled) if unsettled else group.next_offset)
