"""`mqgate serve` as a child process of a benchmark, as a user runs it: free ports for every listener, the ready line
read with a deadline, its CPU time and resident memory read from /proc, a clean stop with SIGTERM."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 600
STOP_TIMEOUT_S = 120
# MQGATE_BENCH_PROFILE=FILE runs the serve process under cProfile, written to FILE at its clean stop.
PROFILE = ["-m", "cProfile", "-o", os.environ["MQGATE_BENCH_PROFILE"]] if os.environ.get("MQGATE_BENCH_PROFILE") else []


def serve_command(launcher: Sequence[str], data_dir: Path, *args: str) -> list[str]:
    """`mqgate serve` on `data_dir` with every listener on a free port (0), then `args` (a later flag wins);
    `launcher` runs mqgate (its console script, or the interpreter with `-m mqgate.cli`)."""
    return [*launcher, "serve", "--data-dir", str(data_dir), "--mqtt-port", "0", "--grpc-port", "0",
            "--http-port", "0", "--remoting-port", "0", "--namesrv-port", "0", *args]  # fmt: skip


class ServeChild:
    def __init__(self, data_dir: Path, stderr_path: Path | None = None, args: Sequence[str] = ()) -> None:
        """Start it on `data_dir` with `args` after the free ports; its stderr goes to `stderr_path` (None:
        discarded)."""
        self.stderr_path = stderr_path
        command = serve_command([sys.executable, *PROFILE, "-m", "mqgate.cli"], data_dir, *args)
        stderr: IO[bytes] | int = open(stderr_path, "wb") if stderr_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr)
        finally:
            if not isinstance(stderr, int):
                stderr.close()
        self.pid = self.process.pid
        self.ready = self._read_ready()

    def _read_ready(self) -> dict[str, str]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + START_TIMEOUT_S
        data = b""
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            chunk = os.read(fd, 4096) if readable else b""
            if not chunk:
                self.process.kill()
                raise SystemExit(f"mqgate serve did not start (code {self.process.poll()}): {self.stderr()[-2000:]}")
            data += chunk
        return dict(part.split("=", 1) for part in data.decode().split()[1:])

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path is not None else ""

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=STOP_TIMEOUT_S)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return self.process.returncode
