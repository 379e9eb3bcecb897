"""listener.Wakeup and DequeOnDemand: the per-connection stand-ins for asyncio.Event and collections.deque."""

from __future__ import annotations

import asyncio

import pytest

from mqtt_bridge.listener import DequeOnDemand, Wakeup


async def test_wait_returns_once_set_and_at_once_while_set():
    wakeup = Wakeup()
    waiter = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    wakeup.set()
    await waiter
    await wakeup.wait()  # still set
    wakeup.clear()
    assert not wakeup.is_set()


async def test_a_cancelled_waiter_does_not_leave_the_next_one_asleep():
    wakeup = Wakeup()
    first = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    first.cancel()
    second = asyncio.create_task(wakeup.wait())  # before the first has unwound
    await asyncio.sleep(0)
    with pytest.raises(asyncio.CancelledError):
        await first
    wakeup.set()
    await asyncio.wait_for(second, 5)


async def test_two_waiters_at_once_is_an_error():
    wakeup = Wakeup()
    first = asyncio.create_task(wakeup.wait())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already waiting"):
        await wakeup.wait()
    wakeup.set()
    await first


def test_deque_on_demand_behaves_like_the_deque_it_replaces():
    items: DequeOnDemand[int] = DequeOnDemand()
    assert not items and len(items) == 0
    with pytest.raises(IndexError):
        items[0]
    with pytest.raises(IndexError):
        items.popleft()
    items.append(1)
    items.append(2)
    assert items and items[0] == 1 and len(items) == 2
    assert items.popleft() == 1 and items.popleft() == 2
    assert not items
