"""Arrival flags (connectors/task_runner.py): set by an arrival in one of their queues, waited on only when nothing
arrived since the reader cleared them, woken by the shared backstop when an arrival was missed, and forgotten when
closed."""

from __future__ import annotations

import asyncio

from connectors.task_runner import Arrivals

# Far longer than a wake-up takes: a wait that has not returned by then never would.
NEVER_S = 10.0


async def test_an_arrival_in_one_of_its_queues_wakes_a_waiting_flag() -> None:
    arrivals = Arrivals()
    flag = arrivals.flag([("%LMQ%a", 0), ("%LMQ%b", 0)])
    waiting = asyncio.create_task(flag.wait(3600))
    await asyncio.sleep(0)
    arrivals.notify({("%LMQ%c", 0)})  # not one of its queues
    await asyncio.sleep(0.05)
    assert not waiting.done()
    arrivals.notify({("%LMQ%b", 0)})
    await asyncio.wait_for(waiting, NEVER_S)
    assert flag.is_set()
    flag.close()
    await arrivals.close()


async def test_an_arrival_before_the_wait_is_not_lost_and_clear_forgets_it() -> None:
    arrivals = Arrivals()
    flag = arrivals.flag([("%LMQ%a", 0)])
    arrivals.notify({("%LMQ%a", 0)})  # while the reader was reading
    await asyncio.wait_for(flag.wait(3600), NEVER_S)  # returns at once
    flag.clear()  # the reader reads again
    assert not flag.is_set()
    waiting = asyncio.create_task(flag.wait(3600))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    waiting.cancel()
    flag.close()
    await arrivals.close()


async def test_the_backstop_wakes_a_wait_whose_arrival_was_missed() -> None:
    arrivals = Arrivals()
    flag = arrivals.flag([("%LMQ%a", 0)])
    await asyncio.wait_for(flag.wait(0.1), NEVER_S)  # no arrival at all: the backstop ends it
    flag.close()
    await arrivals.close()


async def test_a_closed_flag_is_no_longer_set_by_arrivals() -> None:
    arrivals = Arrivals()
    kept = arrivals.flag([("%LMQ%a", 0)])
    closed = arrivals.flag([("%LMQ%a", 0)])
    closed.close()
    arrivals.notify({("%LMQ%a", 0)})
    assert kept.is_set()
    assert not closed.is_set()
    kept.close()
    await arrivals.close()
