"""Every `examples/...` path that `--help` (of every command and subcommand), README.md or docs/ cites exists, and
the examples the help shows work: `rules test` on the example pattern and event, `connect create` of the example
connector against a real `mqgate serve`."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mqgate.cli import build_parser
from tests.serve_process import ROOT, ServeProcess

# A path under examples/: letters, digits, `_`, `-`, `.` and `/`, not ending in a sentence's full stop.
EXAMPLE_PATH = re.compile(r"\bexamples/[\w./-]*[\w/]")
DEADLINE_S = 60.0


def all_help(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    """(prog, help text) of the parser and of every subcommand under it, depth first."""
    yield parser.prog, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from all_help(sub)


def cited_paths() -> dict[str, set[str]]:
    """Each cited `examples/...` path and where it is cited."""
    cited: dict[str, set[str]] = {}
    for prog, text in all_help(build_parser()):
        for path in EXAMPLE_PATH.findall(text):
            cited.setdefault(path, set()).add(f"`{prog} --help`")
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for path in EXAMPLE_PATH.findall(document.read_text()):
            cited.setdefault(path, set()).add(str(document.relative_to(ROOT)))
    return cited


def test_the_help_of_every_command_is_walked():
    progs = {prog for prog, _ in all_help(build_parser())}
    assert {"mqgate", "mqgate serve", "mqgate connect create", "mqgate rules test", "mqgate events dlq"} <= progs


def test_every_cited_example_exists():
    cited = cited_paths()
    # The ones the help shows today are among them (the walk found them).
    assert {"examples/file-sink.yaml", "examples/pattern.json", "examples/event.json"} <= cited.keys()
    missing = {path: sorted(where) for path, where in cited.items() if not (ROOT / path).exists()}
    assert missing == {}, f"cited but not in the repository: {missing}"


def test_the_example_event_matches_the_example_pattern():
    result = subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "rules", "test", "examples/pattern.json", "examples/event.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, "match\n"), result.stderr


def test_the_example_file_sink_writes_what_mqtt_publishes(tmp_path: Path):
    # The example's file is relative (data/sensors.txt): the server runs in tmp_path, so it lands there.
    server = ServeProcess(tmp_path / "data", cwd=tmp_path)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "mqgate.cli", "connect", "--url", server.http_url, "create",
             "examples/file-sink.yaml"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "sensors-to-file" in result.stdout
        host, port = server.ready["mqtt"].rsplit(":", 1)
        sink_file = tmp_path / "data" / "sensors.txt"
        deadline = time.monotonic() + DEADLINE_S
        # Published until it arrives: a new sink may start reading after the first message.
        while not (sink_file.exists() and '{"temp": 3.5}' in sink_file.read_text()):
            assert time.monotonic() < deadline, f"nothing written to {sink_file}; stderr: {server.stderr()}"
            subprocess.run(
                ["mosquitto_pub", "-h", host, "-p", port, "-t", "sensors/d1/temp", "-m", '{"temp": 3.5}', "-q", "1"],
                check=True, timeout=30,
            )  # fmt: skip
            time.sleep(0.5)
        assert set(sink_file.read_text().splitlines()) == {'{"temp": 3.5}'}
    finally:
        assert server.stop() == 0
