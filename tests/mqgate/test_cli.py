"""The `mqgate` command, run as real processes: serve and its signals, the store lock, config errors, `config`
and `store stats`."""

import os
import select
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve_process import serve_command

ROOT = Path(__file__).resolve().parents[2]
# Generous: a loaded CI machine can take seconds to start Python and import the store.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# The console script pip generated next to the interpreter running the tests.
CONSOLE_SCRIPT = Path(sys.executable).with_name("mqgate")


def mqgate(*args: str | Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Server:
    """`mqgate serve` in a child process; `ready` holds the parts of its ready line."""

    def __init__(self, *args: str | Path) -> None:
        self.process = subprocess.Popen(
            # A free HTTP port: 8082 may be taken by another server of the suite (a later flag still wins).
            serve_command(*args),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._stderr: str | None = None
        self.line = self._read_line(START_TIMEOUT_S)
        self.ready = dict(part.split("=", 1) for part in self.line.split()[1:])

    def _read_line(self, timeout: float) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        while not data.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([fd], [], [], max(remaining, 0))
            if not readable:
                self.kill()
                raise AssertionError(f"no ready line within {timeout} s; stderr: {self.stderr()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"serve exited ({self.process.wait()}) before ready; stderr: {self.stderr()}")
            data += chunk
        return data.decode().strip()

    def stop(self, signum: signal.Signals) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=STOP_TIMEOUT_S)

    def stderr(self) -> str:
        """Everything the server wrote to stderr, once it has exited."""
        assert self.process.stderr is not None
        if self.process.poll() is None:
            return "(still running)"
        if self._stderr is None:
            self._stderr = self.process.stderr.read().decode()
        return self._stderr

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def close_pipes(self) -> None:
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Every server a test starts is killed at the end if the test left it running."""
    started: list[Server] = []
    yield started
    for server in started:
        server.kill()
        server.close_pipes()


def start(servers: list[Server], *args: str | Path) -> Server:
    server = Server(*args)
    servers.append(server)
    return server


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_ready_and_stops_cleanly_on_signal(
    tmp_path: Path, servers: list[Server], signum: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    store_dir = data_dir / "store"
    server = start(servers, "--data-dir", data_dir)
    assert server.line.startswith("ready ")
    assert server.ready["store"] == str(store_dir)
    assert server.ready["recovery"] == "clean"
    assert (store_dir / "abort").exists()  # open: a crash now would leave it behind
    assert server.stop(signum) == 0, server.stderr()
    assert not (store_dir / "abort").exists()
    assert (store_dir / "checkpoint").exists()
    assert f"{signum.name}: stopping" in server.stderr()


def test_serve_after_a_crash_reports_a_scan(tmp_path: Path, servers: list[Server]) -> None:
    data_dir = tmp_path / "data"
    first = start(servers, "--data-dir", data_dir)
    first.kill()  # SIGKILL: no close, the abort marker stays
    assert (data_dir / "store" / "abort").exists()
    second = start(servers, "--data-dir", data_dir)
    assert second.ready["recovery"] == "scan"
    assert second.stop(signal.SIGTERM) == 0
    third = start(servers, "--data-dir", data_dir)
    assert third.ready["recovery"] == "clean"
    assert third.stop(signal.SIGTERM) == 0


def test_second_serve_on_the_same_directory_is_refused(tmp_path: Path, servers: list[Server]) -> None:
    data_dir = tmp_path / "data"
    first = start(servers, "--data-dir", data_dir)
    second = mqgate("serve", "--data-dir", data_dir)
    assert second.returncode == 1
    assert "ready" not in second.stdout
    assert "another process" in second.stderr
    assert str(data_dir / "store") in second.stderr
    stats = mqgate("store", "stats", "--data-dir", data_dir)
    assert stats.returncode == 1
    assert "another process" in stats.stderr
    assert "while mqgate serve runs, ask it: mqgate admin store stats" in stats.stderr
    # The refused processes did not disturb the first one.
    assert first.process.poll() is None
    assert first.stop(signal.SIGTERM) == 0


def test_console_script_help_lists_every_subcommand() -> None:
    assert CONSOLE_SCRIPT.exists(), f"{CONSOLE_SCRIPT} missing: run `pip install -e '.[dev]'`"
    result = subprocess.run([CONSOLE_SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for command in ("serve", "config", "store stats"):
        assert command in result.stdout
    assert "exit codes" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["serve", "--help"], ["--data-dir", "--config", "--flush-mode", "--segment-size", "--log-level", "ready"]),
        (["config", "--help"], ["effective configuration", "--flush-mode"]),
        (["store", "stats", "--help"], ["recovery report", "--data-dir"]),
    ],
)
def test_subcommand_help_documents_options(args: list[str], expected: list[str]) -> None:
    result = mqgate(*args)
    assert result.returncode == 0
    for text in expected:
        assert text in result.stdout


def test_no_subcommand_is_a_usage_error() -> None:
    result = mqgate()
    assert result.returncode == 2
    assert "serve" in result.stderr


def test_bad_toml_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    config = data_dir / "mqgate.toml"
    config.write_text('[store]\nflush_mode = "SYNC_FLUSH"\nsegment_size = = 3\n')
    result = mqgate("serve", "--data-dir", data_dir)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(config) in lines[0]
    assert "line 3" in lines[0]
    assert not (data_dir / "store").exists()


def test_unknown_key_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('log_level = "INFO"\n[store]\nflush_mod = "SYNC_FLUSH"\n')
    result = mqgate("serve", "--data-dir", tmp_path / "data", "--config", config)
    assert result.returncode == 2
    assert f"{config}:3: unknown key store.flush_mod (did you mean flush_mode?)" in result.stderr
    config.write_text('log_levle = "INFO"\n')
    result = mqgate("serve", "--data-dir", tmp_path / "data", "--config", config)
    assert result.returncode == 2
    assert f"{config}:1: unknown key log_levle (did you mean log_level?)" in result.stderr


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["serve", "--bogus"], "usage: mqgate serve "),
        (["config", "--bogus"], "usage: mqgate config "),
        (["store", "stats", "--bogus"], "usage: mqgate store stats "),
        (["rules", "test", "a.json", "b.json", "--bogus"], "usage: mqgate rules test "),
    ],
)
def test_an_unknown_option_shows_the_usage_of_its_sub_command(args: list[str], usage: str) -> None:
    result = mqgate(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(usage), result.stderr
    assert "error: unrecognized arguments: --bogus" in result.stderr


def test_flag_overrides_the_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[store]\nflush_mode = "ASYNC_FLUSH"\nflush_interval_ms = 250\n')
    from_file = mqgate("config", "--data-dir", tmp_path, "--config", config)
    overridden = mqgate("config", "--data-dir", tmp_path, "--config", config, "--flush-mode", "SYNC_FLUSH")
    assert from_file.returncode == 0 and overridden.returncode == 0
    assert tomllib.loads(from_file.stdout)["store"]["flush_mode"] == "ASYNC_FLUSH"
    store = tomllib.loads(overridden.stdout)["store"]
    assert store["flush_mode"] == "SYNC_FLUSH"
    assert store["flush_interval_ms"] == 250  # the rest of the file still applies
    assert "--flush-mode" in overridden.stdout


def test_config_shows_defaults_and_the_store_dir(tmp_path: Path) -> None:
    result = mqgate("config", "--data-dir", tmp_path)
    assert result.returncode == 0
    parsed = tomllib.loads(result.stdout)
    assert parsed["log_level"] == "INFO"
    assert parsed["store"]["segment_size"] == 1024**3
    assert parsed["store"]["file_reserved_hours"] == 72.0
    assert parsed["store"]["delete_when"] == "04"
    assert str(tmp_path / "store") in result.stdout


def test_segment_size_flag_parses_size_strings(tmp_path: Path) -> None:
    result = mqgate("config", "--data-dir", tmp_path, "--segment-size", "64MiB")
    assert result.returncode == 0
    assert tomllib.loads(result.stdout)["store"]["segment_size"] == 67108864


@pytest.mark.parametrize("size", ["64MB", "lots", "-1", "1KiB"])
def test_bad_segment_size_flag_is_refused(tmp_path: Path, size: str) -> None:
    result = mqgate("serve", "--data-dir", tmp_path, "--segment-size", size)
    assert result.returncode == 2
    assert "segment" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_serve_uses_flags_and_file_together(tmp_path: Path, servers: list[Server]) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "mqgate.yaml").write_text("log_level: DEBUG\nstore:\n  segment_size: 1MiB\n  max_message_size: 64KiB\n")
    server = start(servers, "--data-dir", data_dir, "--config", data_dir / "mqgate.yaml", "--flush-mode", "SYNC_FLUSH")
    assert server.stop(signal.SIGTERM) == 0
    stderr = server.stderr()
    assert "SYNC_FLUSH" in stderr  # logged at open
    assert f"configuration from {data_dir / 'mqgate.yaml'}" in stderr
    assert "DEBUG" in stderr  # log_level from the file


def test_store_stats_prints_tables(tmp_path: Path, servers: list[Server]) -> None:
    data_dir = tmp_path / "data"
    assert start(servers, "--data-dir", data_dir).stop(signal.SIGTERM) == 0
    result = mqgate("store", "stats", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    for key in ("commit_log_max_offset", "dispatched_offset", "segments", "records_scanned", "clean"):
        assert key in result.stdout
    assert not (data_dir / "store" / "abort").exists()  # stats closed the store again


def test_store_stats_piped_prints_whole_rows(tmp_path: Path, servers: list[Server]) -> None:
    # A path far wider than 80 columns: rich cut tables to 80 columns off a terminal, wrapping the title.
    data_dir = tmp_path / ("deep-" * 20) / "data"
    assert start(servers, "--data-dir", data_dir).stop(signal.SIGTERM) == 0
    result = mqgate("store", "stats", "--data-dir", data_dir)
    assert result.returncode == 0, result.stderr
    assert f"store {data_dir / 'store'}" in result.stdout.splitlines()[0]


def test_store_stats_without_a_store_fails_without_creating_one(tmp_path: Path) -> None:
    result = mqgate("store", "stats", "--data-dir", tmp_path / "nowhere")
    assert result.returncode == 1
    assert "no store at" in result.stderr
    assert not (tmp_path / "nowhere").exists()


def test_no_auto_create_topic_flag_reaches_the_broker_section(tmp_path: Path) -> None:
    result = mqgate("config", "--data-dir", tmp_path, "--no-auto-create-topic")
    assert result.returncode == 0, result.stderr
    assert "[broker]" in result.stdout
    assert "auto_create_topic = false  # from --no-auto-create-topic" in result.stdout
