"""A network partition under automatic failover: the master runs in a network namespace the test creates, etcd,
the NameServer and the two slaves outside it. The link is cut (packets stop, nothing is reset): the old master,
cut off from etcd and from its slaves, stops taking writes within its lease (a client beside it is refused with the
reason), the side with etcd elects a new master and takes writes; once the link is back the old master rejoins as a
slave, and what it appended after the cut and never acknowledged is cut from its log, never served."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from remote_client import Cluster, Producer
from remoting.channel import RemotingTimeoutError
from remoting.errors import RemotingError
from tests.cluster.brokers import find_by_id, has_topic, runtime_info
from tests.cluster.netns import NetworkNamespace
from tests.cluster.processes import CLUSTER, ClusterProcesses, remoting_address
from tests.cluster.test_automatic_failover import GROUP, record, wait_until
from tests.etcd_process import EtcdProcess
from tests.serve_process import ROOT

pytestmark = pytest.mark.slow

LEASE_TTL_S = 5.0
INSIDE_SECONDS = 14.0
# remoting's response codes
SUCCESS, SERVICE_NOT_AVAILABLE = 0, 14


def reachable_info(address: str) -> dict[str, str]:
    """The broker's runtime info, or nothing while the link that was just restored does not carry it yet."""
    try:
        return runtime_info(address)
    except (OSError, RemotingError, RemotingTimeoutError):
        return {}


def send(namesrv: str, prefix: str, count: int) -> list[str]:
    """Send `count` messages through the cluster's current master, trying each again until it is acknowledged."""

    async def run() -> list[str]:
        acked = []
        async with Cluster(namesrv) as client:
            producer = Producer(client)
            for n in range(count):
                deadline = time.monotonic() + 30
                while True:
                    try:
                        result = await producer.send("pt", f"{prefix}-{n}".encode())
                        acked.append(result.msg_id)
                        break
                    except Exception:
                        assert time.monotonic() < deadline, f"{prefix}-{n} not acknowledged within 30 s"
                        await asyncio.sleep(0.2)
        return acked

    return asyncio.run(run())


def test_a_master_cut_off_stops_writing_within_its_lease_and_rejoins_with_its_tail_cut(tmp_path):
    namespace = NetworkNamespace("fo")
    etcd = EtcdProcess(tmp_path / "etcd", host=namespace.host_ip)
    cluster = ClusterProcesses(tmp_path, groups=(), namesrv_host=namespace.host_ip)
    outside = f'[remoting]\nbroker_ip = "{namespace.host_ip}"\n'
    inside_sender = None
    try:
        inside = f'[remoting]\nbroker_ip = "{namespace.inner_ip}"\n'
        old = cluster.start_member(GROUP, 1, etcd.address, config=inside, wrapper=namespace.wrapper)
        assert old.ready["role"] == "master", old.line
        for broker_id in (2, 3):
            cluster.start_member(GROUP, broker_id, etcd.address, config=outside)
        wait_until(lambda: (r := record(etcd.address)) and r.sync_state_set == {1, 2, 3}, 60, "the set of three")
        cluster.admin("topic", "create", "pt", "--cluster", CLUSTER, "--queues", "1")
        for broker_id in (2, 3):
            address = remoting_address(cluster.brokers[f"{GROUP}-n{broker_id}"])
            wait_until(lambda address=address: has_topic(address, "pt"), 30, "the slaves copy the topic")
        before = send(cluster.namesrv_addr, "before", 20)

        # A client beside the old master, inside its namespace, sends to it directly all through the cut.
        port = old.ready["remoting"].rpartition(":")[2]
        inside_sender = subprocess.Popen(
            [*namespace.wrapper, sys.executable, "-m", "tests.cluster.direct_sender", f"127.0.0.1:{port}", GROUP,
             "pt", "inside", str(INSIDE_SECONDS)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(1.0)
        namespace.cut()
        cut_at = time.time()  # once `ip link set down` has returned: a send made before may still be acknowledged
        elected = wait_until(lambda: (r := record(etcd.address)) and r.master_id != 1 and r, 30, "a new master")
        after = send(cluster.namesrv_addr, "after", 20)
        out, _ = inside_sender.communicate(timeout=INSIDE_SECONDS + 30)
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        namespace.restore()

        # The old master took no write it acknowledged after the cut, and refused writes within its lease.
        cut_lines = [line for line in lines if line["t"] > cut_at]
        assert not [line for line in cut_lines if line.get("code") == SUCCESS], cut_lines
        # Every send made once the lease could have ended (the sender waits 3 s on each unacknowledged one) is refused
        # for the lease.
        late = [line for line in cut_lines if line["t"] >= cut_at + LEASE_TTL_S]
        assert late, cut_lines
        assert all(line.get("code") == SERVICE_NOT_AVAILABLE and "lease" in line["remark"] for line in late), late
        # What it appended meanwhile (refused with FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE, kept in its log).
        tail = [line["body"] for line in cut_lines if line.get("code") in (11, 12)]

        # Back as a slave of the new master, its log cut to the new master's and copied.
        new = cluster.brokers[f"{GROUP}-n{elected.master_id}"]
        old_address = f"{namespace.inner_ip}:{port}"
        wait_until(lambda: reachable_info(old_address).get("brokerRole") == "SLAVE", 60, "the old master follows")
        wait_until(
            lambda: (
                reachable_info(old_address).get("commitLogMaxOffset")
                == runtime_info(remoting_address(new))["commitLogMaxOffset"]
            ),
            60,
            "the old master copies the new master's log",
        )
        # An unacknowledged message that reached the slaves before the link went down is the new master's too (its
        # acknowledgements were what the cut lost); any other is cut from the old master, served by neither.
        cut = []
        for body in tail:  # the direct sender's UNIQ_KEY of "inside-N" is "inside" and N + 1 in 8 digits
            unique_id = f"inside{int(body.rpartition('-')[2]) + 1:08d}"
            on_new = find_by_id(remoting_address(new), "pt", unique_id)
            assert len(find_by_id(old_address, "pt", unique_id)) == len(on_new), f"{body}: the two logs differ"
            cut += [] if on_new else [body]
        assert not cut or "the new master's log does not hold them" in old.stderr(), f"{cut} not cut"
        for msg_id in before + after:
            assert len(find_by_id(old_address, "pt", msg_id)) == 1, msg_id
    finally:
        if inside_sender is not None and inside_sender.poll() is None:
            inside_sender.kill()
        namespace.restore()
        cluster.stop()
        etcd.stop()
        namespace.close()
