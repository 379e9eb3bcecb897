"""The crash test: bench/crash.py kills a SYNC_FLUSH writer with SIGKILL 20 times and checks every ack."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_sigkill_20_times_loses_no_acknowledged_message(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "crash.py"),
            "--kills",
            "20",
            "--writers",
            "8",
            "--seed",
            "7",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = dict(line.split("=", 1) for line in result.stdout.splitlines() if line.startswith("store.crash."))
    figures = {key.removeprefix("store.crash."): int(value) for key, value in figures.items()}
    assert figures["kills"] == 20
    assert figures["unclean_recoveries"] == 20  # every restart went through crash recovery
    assert figures["acked"] > 1000  # enough acknowledged writes for the check to mean something
    assert figures["acked_lost"] == 0
    assert figures["torn_visible"] == 0
    assert figures["cq_mismatch"] == 0
    assert figures["cq_missing"] == 0
