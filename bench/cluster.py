"""Cluster benchmark: `mqgate namesrv` and `mqgate serve` broker groups as separate processes on this machine, as
docs/cluster.md starts them. One run measures:

* send: the same client load (bench/remoting.py's: one C++ client process, rocketmq-client-python 0.5.0rc2, with
  16 threads calling send_sync, 1 KiB bodies) against a cluster of one broker group, then of two, topic `bench`
  created with `mqgate admin --namesrv ... --cluster` (4 queues per group). Figures: `cluster.send.msgs_per_s_1_group`,
  `cluster.send.msgs_per_s_2_groups` and `cluster.send.ratio_2_groups_to_1`. On one machine of 2 cores the two
  groups share the cores with each other and with the client: the ratio shows the cluster's overhead (routing over
  more queues, two processes), not its scale; docs/cluster.md gives the figures expected on separate machines.
* replication: the same client load against one broker group of a master and a slave, the master an ASYNC_MASTER,
  then a SYNC_MASTER (a send is acknowledged once the slave holds it). Figures:
  `cluster.async_master.msgs_per_s`, `cluster.sync_master.msgs_per_s`, `cluster.sync_master.ratio_to_async_master`,
  and the slave's lag while the load runs, sampled from the master's GET_BROKER_HA_STATUS every 20 ms (how long ago
  the oldest record the slave lacks was stored): `cluster.replication.lag_ms.p50`, `.p99` and `.max` under the
  ASYNC_MASTER (under the SYNC_MASTER every send waits for the slave, and the lag is the wait:
  `cluster.sync_master.lag_ms.p99`).
* reroute: mqgate's remote client (remote_client.Producer) sends 1 KiB messages one after another to a topic of two
  groups, until the next send is aimed at broker-b (queues go a0..a3, b0..b3 in turn); broker-b is killed with
  SIGKILL and that send made. Figure: `cluster.reroute_s`, from the kill to its SEND_OK by broker-a, median of 5
  kills (broker-b restarted on its data between them).
* failover: etcd (Debian's etcd-server) and one broker group of three `mqgate serve --etcd` processes
  (SYNC_MASTER, ids 1-3); mqgate's remote client sends 1 KiB messages one after another while the master is killed
  with SIGKILL, 5 times (the killed broker restarted on its data, back as a slave, and the set of three again before
  the next kill). Figures: `cluster.failover_s`, from the kill to the first SEND_OK by the new master, median of the
  kills (and `_max`); `cluster.failover.acked_lost`, the acknowledged messages (over all rounds) missing from the
  last master's queues at the end.

* mqtt: two broker groups, each `mqgate serve` with its MQTT door (docs/cluster.md, "MQTT on a cluster"); one QoS 1
  stream of 64-byte messages (bench/mqtt_cross_node.py: raw MQTT 3.1.1 sockets, 64 unacknowledged, the send time
  in the payload), first with the publisher and the subscriber on broker-a, then with the publisher on broker-b.
  Figures: `cluster.mqtt.same_node.msgs_per_s`, `cluster.mqtt.cross_node.msgs_per_s`,
  `cluster.mqtt.cross_node.ratio_to_same_node`, and the latency from send to delivery, `.latency_ms.p50` and
  `.p99` of each: at full speed it includes the backlog a publisher faster than delivery builds, so each is also
  measured on a stream paced at PACED_RATE (`.paced.latency_ms.p50`, `.p99`).

    python bench/cluster.py [--quick] [--only failover|mqtt]

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
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.mqtt_cross_node import measure
from bench.remoting import run_client
from bench.serve_child import ROOT, ServeChild

CLUSTER = "C"
QUEUES = 4
BODY = b"x" * 1024
LAG_SAMPLE_S = 0.02
# The MQTT latency's second measure: a stream at this rate, well under what one node delivers, so that the latency
# is the path's and not a backlog's.
PACED_RATE = 2000.0


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


def broker(root: Path, namesrv: str, name: str, *extra: str, data: str | None = None) -> ServeChild:
    args = ("--namesrv-addr", namesrv, "--cluster-name", CLUSTER, "--broker-name", name, *extra)
    directory = data or name
    return ServeChild(root / directory, root / f"{directory}.stderr", args)


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


def lag_samples(address: str, stop: threading.Event, into: list[float]) -> None:
    """The slave's lag in ms, as the master at `address` reports it, every LAG_SAMPLE_S until `stop`."""
    from remoting.client import RemotingClient
    from remoting.codes import RequestCode
    from remoting.command import RemotingCommand
    from remoting.java_json import loads

    async def run() -> None:
        client = RemotingClient()
        try:
            while not stop.is_set():
                reply = await client.invoke(address, RemotingCommand(RequestCode.GET_BROKER_HA_STATUS), 5)
                for link in loads(reply.body).get("haConnectionInfo") or []:
                    into.append(float(link.get("lagSeconds", 0)) * 1000)
                await asyncio.sleep(LAG_SAMPLE_S)
        finally:
            await client.close()

    asyncio.run(run())


