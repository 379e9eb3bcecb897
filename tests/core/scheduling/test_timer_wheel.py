"""The timer wheel on its own (core/scheduling/timer_wheel.py): seconds come out in order, nothing is lost or repeated,
no entry lands at or before a second that is done or firing, and the low-water offset is the lowest pending one; checked
against a plain list under random operations."""

from hypothesis import given, settings
from hypothesis import strategies as st

from core.scheduling.timer_wheel import TimerWheel

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 60)),
        st.tuples(st.just("fire"), st.just(0)),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_wheel_fires_every_entry_once_in_second_order(ops):
    wheel = TimerWheel(fired_through=10)
    pending: list[tuple[int, int, int]] = []  # (second, commit-log offset, queue offset): the reference
    fired: list[tuple[int, int]] = []
    next_offset = 0
    for op, value in ops:
        if op == "add":
            second = wheel.add(value, next_offset * 100, next_offset)
            assert second == max(value, wheel.fired_through + 1) and second > wheel.fired_through
            pending.append((second, next_offset * 100, next_offset))
            next_offset += 1
        else:
            second = wheel.next_second()
            if second is None:
                assert not pending
                continue
            assert second == min(s for s, _, _ in pending)
            taken = wheel.take(second)
            assert wheel.earliest == second + 1  # nothing may join a second under way
            assert sorted(taken) == sorted(c for s, c, _ in pending if s == second)
            fired += [(second, c) for c in taken]
            pending = [p for p in pending if p[0] != second]
            wheel.done(second)
            assert wheel.fired_through == second
        assert len(wheel) == len(pending)
        assert wheel.low_water(next_offset) == min((q for _, _, q in pending), default=next_offset)
    seconds = [s for s, _ in fired]
    assert seconds == sorted(seconds)
    assert len({c for _, c in fired}) == len(fired)


def test_take_refuses_a_second_that_is_not_the_earliest():
    wheel = TimerWheel(fired_through=0)
    wheel.add(5, 1, 0)
    wheel.add(3, 2, 1)
    try:
        wheel.take(5)
    except ValueError as exc:
        assert "not the earliest" in str(exc)
    else:
        raise AssertionError("take(5) should have been refused")
    assert wheel.take(3) == [2]
