"""core.store.running_loop.running_loop answers as asyncio.get_running_loop does, compiled and as its pure twin: with
loops run one after another in a thread, in several threads at once, with uvloop, and with no loop at all."""

import asyncio
import threading

import pytest
import uvloop

import core.store.running_loop as compiled
from tests.compiled_modules import pure_twin

pure = pure_twin("core.store.running_loop")
MODULES = [pytest.param(compiled, id="compiled"), pytest.param(pure, id="pure")]


async def found(module):
    first = module.running_loop()
    second = module.running_loop()  # from what the thread kept
    return first, second, asyncio.get_running_loop()


@pytest.mark.parametrize("module", MODULES)
def test_loops_run_one_after_another_in_a_thread_are_each_found(module):
    for new_loop in (asyncio.new_event_loop, uvloop.new_event_loop, asyncio.new_event_loop):
        loop = new_loop()
        try:
            first, second, actual = loop.run_until_complete(found(module))
        finally:
            loop.close()
        assert first is second is actual is loop


@pytest.mark.parametrize("module", MODULES)
def test_no_running_loop_is_a_runtime_error_even_after_one_ran(module):
    asyncio.run(found(module))
    with pytest.raises(RuntimeError, match="no running event loop"):
        module.running_loop()


@pytest.mark.parametrize("module", MODULES)
def test_threads_running_loops_at_once_each_find_their_own(module):
    results = {}
    start = threading.Barrier(3)

    def run(name):
        async def main():
            start.wait()
            seen = []
            for _ in range(50):
                seen.append(module.running_loop())
                await asyncio.sleep(0)
            return seen, asyncio.get_running_loop()

        results[name] = asyncio.run(main())

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loops = [loop for _, loop in results.values()]
    assert len(set(map(id, loops))) == 3
    for seen, loop in results.values():
        assert all(found_loop is loop for found_loop in seen)


@pytest.mark.parametrize("module", MODULES)
def test_an_asyncio_loop_kept_by_one_thread_and_run_by_another_is_not_taken_for_the_first_threads(module):
    kept = asyncio.new_event_loop()
    kept.run_until_complete(found(module))  # this thread now keeps `kept`
    answers = []
    release = threading.Event()
    running = threading.Event()

    async def hold():
        running.set()
        while not release.is_set():
            await asyncio.sleep(0.005)

    other = threading.Thread(target=kept.run_until_complete, args=(hold(),))
    other.start()
    try:
        assert running.wait(5)
        answers.append(asyncio.run(found(module)))  # a new loop here while `kept` runs in the other thread
    finally:
        release.set()
        other.join()
        kept.close()
    first, second, actual = answers[0]
    assert first is second is actual and actual is not kept
