"""The README's five-minute walk, run from the README itself, block by block, against a real `mqgate serve`.

The walk lies between `<!-- walk: begin -->` and `<!-- walk: end -->`. Each ```sh block is a step, run with bash
in a working directory laid out as the repository (`examples/`, `.venv/`, `data/`); the ```text block after it,
if any, is what the step must show: each of its lines, in order, in what the step printed, what a background
step printed meanwhile (the receiver), or what the server logged meanwhile. `...` in an expected line stands for
anything. A comment `<!-- walk: NAME -->` before a step changes how it runs:

- `server`: the step (`make run`) is not run; the test starts `mqgate serve` on free ports in its stead.
- `background`: the step keeps running (a receiver), as in its own terminal; it is stopped at the end.
- `repeat`: the step reads something that becomes true soon; it is run again until its output shows.

Other walk comments (`<!-- walk: admin step -->`) mark places in the text and run nothing. Ports differ here:
1883, 8081, 10911, 9876, 8082 and 9000 in the steps and in the examples they use are replaced with the free ports
of this run (the examples are copied with the replacement); `mqgate connect` also gets `$MQGATE_URL`. Adding a
step to the README adds it to this test.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parents[1]
WALK = re.compile(r"<!-- walk: begin -->(.*?)<!-- walk: end -->", re.S)
TOKEN = re.compile(r"<!-- walk: ([\w -]+?) -->|^```(\w+)\n(.*?)^```", re.S | re.M)
DIRECTIVES = {"server", "background", "repeat"}
# How long the output of a step may take to show (Spark starts a JVM); a repeated step is rerun meanwhile.
WAIT_S = 240.0
REPEAT_EVERY_S = 3.0
STEP_TIMEOUT_S = 180.0


@dataclass
class Step:
    command: str
    how: str | None  # a directive, or None: run and wait
    expected: list[str] = field(default_factory=list)


def walk_steps(readme: str) -> list[Step]:
    match = WALK.search(readme)
    assert match is not None, "README.md has no <!-- walk: begin --> ... <!-- walk: end -->"
    steps: list[Step] = []
    directive: str | None = None
    for token in TOKEN.finditer(match.group(1)):
        name, language, body = token.groups()
        if name is not None:
            directive = name if name in DIRECTIVES else directive
        elif language == "sh":
            steps.append(Step(body, directive))
            directive = None
        elif language == "text":
            assert steps, "an output block before any step"
            steps[-1].expected = [line for line in body.splitlines() if line.strip()]
    return steps


def line_pattern(expected: str) -> re.Pattern[str]:
    """`...` is anything; a run of spaces is any run of spaces."""
    # re.escape writes a space as "\ ": a run of them is one \s+ (one \s+ per space would backtrack through every
    # split of a long run of spaces between them, minutes for a line of the Spark query's table).
    parts = [re.sub(r"(?:\\ )+", r"\\s+", re.escape(part.strip())) for part in expected.split("...")]
    return re.compile(".*".join(parts))


def shows(expected: list[str], output: list[str]) -> bool:
    """Every expected line, in order, in the output lines."""
    lines = iter(output)
    return all(any(line_pattern(want).search(line) for line in lines) for want in expected)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Background:
    """A step that keeps running; its output lines as they come."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            ["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its own process group: stopped with everything it started
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)


