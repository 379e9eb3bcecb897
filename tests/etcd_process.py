"""etcd (Debian's etcd-server, installed by `make deb`) as a child process for the tests: one member on loopback
ports of its own, its data in a directory of the test's; `client_port` is where aetcd connects."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EtcdProcess:
    def __init__(self, data_dir: Path, wrapper: tuple[str, ...] = (), host: str = "127.0.0.1") -> None:
        """`wrapper`: a command that runs etcd (`ip netns exec NS`); `host`: the address it listens on."""
        etcd = shutil.which("etcd")
        assert etcd, "etcd is not installed (make deb installs etcd-server)"
        self.host = host
        self.client_port, peer_port = free_port(), free_port()
        peer = f"http://{host}:{peer_port}"
        client = f"http://{host}:{self.client_port}"
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*wrapper, etcd, "--name", "mqgate-test", "--data-dir", str(data_dir),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"mqgate-test={peer}", "--initial-cluster-state", "new"],
                stdout=log, stderr=log,
            )  # fmt: skip
        self._wait_ready()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"etcd exited ({self.process.returncode}): {self.log_path.read_text()[-2000:]}")
            if "ready to serve client requests" in self.log_path.read_text(errors="replace"):
                return
            assert time.monotonic() < deadline, f"etcd not ready within {START_TIMEOUT_S} s"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=STOP_TIMEOUT_S)
