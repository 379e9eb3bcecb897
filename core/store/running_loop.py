"""The event loop running in the calling thread, found without a system call (`running_loop`).

CPython 3.11's `asyncio.get_running_loop()` calls getpid() on every call (to tell a forked child's copy of a loop
from the parent's; 3.12 dropped the check), and glibc no longer caches the pid, so each call is a system call, on
paths that run once per message (a SYNC_FLUSH writer's wait, a pull). Here each thread keeps the loop it last found
and trusts it while it runs: at most one loop runs in a thread at a time, so the kept loop, if it runs and runs in
this thread, is the running loop. asyncio's own loops say which thread runs them and that is checked; uvloop's do
not, so a uvloop loop kept by one thread and later run by another while the first runs a new one would be taken
for the first's (mqgate runs one loop, in its main thread, for the life of the process). A forked child forgets
the kept loops.

In the store, the lowest layer, so that every layer may use it (core exports it to the front doors). Compiled
(pyproject.toml [tool.mqgate] compiled): its callers are.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Final

_kept: Final[Any] = threading.local()  # .loop: the loop this thread last found running


def running_loop() -> asyncio.AbstractEventLoop:
    """asyncio.get_running_loop(): the loop running in this thread; RuntimeError if none runs."""
    loop: asyncio.AbstractEventLoop | None = getattr(_kept, "loop", None)
    if loop is not None and loop.is_running():
        runner = getattr(loop, "_thread_id", None)  # asyncio's loops have it, uvloop's do not
        if runner is None or runner == threading.get_ident():
            return loop
    loop = asyncio.get_running_loop()
    _kept.loop = loop
    return loop


def _forget() -> None:
    _kept.loop = None


os.register_at_fork(after_in_child=_forget)
