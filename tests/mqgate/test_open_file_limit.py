"""`mqgate serve` raises its soft limit on open files to the hard limit: one descriptor per MQTT connection."""

from __future__ import annotations

import resource
import signal
import subprocess
from pathlib import Path

from tests.serve_process import serve_command

ROOT = Path(__file__).resolve().parents[2]
LOW_SOFT_LIMIT = 256


def open_file_limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no 'Max open files' in /proc/{pid}/limits")


def test_serve_raises_the_soft_open_file_limit_to_the_hard_limit(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard > LOW_SOFT_LIMIT, "the test needs a hard limit above its low soft limit"

    def lower_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_SOFT_LIMIT, hard))

    process = subprocess.Popen(
        serve_command("--data-dir", tmp_path / "data"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lower_soft_limit,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("ready ")
        assert open_file_limits(process.pid) == (hard, hard)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert f"open file limit raised from {LOW_SOFT_LIMIT} to {hard}" in stderr