def replication_round(role: str, count: int) -> tuple[float, list[float]]:
    """Sends per second to a `role` master with one slave, and the slave's lag (ms) sampled meanwhile."""
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as data:
        root = Path(data)
        namesrv_process, namesrv = start_namesrv()
        master = broker(root, namesrv, "broker-a", "--role", role)
        slave = None
        try:
            wait_registered(namesrv, {"broker-a"})
            slave = broker(root, namesrv, "broker-a", "--role", "SLAVE", "--broker-id", "1", data="broker-a-s1")
            address = "127.0.0.1:" + master.ready["remoting"].rpartition(":")[2]
            deadline = time.monotonic() + 60
            while not [row for row in admin(namesrv, "cluster", "list")  # type: ignore[attr-defined]
                       if row["id"] == 1 and row.get("lag_bytes") == 0]:  # fmt: skip
                if time.monotonic() > deadline:
                    raise SystemExit("the slave did not catch up within 60 s")
                time.sleep(0.3)
            admin(namesrv, "topic", "create", "bench", "--cluster", CLUSTER, "--queues", str(QUEUES))
            stop, lags = threading.Event(), []
            sampler = threading.Thread(target=lag_samples, args=(address, stop, lags))
            sampler.start()
            try:
                sent = run_client(namesrv, "send", count)
            finally:
                stop.set()
                sampler.join()
            if sent.get("failed"):
                emit(f"cluster.{role.lower()}.failed", str(sent["failed"]))
            return float(sent["rate"]), lags
        finally:
            for child in (slave, master):
                if child is not None:
                    child.stop()
            namesrv_process.terminate()
            namesrv_process.wait()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


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


def member(root: Path, namesrv: str, etcd: str, broker_id: int) -> ServeChild:
    return broker(root, namesrv, "broker-a", "--broker-id", str(broker_id), "--role", "SYNC_MASTER", "--etcd", etcd,
                  data=f"broker-a-n{broker_id}")  # fmt: skip


async def sync_state_set(etcd: str) -> tuple[int | None, frozenset[int]]:
    import aetcd

    from controller.records import GroupRecords

    host, _, port = etcd.rpartition(":")
    async with aetcd.Client(host=host, port=int(port)) as client:
        record = (await GroupRecords(client, CLUSTER, "broker-a").read()).record
    return (None, frozenset()) if record is None else (record.master_id, record.sync_state_set)


async def elected(etcd: str, old: int, killed_at: float) -> float:
    """Seconds from the kill until etcd's record names another master."""
    while (await sync_state_set(etcd))[0] == old:
        await asyncio.sleep(0.05)
    return time.monotonic() - killed_at


