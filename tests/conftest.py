import logging

import pytest
from hypothesis import HealthCheck, settings

from tests.compiled_modules import stale
from tests.rocketmq5_client import event_loop_for_client  # noqa: F401 (autouse; imports the client first)
from tests.serve_process import RUNNING

logging.getLogger("core").setLevel(logging.INFO)

# The CI machine's speed drifts by 2x within minutes: a per-example deadline or a "too slow" health check would
# fail on the machine's mood, not on our code. Examples are still random, so real bugs are still found.
settings.register_profile("mqgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mqgate")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Python imports a compiled module in preference to its .py, even an older build: stop rather than test old
    code."""
    old = stale()
    if old:
        pytest.exit(
            f"compiled modules older than their source: {', '.join(old)}; run `make compiled` to build them again,"
            " or `make uncompiled` to test the interpreted modules",
            returncode=2,
        )


@pytest.fixture(autouse=True)
def no_server_left_running():
    """Kill any `mqgate serve` a test started and left running (it failed before stopping it): a CI run once kept
    such a server, and its index process, busy beside the rest of the suite for half an hour. Servers of wider
    fixtures are left to them."""
    before = set(RUNNING)  # a module's shared server is started before this (wider fixtures are set up first)
    yield
    for server in RUNNING - before:
        server.kill()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (a stable sort: each file's tests stay together and in order). `make test` hands whole
    files to two workers in collection order; the longest ones (the README walk, the Spark sink, the cluster tests)
    started last would leave one worker alone with them at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
