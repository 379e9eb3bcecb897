"""`mqgate namesrv` as a real process: it prints `ready namesrv=HOST:PORT`, a broker registers with it and a client
reads the topic list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 206) with mqgate's remoting client, SIGTERM or SIGINT end
it with exit code 0; a port in use ends it with exit code 2 and serve's error."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.namesrv.test_namesrv import register
from tests.serve_process import ROOT, START_TIMEOUT_S

STOP_TIMEOUT_S = 30


def namesrv_process(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mqgate.cli", "namesrv", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def ready_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    data = b""
    while not data.endswith(b"\n"):
        readable, _, _ = select.select([process.stdout], [], [], max(deadline - time.monotonic(), 0))
        assert readable, f"no ready line within {START_TIMEOUT_S} s"
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, f"exited ({process.wait()}) before ready: {process.stderr.read() if process.stderr else ''!r}"
        data += chunk
    return data.decode().strip()


@pytest.fixture
def started() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    process = namesrv_process("--port", "0", "--host", "127.0.0.1")
    try:
        yield process, ready_line(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(STOP_TIMEOUT_S)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_it_serves_routes_until_a_signal_and_exits_0(started, stop: signal.Signals):
    process, line = started
    name, _, address = line.removeprefix("ready ").partition("=")
    assert line.startswith("ready ") and name == "namesrv" and address.startswith("127.0.0.1:")
    assert int(address.rpartition(":")[2]) > 0
    broker, client = RemotingClient(), RemotingClient()
    try:
        assert (await broker.invoke(address, register(), 10)).code == ResponseCode.SUCCESS
        reply = await client.invoke(address, RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 10)
    finally:
        await broker.close()
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert sorted(json.loads(reply.body)["topicList"]) == ["TBW102", "orders"]
    process.send_signal(stop)
    assert process.wait(STOP_TIMEOUT_S) == 0
    assert process.stderr is not None
    assert "NameServer closed" in process.stderr.read().decode()


def test_a_port_in_use_exits_2_naming_the_address_and_the_flag():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "mqgate.cli", "namesrv", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        f"mqgate: error: [namesrv] cannot listen on 127.0.0.1:{port}: address already in use (a RocketMQ broker or"
        " NameServer (mqbroker, mqnamesrv) may hold it); choose another port with --port (0: a free one)"
    )


def test_a_port_out_of_range_is_a_usage_error():
    result = subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "namesrv", "--port", "70000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--port 70000: a port goes from 0 to 65535 (0: a free one)" in result.stderr