class Walk:
    def __init__(self, tmp_path: Path) -> None:
        self.repo = tmp_path / "repo"
        self.repo.mkdir()
        (self.repo / ".venv").symlink_to(Path(sys.prefix))
        # Where `make rocketmq4-clients` installed the RocketMQ 4 client the walk's last step runs.
        (self.repo / "tests").symlink_to(ROOT / "tests")
        (tmp_path / "xdg").mkdir()  # no mosquitto_pub/sub defaults of the user's
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
        self.ports: dict[str, str] = {"9000": str(free_port())}
        self.server: ServeProcess | None = None
        self.background: list[Background] = []

    def substitute(self, text: str) -> str:
        ports = r"\b(1883|8081|10911|10912|9876|8082|9000)\b"
        return re.sub(ports, lambda match: self.ports.get(match.group(1), match.group(1)), text)

    def start_server(self, step: Step) -> None:
        assert step.command.strip() == "make run", "the server step is `make run`"
        self.server = ServeProcess(self.repo / "data", cwd=self.repo, env={"SPARK_LOCAL_IP": "127.0.0.1"})
        ready_ports = (
            ("mqtt", "1883"), ("grpc", "8081"), ("remoting", "10911"), ("ha", "10912"), ("namesrv", "9876"),
            ("http", "8082"),
        )  # fmt: skip
        for key, default in ready_ports:
            self.ports[default] = self.server.ready[key].rsplit(":", 1)[1]
        self.env["MQGATE_URL"] = self.server.http_url
        # The examples as the steps see them: the same files, with this run's ports.
        for source in (ROOT / "examples").rglob("*"):
            target = self.repo / "examples" / source.relative_to(ROOT / "examples")
            if source.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            elif source.suffix in {".py", ".yaml", ".yml", ".json", ".toml"}:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self.substitute(source.read_text()))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)

    def server_log(self) -> list[str]:
        return self.server.stderr().splitlines() if self.server is not None else []

    def others(self) -> dict[str, list[str]]:
        """Everything printed by what keeps running: the server (its ready line and log), background steps."""
        printed = {f"background {i}": list(b.lines) for i, b in enumerate(self.background)}
        if self.server is not None:
            printed["server"] = [self.server.line, *self.server_log()]
        return printed

    def run(self, step: Step, number: int) -> None:
        what = f"walk step {number}:\n{step.command}"
        before = {source: len(lines) for source, lines in self.others().items()}
        if step.how == "server":
            self.start_server(step)
        elif step.how == "background":
            self.background.append(Background(self.substitute(step.command), self.repo, self.env))
        expected = [self.substitute(line) for line in step.expected]
        deadline = time.monotonic() + WAIT_S
        # A repeated step may fail until what it reads is there (the Spark table before its first batch).
        output = self._run_once(step, what, must_succeed=step.how is None) if step.how in (None, "repeat") else []
        while True:
            since = [lines[before.get(source, 0) :] for source, lines in self.others().items()]
            if any(shows(expected, lines) for lines in [output, *since]):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}\nexpected:\n" + "\n".join(expected) + "\ngot:\n" + "\n".join(output)
                                     + "\nserver log (last lines):\n" + "\n".join(self.server_log()[-20:]))  # fmt: skip
            time.sleep(REPEAT_EVERY_S if step.how == "repeat" else 0.2)
            if step.how == "repeat":
                output = self._run_once(step, what, must_succeed=False)

    def _run_once(self, step: Step, what: str, must_succeed: bool = True) -> list[str]:
        result = subprocess.run(
            ["bash", "-e", "-c", self.substitute(step.command)],
            cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S,
        )  # fmt: skip
        if must_succeed:
            assert result.returncode == 0, f"{what}\nexit {result.returncode}\n{result.stdout}\n{result.stderr}"
        return result.stdout.splitlines()

    def close(self) -> None:
        for background in self.background:
            background.stop()
        if self.server is not None:
            assert self.server.stop() == 0


def test_the_walk_is_read_as_documented():
    steps = walk_steps((ROOT / "README.md").read_text())
    assert steps[0].how == "server" and steps[0].command.strip() == "make run"
    assert [step.how for step in steps].count("background") == 1
    # A step without an output block must succeed; all but the copy of the rule file say what they show.
    assert [step.command.split()[0] for step in steps if not step.expected] == ["cp"]
    assert shows(["a ... c", "x"], ["0", "a b c", "y", "x 1"])
    assert not shows(["x", "a ... c"], ["a b c", "x"])  # in order
    assert line_pattern("d1   1").search("2026-11-25 06:00     d1                1")


@pytest.mark.slow
def test_the_readme_walk_runs_as_written(tmp_path: Path):
    for tool in ("mosquitto_pub", "mosquitto_sub", "curl", "java"):
        assert shutil.which(tool), f"{tool} is not installed (make deb)"
    walk = Walk(tmp_path)
    try:
        for number, step in enumerate(walk_steps((ROOT / "README.md").read_text()), 1):
            started = time.monotonic()
            walk.run(step, number)
            print(f"walk step {number}: {time.monotonic() - started:.1f} s")  # shown with -s, or on a failure
    finally:
        walk.close()
