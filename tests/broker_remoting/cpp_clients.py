"""Runs tests/broker_remoting/cpp_driver.py (the C++ RocketMQ 4 client) as child processes and reads what they print."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.broker_remoting.rocketmq4_clients import python_client_env

ROOT = Path(__file__).resolve().parents[2]
# A loaded CI machine starts a client slowly; every wait ends as soon as its process does.
CLIENT_TIMEOUT_S = 90.0
# What the C++ client prints when it aborts in TransactionMQProducer.shutdown().
SHUTDOWN_ABORT = "terminate called after throwing an instance of 'boost::thread_interrupted'"
# Each client gets a home of its own: the C++ client keeps a broadcasting consumer's offsets in
# ~/.rocketmq_offsets and its log in ~/logs, and offsets a run left there would send another run's consumer to
# offsets its broker never had.
_HOMES = tempfile.TemporaryDirectory(prefix="rocketmq4-clients-")


def start(namesrv: str, *args: str | int | float) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.broker_remoting.cpp_driver", namesrv, *map(str, args)]
    env = {**python_client_env(), "HOME": tempfile.mkdtemp(dir=_HOMES.name)}
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """Wait for the client to end; its JSON lines. Fails with its stderr if it failed."""
    try:
        out, err = process.communicate(timeout=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"client did not end within {CLIENT_TIMEOUT_S} s: {err[-2000:]}") from None
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    results = [line for line in lines if line != {"done": True}]
    if process.returncode == -signal.SIGABRT and SHUTDOWN_ABORT in err and {"done": True} in lines:
        # The C++ client's transactional producer sometimes aborts in its own shutdown(), once everything it was
        # asked to do was done and answered (its check-back threads are interrupted by a boost exception nobody
        # catches): the broker's side is what the tests look at, and it is all in the lines.
        return results
    assert process.returncode == 0, f"client exited {process.returncode}: {err[-2000:]}"
    return results


def run(namesrv: str, *args: str | int | float) -> list[dict[str, Any]]:
    return finish(start(namesrv, *args))
