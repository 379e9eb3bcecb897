"""Nothing acknowledged is lost over remoting: the C++ producer sends while `mqgate serve` is killed with SIGKILL;
after a restart on the same data directory every message answered SEND_OK is there, and a consumer group goes on
from the offsets it had committed before the kill."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.broker_remoting import cpp_clients
from tests.proxy.serving import WAIT_S, start, write_topics

pytestmark = pytest.mark.slow

# Committed offsets reach consumerOffset.json every second (RocketMQ: every 5 s): the consumer's commit at its stop
# is on disk before the kill.
CONFIG = """
[broker]
offset_persist_interval_s = 1
"""


def namesrv_of(serve) -> str:
    return f"127.0.0.1:{serve.ready['namesrv'].rpartition(':')[2]}"


def test_every_send_ok_survives_a_sigkill_and_consumers_resume_from_their_offsets(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_topics(data_dir, {"ledger": "NORMAL"})
    serve = start(data_dir, config=CONFIG)
    namesrv = namesrv_of(serve)
    cpp_clients.run(namesrv, "send", "ledger", "--count", 20, "--body", "before")
    consumed = cpp_clients.run(namesrv, "consume", "ledger", "cg_ledger", "--expect", 20, "--seconds", 60)
    assert len({line["body"] for line in consumed}) == 20
    time.sleep(2.5)  # the offsets the consumer committed at its stop are persisted
    producer = cpp_clients.start(namesrv, "send", "ledger", "--count", 1_000_000, "--body", "during")
    assert producer.stdout is not None
    acknowledged = []
    deadline = time.monotonic() + WAIT_S
    while len(acknowledged) < 300 and time.monotonic() < deadline:
        line = producer.stdout.readline()
        if line.startswith("{") and '"status": 0' in line:
            acknowledged.append(line)
    serve.kill()  # SIGKILL, mid-stream
    out, _ = producer.communicate(timeout=cpp_clients.CLIENT_TIMEOUT_S)
    acknowledged += [line for line in out.splitlines() if line.startswith("{") and '"status": 0' in line]
    assert len(acknowledged) >= 300
    serve = start(data_dir, config=CONFIG)
    try:
        after = cpp_clients.run(
            namesrv_of(serve),
            "consume",
            "ledger",
            "cg_ledger",
            "--want",
            len(acknowledged),
            "--want-prefix",
            "during",
            "--seconds",
            90,
        )
        bodies = [line["body"] for line in after]
        assert {f"during-{n}" for n in range(len(acknowledged))} <= set(bodies)  # every SEND_OK is there
        assert not any(body.startswith("before") for body in bodies)  # the group went on from its offsets
    finally:
        assert serve.stop() == 0
