"""The must-show: `mqgate serve` running a file source -> topic -> file sink pipeline (connector files in
DATA_DIR/connectors) is killed with SIGKILL 5 times while the input file grows, and restarted: the output file
holds every input line exactly once, in order."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "mqgate.cli", "serve", "--mqtt-port", "0", "--grpc-port", "0", "--log-level", "WARNING"]


def serve_command() -> list[str]:
    """`mqgate serve` on free ports (the HTTP, remoting and NameServer ports too, where this version of serve has
    them)."""
    usage = subprocess.run([*SERVE[:4], "--help"], cwd=ROOT, capture_output=True, text=True).stdout
    flags = [flag for flag in ("--http-port", "--remoting-port", "--namesrv-port") if flag in usage]
    return [*SERVE, *(arg for flag in flags for arg in (flag, "0"))]


KILLS = 5
LINES = 20_000


def start(command: list[str], data_dir: Path, log: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(log, "a"),  # noqa: SIM115
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("ready "), f"no ready line: {line!r}; see {log}"
    return process


def output_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.slow
def test_file_pipeline_survives_sigkill_exactly_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    (data_dir / "connectors").mkdir(parents=True)
    (data_dir / "connectors" / "lines-in.json").write_text(
        json.dumps({"connector.class": "file-source", "file": str(source), "topic": "lines", "batch.size": "200"})
    )
    (data_dir / "connectors" / "lines-out.json").write_text(
        json.dumps({"connector.class": "file-sink", "file": str(sink), "topics": "lines"})
    )
    expected = [f"line {i:06d} {'x' * (i % 37)}" for i in range(LINES)]
    source.touch()

    def write() -> None:
        # Lines are written in pieces, so the source often meets a last line without its newline.
        with source.open("a") as file:
            for i, line in enumerate(expected):
                file.write(line[: len(line) // 2])
                file.flush()
                file.write(line[len(line) // 2 :] + "\n")
                file.flush()
                if i % 100 == 0:
                    time.sleep(0.02)

    writer = threading.Thread(target=write)
    log = tmp_path / "serve.stderr"
    rng = random.Random(5)
    command = serve_command()
    process = start(command, data_dir, log)
    writer.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 1.5))
            process.kill()
            process.wait(10)
            process = start(command, data_dir, log)
        writer.join(60)
        deadline = time.monotonic() + 30
        while len(output_lines(sink)) < LINES and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # anything written twice would show up now
        got = output_lines(sink)
    finally:
        process.kill()
        process.wait(10)
    assert len(got) == LINES, f"{len(got)} lines; see {log}"
    assert got == expected
