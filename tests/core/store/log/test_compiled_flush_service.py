"""The compiled group-commit waiters (core/store/log/flush_service.py) against their pure twin, the same .py interpreted
(tests/compiled_modules.py): the same sequence of writers registering, flushes starting and flushes ending answers
the same writers, at the same steps, with the same results."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

import core.store.log.flush_service as compiled
from tests.compiled_modules import pure_twin

pure = pure_twin("core.store.log.flush_service")

# A step: a writer registers the end offset of its record, a flush starts, or a flush reaches an offset.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 5_000)),
        st.tuples(st.just("start"), st.just(0)),
        st.tuples(st.just("release"), st.integers(0, 5_000)),
    ),
    max_size=40,
)


async def answers(module, sequence):
    """After each step, which writers have their answer, and what it is."""
    waiters = module.FlushWaiters(timeout_s=30)
    futures = []
    seen = []
    for kind, value in sequence:
        if kind == "write":
            futures.append(waiters.add_async(value))
        elif kind == "start":
            waiters.flush_starting()
        else:
            waiters.release(value)
        for _ in range(3):  # the release reaches the loop through call_soon_threadsafe
            await asyncio.sleep(0)
        seen.append([future.result() if future.done() else None for future in futures])
    return seen


@settings(max_examples=100, deadline=None)
@given(sequence=steps)
def test_group_commit_waiters_answer_as_their_pure_twin(sequence):
    assert compiled.FlushWaiters is not pure.FlushWaiters
    assert asyncio.run(answers(compiled, sequence)) == asyncio.run(answers(pure, sequence))
