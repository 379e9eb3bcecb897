"""A stop (SIGTERM) while the Spark sink starts its JVM ends `mqgate serve` at once, cleanly: the start is not waited
for. The sink's master is a standalone master that accepts connections and never answers, so the start would take
minutes (Spark's standalone client waits 3 x 20 s to register); the server must be gone long before that. And a
local master binds loopback: Spark does not go looking for another interface and say so on mqgate's stderr."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve_process import ServeProcess

# Long enough for a loaded machine to start Python, mqgate and the JVM's launcher.
LOG_WAIT_S = 60.0


@pytest.fixture
def silent_master() -> Iterator[str]:
    """A spark:// URL whose port takes connections into its backlog and never answers them."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"spark://127.0.0.1:{listener.getsockname()[1]}"


def wait_for_log(serve: ServeProcess, text: str) -> None:
    deadline = time.monotonic() + LOG_WAIT_S
    while text not in serve.stderr():
        assert serve.process.poll() is None, serve.stderr()
        assert time.monotonic() < deadline, f"no {text!r} in the log: {serve.stderr()}"
        time.sleep(0.1)


def sink_file(data: Path, master: str, lake: Path) -> None:
    (data / "connectors").mkdir(parents=True)
    (data / "connectors" / "lake.yaml").write_text(
        f"name: lake\nconnector.class: spark-sink\ntopics: sensors\npath: {lake}\nspark.master: {master}\n"
    )


def test_a_stop_while_the_jvm_starts_does_not_wait_for_it(tmp_path: Path, silent_master: str) -> None:
    data = tmp_path / "data"
    sink_file(data, silent_master, tmp_path / "lake")
    serve = ServeProcess(data)
    wait_for_log(serve, f"starting Spark on {silent_master}")
    # Its stop deadline (tests/serve_process.STOP_TIMEOUT_S, 30 s) is half of what the start would still take.
    assert serve.stop() == 0
    log = serve.stderr()
    assert "store closed" in log and "Spark sink lake: table" not in log


def test_a_local_master_binds_loopback_without_a_word(tmp_path: Path) -> None:
    data = tmp_path / "data"
    sink_file(data, "local[1]", tmp_path / "lake")
    serve = ServeProcess(data)
    try:
        wait_for_log(serve, "Spark sink lake: table")
    finally:
        assert serve.stop() == 0
    log = serve.stderr()
    assert "resolves to a loopback address" not in log and "SPARK_LOCAL_IP" not in log
    assert "fork_posix" not in log  # gRPC's fork handlers, while the JVM's launcher forks
