"""A cluster of separate processes on loopback, as users start one: `mqgate namesrv` and `mqgate serve` broker
groups registering with it (`--namesrv-addr --cluster-name --broker-name`), each on free ports; and `mqgate admin
--namesrv` run as a command."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.serve_process import ROOT, ChildProcess, ServeProcess

CLUSTER = "C"
ADMIN_TIMEOUT_S = 60.0
# Brokers register with their NameServers at start, then every 30 s.
REGISTERED_WITHIN_S = 30.0


def free_port() -> int:
    """A port free on loopback now (for a door whose port must stay the same across restarts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def remoting_address(serve: ServeProcess) -> str:
    """Where a broker's remoting port is reached on loopback."""
    return f"127.0.0.1:{serve.ready['remoting'].rpartition(':')[2]}"


@contextmanager
def sync_master_with_slave(root: Path) -> Iterator[ClusterProcesses]:
    """A NameServer and broker group `broker-a`: a SYNC_MASTER and its slave `broker-a-s1`, in sync."""
    cluster = ClusterProcesses(root, groups=())
    try:
        cluster.start_broker("broker-a", "--role", "SYNC_MASTER")
        cluster.wait_registered(("broker-a",))
        cluster.start_slave("broker-a")
        cluster.wait_in_sync("broker-a")
        yield cluster
    finally:
        cluster.stop()


class NamesrvProcess(ChildProcess):
    """`mqgate namesrv --port 0` on loopback (or `host`); `address` is where it listens."""

    def __init__(self, log_path: Path, host: str = "127.0.0.1") -> None:
        command = [sys.executable, "-m", "mqgate.cli", "namesrv", "--host", host, "--port", "0"]
        super().__init__(command, log_path, "ready namesrv=", None)
        self.address = self.line.split("=", 1)[1]


class ClusterProcesses:
    """NameServers and broker groups, each its own process; `namesrv_addr` is what clients are given."""

    def __init__(
        self,
        root: Path,
        groups: tuple[str, ...] = ("broker-a", "broker-b"),
        namesrvs: int = 1,
        namesrv_host: str = "127.0.0.1",
    ) -> None:
        self.root = root
        self.namesrvs = [NamesrvProcess(root / f"namesrv-{n}.stderr", namesrv_host) for n in range(namesrvs)]
        self.brokers: dict[str, ServeProcess] = {}
        for name in groups:
            self.start_broker(name)
        self.wait_registered(groups)

    @property
    def namesrv_addr(self) -> str:
        return ";".join(namesrv.address for namesrv in self.namesrvs)

    def start_broker(self, name: str, *args: str, config: str = "") -> ServeProcess:
        """A broker group's master, `name` its group and data directory; `config`: its mqgate.toml."""
        self._write_config(name, config)
        serve = ServeProcess(
            self.root / name, "--namesrv-addr", self.namesrv_addr, "--cluster-name", CLUSTER, "--broker-name", name,
            *args,
        )  # fmt: skip
        self.brokers[name] = serve
        return serve

    def start_slave(self, group: str, broker_id: int = 1, *args: str, config: str = "") -> ServeProcess:
        """A slave of broker group `group` (`GROUP-sID` its name and data directory)."""
        name = f"{group}-s{broker_id}"
        self._write_config(name, config)
        serve = ServeProcess(
            self.root / name, "--namesrv-addr", self.namesrv_addr, "--cluster-name", CLUSTER, "--broker-name", group,
            "--broker-id", str(broker_id), "--role", "SLAVE", *args,
        )  # fmt: skip
        self.brokers[name] = serve
        return serve

    def start_member(
        self,
        group: str,
        broker_id: int,
        etcd: str,
        *args: str,
        role: str = "SYNC_MASTER",
        config: str = "",
        wrapper: tuple[str, ...] = (),
    ) -> ServeProcess:
        """A broker of group `group` under automatic failover (`GROUP-nID` its name and data directory): etcd names
        its role. Its MQTT and gRPC ports are fixed (`mqtt_port`, `grpc_port` of the process), as they open and
        close with its terms as master; a member started again keeps them, as a configured broker would, so that
        clients that know a group's ports find it again."""
        name = f"{group}-n{broker_id}"
        self._write_config(name, config)
        before = self.brokers.get(name)
        if before is not None:
            mqtt_port, grpc_port = before.mqtt_port, before.grpc_port  # type: ignore[attr-defined]
        else:
            mqtt_port, grpc_port = free_port(), free_port()
        serve = ServeProcess(
            self.root / name, "--namesrv-addr", self.namesrv_addr, "--cluster-name", CLUSTER, "--broker-name", group,
            "--broker-id", str(broker_id), "--role", role, "--etcd", etcd, "--mqtt-port", str(mqtt_port),
            "--grpc-port", str(grpc_port), *args, wrapper=wrapper,
        )  # fmt: skip
        serve.mqtt_port, serve.grpc_port = mqtt_port, grpc_port  # type: ignore[attr-defined]
        self.brokers[name] = serve
        return serve

    def _write_config(self, name: str, config: str) -> None:
        if config:
            (self.root / name).mkdir(parents=True, exist_ok=True)
            (self.root / name / "mqgate.toml").write_text(config)

    def broker_row(self, group: str, broker_id: int) -> dict[str, Any] | None:
        rows = self.admin("cluster", "list")
        return next((row for row in rows if row["broker"] == group and row["id"] == broker_id), None)

    def wait_in_sync(self, group: str, broker_id: int = 1, timeout_s: float = 60.0) -> dict[str, Any]:
        """Until the slave is registered, linked to its master and holds all of its log; its `cluster list` row."""
        deadline = time.monotonic() + timeout_s
        while True:
            row = self.broker_row(group, broker_id)
            if row is not None and row.get("lag_bytes") == 0:
                return row
            assert time.monotonic() < deadline, f"slave {broker_id} of {group} not in sync within {timeout_s} s: {row}"
            time.sleep(0.5)

    def admin(self, *args: str, namesrv: str | None = None) -> Any:
        """`mqgate admin --namesrv ... ARGS --json`: its JSON answer (fails with its stderr if it fails)."""
        done = subprocess.run(
            [sys.executable, "-m", "mqgate.cli", "admin", "--namesrv", namesrv or self.namesrv_addr, *args, "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def registered(self, namesrv: str | None = None) -> set[str]:
        """The broker groups the NameServer knows."""
        return {row["broker"] for row in self.admin("cluster", "list", namesrv=namesrv)}

    def wait_registered(self, groups: tuple[str, ...], namesrv: str | None = None) -> None:
        deadline = time.monotonic() + REGISTERED_WITHIN_S
        while not set(groups) <= self.registered(namesrv):
            assert time.monotonic() < deadline, f"{groups} not registered within {REGISTERED_WITHIN_S} s"
            time.sleep(0.5)

    def wait_topic(self, topic: str) -> None:
        """Until the NameServers route `topic` (a broker registers a new topic soon after it is created)."""
        deadline = time.monotonic() + REGISTERED_WITHIN_S
        while topic not in {row["topic"] for row in self.admin("topic", "list")}:
            assert time.monotonic() < deadline, f"topic {topic} not routed within {REGISTERED_WITHIN_S} s"
            time.sleep(0.5)

    def stop(self) -> None:
        for serve in self.brokers.values():
            if serve.process.poll() is None:
                assert serve.stop() == 0, serve.stderr()
        for namesrv in self.namesrvs:
            if namesrv.process.poll() is None:
                assert namesrv.stop() == 0
