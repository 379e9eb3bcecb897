"""Cluster benchmark: `mqgate namesrv` and `mqgate serve` broker groups as separate processes on this machine, as
docs/cluster.md starts them. One run measures:

* send: the same client load (bench/remoting.py's: one C++ client process, rocketmq-client-python 0.5.0rc2, with
  16 threads calling send_sync, 1 KiB bodies) against a cluster of one broker group, then of two, topic `bench`
  created with `mqgate admin --namesrv ... --cluster` (4 queues per group). Figures: `cluster.send.msgs_per_s_1_group`,
  `cluster.send.msgs_per_s_2_groups` and `cluster.send.ratio_2_groups_to_1`. On one machine of 2 cores the two
  groups share the cores with each other and with the client: the ratio shows the cluster's overhead (routing over
  more queues, two processes), not its scale; docs/cluster.md gives the figures expected on separate machines.
* reroute: mqgate's remote client (remote_client.Producer) sends 1 KiB messages one after another to a topic of two
  groups, until the next send is aimed at broker-b (queues go a0..a3, b0..b3 in turn); broker-b is killed with
  SIGKILL and that send made. Figure: `cluster.reroute_s`, from the kill to its SEND_OK by broker-a, median of 5
  kills (broker-b restarted on its data between them).

    python bench/cluster.py [--quick]

Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.remoting import run_client
from bench.serve_child import ROOT, ServeChild

CLUSTER = "C"
QUEUES = 4
BODY = b"x" * 1024


def emit(key: str, value: float | str) -> None:
    print(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}", flush=True)


def start_namesrv() -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "mqgate.cli", "namesrv", "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout.fileno()], [], [], 60)
    line = os.read(process.stdout.fileno(), 4096).decode().strip() if readable else ""
    if not line.startswith("ready namesrv="):
        raise SystemExit(f"mqgate namesrv did not start: {line!r}")
    return process, line.split("=", 1)[1]


def admin(namesrv: str, *args: str) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "admin", "--namesrv", namesrv, *args, "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"mqgate admin {' '.join(args)} failed: {done.stderr}")
    return json.loads(done.stdout)


def broker(root: Path, namesrv: str, name: str) -> ServeChild:
    args = ("--namesrv-addr", namesrv, "--cluster-name", CLUSTER, "--broker-name", name)
    return ServeChild(root / name, root / f"{name}.stderr", args)


def wait_registered(namesrv: str, names: set[str]) -> None:
    deadline = time.monotonic() + 60
    while not names <= {row["broker"] for row in admin(namesrv, "cluster", "list")}:  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise SystemExit(f"{names} did not register within 60 s")
        time.sleep(0.3)


def send_round(groups: int, count: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as data:
        root = Path(data)
        namesrv_process, namesrv = start_namesrv()
        brokers = [broker(root, namesrv, f"broker-{chr(ord('a') + n)}") for n in range(groups)]
        try:
            wait_registered(namesrv, {f"broker-{chr(ord('a') + n)}" for n in range(groups)})
            admin(namesrv, "topic", "create", "bench", "--cluster", CLUSTER, "--queues", str(QUEUES))
            sent = run_client(namesrv, "send", count)
            if sent.get("failed"):
                emit(f"cluster.send.failed_{groups}", str(sent["failed"]))
            return float(sent["rate"])
        finally:
            for child in brokers:
                child.stop()
            namesrv_process.terminate()
            namesrv_process.wait()


async def reroute_rounds(rounds: int) -> list[float]:
    from core import MessageQueue
    from remote_client import Cluster, Producer

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as data:
        root = Path(data)
        namesrv_process, namesrv = start_namesrv()
        children = {name: broker(root, namesrv, name) for name in ("broker-a", "broker-b")}
        try:
            wait_registered(namesrv, set(children))
            admin(namesrv, "topic", "create", "reroute", "--cluster", CLUSTER, "--queues", str(QUEUES))
            figures = []
            for _ in range(rounds):
                async with Cluster(namesrv) as client:
                    producer = Producer(client)
                    for _ in range(50):  # routes, connections, both groups in use
                        await producer.send("reroute", BODY)
                    # Queues go a0..a3, b0..b3 in turn: after a3, the next send is aimed at broker-b.
                    last = MessageQueue("reroute", "broker-a", QUEUES - 1)
                    while (await producer.send("reroute", BODY)).message_queue != last:
                        pass
                    children["broker-b"].process.kill()
                    children["broker-b"].process.wait()
                    killed_at = time.monotonic()
                    result = await producer.send("reroute", BODY)  # aimed at broker-b, acknowledged by broker-a
                    figures.append(time.monotonic() - killed_at)
                    if result.message_queue.broker_name != "broker-a":
                        raise SystemExit(f"the send after the kill was acknowledged by {result.message_queue}")
                children["broker-b"] = broker(root, namesrv, "broker-b")
                wait_registered(namesrv, set(children))
            return figures
        finally:
            for child in children.values():
                if child.process.poll() is None:
                    child.stop()
            namesrv_process.terminate()
            namesrv_process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer messages and kills")
    args = parser.parse_args()
    count = 5_000 if args.quick else 30_000
    rounds = 5
    one = send_round(1, count)
    two = send_round(2, count)
    emit("cluster.send.msgs_per_s_1_group", one)
    emit("cluster.send.msgs_per_s_2_groups", two)
    emit("cluster.send.ratio_2_groups_to_1", two / one)
    figures = asyncio.run(reroute_rounds(rounds))
    emit("cluster.reroute_s", statistics.median(figures))
    emit("cluster.reroute_s_max", max(figures))
    emit("cluster.messages", str(count))


if __name__ == "__main__":
    main()
