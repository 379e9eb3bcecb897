"""SIGKILL of one broker group under load, from each kind of client (the C++ client, ali-ons, the official RocketMQ
5 Python and Node.js clients, mqgate's remote client): sends go on on the other group within seconds, and no SEND_OK
is lost: once the killed group is back, every message acknowledged is in the topic, on one group or the other."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from core import ConsumeFromWhere, PullStatus
from remote_client import Cluster
from remote_client import Producer as RemoteProducer
from remote_client import PullConsumer as RemotePullConsumer
from tests.broker_remoting import cpp_clients
from tests.cluster.processes import CLUSTER, ClusterProcesses

pytestmark = pytest.mark.slow

MESSAGES = 300
INTERVAL_S = 0.02
KILL_AFTER_S = 1.5
# "Within seconds": the first acknowledged send after the kill comes this soon at the latest. A send in flight to
# the killed group when it dies waits out the client's send timeout (RocketMQ's default, 3 s) before its retry.
GOES_ON_WITHIN_S = 5.0
ROOT = Path(__file__).resolve().parents[1]


def stored_bodies(cluster: ClusterProcesses, topic: str) -> set[str]:
    """Every body in the topic, on every group (read from the first offset)."""

    async def read() -> set[str]:
        async with Cluster(cluster.namesrv_addr) as client:
            consumer = RemotePullConsumer(client, "failover_check", consume_from=ConsumeFromWhere.FIRST_OFFSET)
            bodies = set()
            for queue in await consumer.fetch_queues(topic):
                offset = 0
                while True:
                    got = await consumer.pull(queue, offset, 32)
                    if got.status is not PullStatus.FOUND:
                        break
                    bodies |= {m.body.decode() for m in got.messages}
                    offset = got.next_begin_offset
            return bodies

    return asyncio.run(read())


def kill_during(cluster: ClusterProcesses, sending: Callable[[], list[dict[str, Any]]]) -> tuple[list[dict], float]:
    """Run `sending` (it returns its result lines), SIGKILL broker-b KILL_AFTER_S into it, wait for it to end, then
    start broker-b again on its data directory."""
    result: list[list[dict[str, Any]]] = []
    sender = threading.Thread(target=lambda: result.append(sending()))
    sender.start()
    time.sleep(KILL_AFTER_S)
    killed_at = time.time()
    cluster.brokers["broker-b"].kill()
    sender.join(timeout=300)
    assert result, "the sender did not end"
    cluster.start_broker("broker-b")
    cluster.wait_registered(("broker-a", "broker-b"))
    return result[0], killed_at


def check(cluster: ClusterProcesses, topic: str, lines: list[dict[str, Any]], killed_at: float) -> None:
    acknowledged = [line for line in lines if "error" not in line]
    assert len(acknowledged) >= MESSAGES * 0.8, f"only {len(acknowledged)} of {MESSAGES} sends acknowledged"
    after = sorted(line["t"] for line in acknowledged if line["t"] > killed_at)
    assert after, "no send was acknowledged after the kill"
    assert after[0] - killed_at < GOES_ON_WITHIN_S
    missing = {line["body"] for line in acknowledged} - stored_bodies(cluster, topic)
    assert not missing, f"{len(missing)} acknowledged messages are not in the topic, e.g. {sorted(missing)[:5]}"


def test_the_cpp_client(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "fo_cpp", "--cluster", CLUSTER, "--queues", "4")
    lines, killed_at = kill_during(cluster, lambda: cpp_clients.run(
        cluster.namesrv_addr, "send", "fo_cpp", "--count", MESSAGES, "--interval", INTERVAL_S, "--keep-going",
        "--body", "c", "--timeout-ms", 3000,
    ))  # fmt: skip
    check(cluster, "fo_cpp", lines, killed_at)


def _node(directory: Path, *args: object) -> list[dict[str, Any]]:
    done = subprocess.run(["node", *map(str, args)], cwd=directory, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_ali_ons(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "fo_ons", "--cluster", CLUSTER, "--queues", "4")
    directory = ROOT / "broker_remoting" / "node"
    lines, killed_at = kill_during(cluster, lambda: _node(
        directory, "ons_driver.js", cluster.namesrv_addr, "send", "fo_ons", "t", MESSAGES, "o", INTERVAL_S * 1000
    ))  # fmt: skip
    check(cluster, "fo_ons", lines, killed_at)


def _grpc_endpoint(cluster: ClusterProcesses) -> str:
    return f"127.0.0.1:{cluster.brokers['broker-a'].ready['grpc'].rpartition(':')[2]}"


def test_the_python_grpc_client(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "fo_py", "--cluster", CLUSTER, "--queues", "4")
    config = ClientConfiguration(_grpc_endpoint(cluster), Credentials("", ""), request_timeout=3)

    def sending() -> list[dict[str, Any]]:
        producer = Producer(config, ("fo_py",))
        producer.startup()
        lines: list[dict[str, Any]] = []
        try:
            for n in range(MESSAGES):
                message = Message()
                message.topic, message.body = "fo_py", f"p-{n}".encode()
                try:
                    producer.send(message)
                    lines.append({"body": f"p-{n}", "t": time.time()})
                except Exception as exc:
                    lines.append({"error": str(exc), "body": f"p-{n}", "t": time.time()})
                time.sleep(INTERVAL_S)
        finally:
            producer.shutdown()
        return lines

    lines, killed_at = kill_during(cluster, sending)
    check(cluster, "fo_py", lines, killed_at)


def test_the_nodejs_grpc_client(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "fo_node", "--cluster", CLUSTER, "--queues", "4")
    directory = ROOT / "proxy" / "node"
    lines, killed_at = kill_during(cluster, lambda: _node(
        directory, "grpc_driver.js", _grpc_endpoint(cluster), "send", "fo_node", MESSAGES, "n", INTERVAL_S * 1000
    ))  # fmt: skip
    check(cluster, "fo_node", lines, killed_at)


def test_the_remote_client(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "fo_remote", "--cluster", CLUSTER, "--queues", "4")

    def sending() -> list[dict[str, Any]]:
        async def send_all() -> list[dict[str, Any]]:
            lines: list[dict[str, Any]] = []
            async with Cluster(cluster.namesrv_addr) as client:
                producer = RemoteProducer(client)
                for n in range(MESSAGES):
                    try:
                        await producer.send("fo_remote", f"r-{n}".encode())
                        lines.append({"body": f"r-{n}", "t": time.time()})
                    except Exception as exc:
                        lines.append({"error": str(exc), "body": f"r-{n}", "t": time.time()})
                    await asyncio.sleep(INTERVAL_S)
            return lines

        return asyncio.run(send_all())

    lines, killed_at = kill_during(cluster, sending)
    check(cluster, "fo_remote", lines, killed_at)
    # The remote client goes around the dead group at once: no send failed.
    assert not [line for line in lines if "error" in line]
