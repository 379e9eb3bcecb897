"""`mqgate admin --namesrv` on a cluster of processes: the brokers it lists, a topic created on every group of the
cluster or on one, and what it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.cluster.processes import CLUSTER, ClusterProcesses
from tests.serve_process import ROOT


def test_cluster_list_names_every_broker_with_its_address_version_and_registration(cluster: ClusterProcesses):
    brokers = cluster.admin("cluster", "list")
    assert [(b["cluster"], b["broker"], b["id"]) for b in brokers] == [
        (CLUSTER, "broker-a", 0),
        (CLUSTER, "broker-b", 0),
    ]
    for row in brokers:
        port = cluster.brokers[row["broker"]].ready["remoting"].rpartition(":")[2]
        assert row["address"].endswith(f":{port}")
        assert row["version"].startswith("mqgate") and row["last_registration_ms"] > 0


def test_a_topic_created_with_cluster_has_queues_on_every_group_and_with_broker_on_one(cluster: ClusterProcesses):
    made = cluster.admin("topic", "create", "spread", "--cluster", CLUSTER, "--queues", "3")
    assert made["broker_groups"] == ["broker-a", "broker-b"]
    status = cluster.admin("topic", "status", "spread")
    assert {name: g["write_queues"] for name, g in status["groups"].items()} == {"broker-a": 3, "broker-b": 3}
    assert [(q["broker"], q["queue_id"]) for q in status["queues"]] == [
        (b, q) for b in ("broker-a", "broker-b") for q in range(3)
    ]
    cluster.admin("topic", "create", "only-b", "--broker", "broker-b", "--queues", "2", "--type", "FIFO")
    listed = {t["topic"]: t for t in cluster.admin("topic", "list")}
    assert set(listed["only-b"]["groups"]) == {"broker-b"} and listed["spread"]["write_queues"] == 6
    deleted = cluster.admin("topic", "delete", "only-b")
    assert deleted["broker_groups"] == ["broker-b"]
    assert "only-b" not in {t["topic"] for t in cluster.admin("topic", "list")}


def test_what_it_cannot_do_is_refused_with_the_reason(cluster: ClusterProcesses):
    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mqgate.cli", "admin", *args]
        # Without --namesrv, what only a cluster answers asks the NameServers of $NAMESRV_ADDR, as mqadmin does.
        env = {**os.environ, "NAMESRV_ADDR": cluster.namesrv_addr}
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)

    ns = cluster.namesrv_addr
    nowhere = admin("--namesrv", ns, "topic", "create", "t")
    assert nowhere.returncode == 2 and "--cluster C (every broker group) or --broker B" in nowhere.stderr
    unknown = admin("--namesrv", ns, "topic", "create", "t", "--cluster", "nope")
    assert unknown.returncode == 1 and "cluster 'nope' has no broker group with a master" in unknown.stderr
    store = admin("--namesrv", ns, "store", "stats")
    assert store.returncode == 2 and "not available with --namesrv" in store.stderr
    no_ns = admin("topic", "create", "t", "--cluster", CLUSTER, "--json")
    assert no_ns.returncode == 0 and json.loads(no_ns.stdout)["broker_groups"] == ["broker-a", "broker-b"]
    dead = admin("--namesrv", "127.0.0.1:9", "cluster", "list")
    assert dead.returncode == 1 and "no NameServer answers" in dead.stderr