async def failover_rounds(rounds: int) -> tuple[list[float], int, int]:
    """The seconds from each kill of the master to the first SEND_OK by the new one; the acknowledged messages lost
    (missing from the last master's queues), and how many were acknowledged."""
    from remote_client import Cluster, Producer, PullConsumer
    from tests.etcd_process import EtcdProcess

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as data:
        root = Path(data)
        etcd = EtcdProcess(root / "etcd")
        namesrv_process, namesrv = start_namesrv()
        members: dict[int, ServeChild] = {1: member(root, namesrv, etcd.address, 1)}
        try:
            members.update({n: member(root, namesrv, etcd.address, n) for n in (2, 3)})
            wait_registered(namesrv, {"broker-a"})
            admin(namesrv, "topic", "create", "failover", "--cluster", CLUSTER, "--queues", str(QUEUES))
            acked: set[bytes] = set()
            figures: list[float] = []
            elections: list[float] = []
            number = 0
            async with Cluster(namesrv) as client:
                producer = Producer(client)

                async def send() -> bool:
                    nonlocal number
                    body = b"%08d" % number + BODY[8:]
                    number += 1
                    try:
                        await producer.send("failover", body)
                    except Exception as exc:
                        if os.environ.get("MQGATE_BENCH_DEBUG"):
                            print(f"{time.monotonic():.3f} send failed: {exc}", file=sys.stderr)
                        return False
                    acked.add(body)
                    return True

                for _ in range(rounds):
                    deadline = time.monotonic() + 120
                    while (await sync_state_set(etcd.address))[1] != {1, 2, 3}:
                        if time.monotonic() > deadline:
                            raise SystemExit("the SyncStateSet did not come back to three brokers within 120 s")
                        await send()
                        await asyncio.sleep(0.2)
                    for _ in range(50):
                        await send()
                    master, _ = await sync_state_set(etcd.address)
                    assert master is not None
                    members[master].process.kill()
                    members[master].process.wait()
                    killed_at = time.monotonic()
                    watch = asyncio.get_running_loop().create_task(elected(etcd.address, master, killed_at))
                    while not await send():
                        await asyncio.sleep(0.05)
                    figures.append(time.monotonic() - killed_at)
                    elections.append(await watch)
                    members[master] = member(root, namesrv, etcd.address, master)  # back, as a slave
                for _ in range(50):
                    await send()
            master, _ = await sync_state_set(etcd.address)
            async with Cluster(namesrv) as client:
                consumer = PullConsumer(client, "failover_check")
                held: set[bytes] = set()
                for queue in await consumer.fetch_queues("failover"):
                    offset = 0
                    while True:
                        result = await consumer.pull(queue, offset, max_nums=32)
                        if not result.messages:
                            break
                        held.update(message.body for message in result.messages)
                        offset = result.next_begin_offset
            emit("cluster.failover.elected_s", statistics.median(elections))
            return figures, len(acked - held), len(acked)
        finally:
            for child in members.values():
                if child.process.poll() is None:
                    child.stop()
            namesrv_process.terminate()
            namesrv_process.wait()
            etcd.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer messages and kills")
    parser.add_argument("--only", choices=["failover", "mqtt"], help="run one part only")
    args = parser.parse_args()
    count = 5_000 if args.quick else 30_000
    rounds = 5
    if args.only == "failover":
        failover(3 if args.quick else rounds)
        return
    if args.only == "mqtt":
        mqtt_cross_node(count)
        return
    one = send_round(1, count)
    two = send_round(2, count)
    emit("cluster.send.msgs_per_s_1_group", one)
    emit("cluster.send.msgs_per_s_2_groups", two)
    emit("cluster.send.ratio_2_groups_to_1", two / one)
    async_rate, async_lags = replication_round("ASYNC_MASTER", count)
    sync_rate, sync_lags = replication_round("SYNC_MASTER", count)
    emit("cluster.async_master.msgs_per_s", async_rate)
    emit("cluster.sync_master.msgs_per_s", sync_rate)
    emit("cluster.sync_master.ratio_to_async_master", sync_rate / async_rate)
    emit("cluster.replication.lag_ms.p50", percentile(async_lags, 0.5))
    emit("cluster.replication.lag_ms.p99", percentile(async_lags, 0.99))
    emit("cluster.replication.lag_ms.max", max(async_lags, default=0.0))
    emit("cluster.sync_master.lag_ms.p99", percentile(sync_lags, 0.99))
    emit("cluster.replication.lag_samples", str(len(async_lags)))
    figures = asyncio.run(reroute_rounds(rounds))
    emit("cluster.reroute_s", statistics.median(figures))
    emit("cluster.reroute_s_max", max(figures))
    emit("cluster.messages", str(count))
    mqtt_cross_node(count)
    failover(3 if args.quick else rounds)


def mqtt_cross_node(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-mqtt-") as data:
        root = Path(data)
        namesrv_process, namesrv = start_namesrv()
        brokers = [broker(root, namesrv, name, "--mqtt-port", "0") for name in ("broker-a", "broker-b")]
        try:
            wait_registered(namesrv, {"broker-a", "broker-b"})
            port_a, port_b = (int(child.ready["mqtt"].rpartition(":")[2]) for child in brokers)
            same_rate, same = measure(port_a, port_a, count, "same")
            cross_rate, cross = measure(port_b, port_a, count, "cross")
            paced = min(count, 10_000)
            _, same_paced = measure(port_a, port_a, paced, "same-paced", PACED_RATE)
            _, cross_paced = measure(port_b, port_a, paced, "cross-paced", PACED_RATE)
        finally:
            for child in brokers:
                child.stop()
            namesrv_process.terminate()
            namesrv_process.wait()
    emit("cluster.mqtt.same_node.msgs_per_s", same_rate)
    emit("cluster.mqtt.cross_node.msgs_per_s", cross_rate)
    emit("cluster.mqtt.cross_node.ratio_to_same_node", cross_rate / same_rate)
    for name, latencies in (("same_node", same), ("cross_node", cross)):
        emit(f"cluster.mqtt.{name}.latency_ms.p50", percentile(latencies, 0.5))
        emit(f"cluster.mqtt.{name}.latency_ms.p99", percentile(latencies, 0.99))
    for name, latencies in (("same_node", same_paced), ("cross_node", cross_paced)):
        emit(f"cluster.mqtt.{name}.paced.latency_ms.p50", percentile(latencies, 0.5))
        emit(f"cluster.mqtt.{name}.paced.latency_ms.p99", percentile(latencies, 0.99))
    emit("cluster.mqtt.messages", str(count))


def failover(rounds: int) -> None:
    figures, lost, acked = asyncio.run(failover_rounds(rounds))
    emit("cluster.failover_s", statistics.median(figures))
    emit("cluster.failover_s_max", max(figures))
    emit("cluster.failover.acked", str(acked))
    emit("cluster.failover.acked_lost", str(lost))


if __name__ == "__main__":
    main()
