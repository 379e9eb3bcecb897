"""What the tests that drive rocketmq-python-client (the official RocketMQ 5 client) need around it; tests/conftest.py
imports this module, so before any test module imports the client.

- Its log: the client writes it under ~/logs/rocketmq_python, a path it resolves once, when first imported. It is
  imported here with HOME pointing at a temporary directory, then HOME is put back: the tests never write into the
  real home, and nothing else in the run sees the change.
- An event loop in the calling thread: 5.1.2 creates its gRPC telemetry stream in the thread that starts the
  client, where grpc.aio asks for the thread's current loop; after an asyncio test, pytest-asyncio leaves the main
  thread without one, and the client then fails to start ("There is no current event loop"). `event_loop_for_client`
  gives a synchronous test one.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

_home = tempfile.mkdtemp(prefix="mqgate-rocketmq-home-")
_saved_home = os.environ.get("HOME")
os.environ["HOME"] = _home
try:
    import rocketmq  # noqa: F401
finally:
    if _saved_home is None:
        del os.environ["HOME"]
    else:
        os.environ["HOME"] = _saved_home
# The client's log handler keeps its file open; on POSIX the directory can go while it is open.
atexit.register(shutil.rmtree, _home, ignore_errors=True)


@pytest.fixture(autouse=True)
def event_loop_for_client(request: pytest.FixtureRequest) -> Iterator[None]:
    if inspect.iscoroutinefunction(getattr(request, "function", None)):
        yield  # pytest-asyncio runs it in its own loop
        return
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            yield
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        return
    yield
