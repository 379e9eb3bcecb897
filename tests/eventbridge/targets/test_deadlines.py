"""Deadlines swept by one timer: the same outcomes as asyncio.timeout_at (the reference), within the resolution."""

from __future__ import annotations

import asyncio

import pytest

from eventbridge.targets.deadlines import Deadlines


async def test_a_block_past_its_deadline_raises_timeout_error_and_not_before_it() -> None:
    deadlines = Deadlines(resolution_s=0.01)
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):  # the block would sleep 5 s: cut off at its deadline instead
        async with deadlines.after(0.05) as deadline:
            await asyncio.sleep(5)
    assert loop.time() >= deadline.when  # never before its deadline
    assert deadline.expired()
    assert deadlines.open_count() == 0


async def test_a_block_done_in_time_is_not_cancelled_later() -> None:
    deadlines = Deadlines(resolution_s=0.01)
    async with deadlines.after(0.05) as deadline:
        await asyncio.sleep(0)
    assert deadlines.open_count() == 0
    await asyncio.sleep(0.1)  # past the deadline and its sweep: nothing left to cancel this task
    assert not deadline.expired()
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_many_deadlines_only_the_overdue_ones_expire() -> None:
    deadlines = Deadlines(resolution_s=0.01)

    async def wait(limit: float, work: float) -> str:
        try:
            async with deadlines.after(limit):
                await asyncio.sleep(work)
        except TimeoutError:
            return "timeout"
        return "done"

    cases = [(0.03, 0.0), (0.03, 0.3), (0.2, 0.01), (0.05, 0.5), (1.0, 0.02)] * 20
    outcomes = await asyncio.gather(*(wait(limit, work) for limit, work in cases))
    assert outcomes == ["timeout" if work > limit else "done" for limit, work in cases]
    assert deadlines.open_count() == 0


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    deadlines = Deadlines(resolution_s=0.01)
    entered = asyncio.Event()

    async def guarded() -> None:
        async with deadlines.after(10):
            entered.set()
            await asyncio.sleep(5)

    task = asyncio.get_running_loop().create_task(guarded())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines.open_count() == 0


async def test_an_outside_cancellation_with_an_expiry_stays_a_cancellation() -> None:
    # As asyncio.timeout: when both happen, the task's cancel count shows another request and it wins.
    deadlines = Deadlines(resolution_s=0.01)
    results: dict[str, str] = {}

    async def guarded(name: str, make: object) -> None:
        try:
            async with make(0.02):  # type: ignore[operator]
                try:
                    await asyncio.sleep(5)
                except asyncio.CancelledError:
                    asyncio.current_task().cancel()  # type: ignore[union-attr]  # a second request, from inside
                    raise
        except TimeoutError:
            results[name] = "timeout"
        except asyncio.CancelledError:
            results[name] = "cancelled"

    loop = asyncio.get_running_loop()
    await asyncio.gather(
        guarded("ours", deadlines.after),
        guarded("asyncio", lambda s: asyncio.timeout_at(loop.time() + s)),
        return_exceptions=True,  # each task ends cancelled: its second request is still pending when it returns
    )
    assert results == {"ours": "cancelled", "asyncio": "cancelled"}


async def test_an_error_inside_passes_through() -> None:
    deadlines = Deadlines()
    with pytest.raises(KeyError):
        async with deadlines.after(1):
            raise KeyError("x")
    assert deadlines.open_count() == 0


async def test_a_deadline_is_entered_once() -> None:
    deadline = Deadlines().after(1)
    async with deadline:
        pass
    with pytest.raises(RuntimeError):
        async with deadline:
            pass


def test_resolution_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Deadlines(resolution_s=0)
