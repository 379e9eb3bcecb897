"""The official RocketMQ 5 clients on a cluster of processes (one NameServer, two broker groups, a gRPC endpoint in
each broker process, as RocketMQ 5's proxy in local mode): the routes of either endpoint name both groups' queues,
sends spread over both, and a SimpleConsumer given one endpoint receives every message."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from tests.cluster.processes import CLUSTER, ClusterProcesses
from tests.proxy.serving import receive_all

pytestmark = pytest.mark.slow

MESSAGES = 200
NODE_DIR = Path(__file__).resolve().parents[1] / "proxy" / "node"
CLIENT_TIMEOUT_S = 120.0


def endpoint(cluster: ClusterProcesses, name: str) -> str:
    return f"127.0.0.1:{cluster.brokers[name].ready['grpc'].rpartition(':')[2]}"


def config(cluster: ClusterProcesses, name: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint(cluster, name), Credentials("", ""), request_timeout=10)


def test_the_python_client_sends_over_both_groups_and_receives_all_through_one_endpoint(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "grpc_spread", "--cluster", CLUSTER, "--queues", "4")
    producer = Producer(config(cluster, "broker-a"), ("grpc_spread",))
    producer.startup()
    try:
        for n in range(MESSAGES):
            message = Message()
            message.topic, message.body, message.tag = "grpc_spread", f"p-{n}".encode(), "py"
            producer.send(message)
    finally:
        producer.shutdown()
    spread = cluster.admin("topic", "status", "grpc_spread")["queues"]
    per_group = Counter()
    for queue in spread:
        per_group[queue["broker"]] += queue["messages"]
    assert set(per_group) == {"broker-a", "broker-b"} and sum(per_group.values()) == MESSAGES
    assert min(per_group.values()) >= MESSAGES // 4
    # Each receive goes to a queue the client picks at random (5.1.2 builds a new queue selector per receive), so a
    # receive may wait out its long poll at a group whose messages are all taken: short polls keep the test short.
    consumer = SimpleConsumer(
        config(cluster, "broker-b"), "grpc_pair", {"grpc_spread": FilterExpression("*")}, await_duration=2
    )
    consumer.startup()
    try:
        got = receive_all(consumer, MESSAGES)
    finally:
        consumer.shutdown()
    bodies = Counter(message.body.decode() for message in got)
    assert set(bodies) == {f"p-{n}" for n in range(MESSAGES)}


def node(cluster: ClusterProcesses, name: str, *args: object) -> list[dict]:
    done = subprocess.run(
        ["node", "grpc_driver.js", endpoint(cluster, name), *map(str, args)], cwd=NODE_DIR, capture_output=True,
        text=True, timeout=CLIENT_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_nodejs_client_sends_over_both_groups_and_receives_all_through_one_endpoint(cluster: ClusterProcesses):
    cluster.admin("topic", "create", "node_spread", "--cluster", CLUSTER, "--queues", "4")
    sent = node(cluster, "broker-b", "send", "node_spread", MESSAGES, "n")
    assert not [line for line in sent if "error" in line]
    by_group = Counter(line["broker"] for line in sent)
    assert set(by_group) == {"broker-a", "broker-b"} and min(by_group.values()) >= MESSAGES // 4
    got = node(cluster, "broker-a", "receive", "node_spread", "node_pair", MESSAGES, 90)
    assert Counter(line["body"] for line in got) == Counter(f"n-{n}" for n in range(MESSAGES))
