"""`mqgate serve` as a real child process on free ports, for tests that talk to it over the network.

The ready line is read with a deadline; `ready` holds its `key=value` parts (`http`, `mqtt`, ...).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

ROOT = Path(__file__).resolve().parents[1]
# Generous: a loaded machine can take seconds to start Python and import everything.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# Every server started and not yet stopped or killed: tests/conftest.py kills what a test leaves (one that failed
# between starting a server and stopping it), so that it does not run on beside the rest of the suite.
RUNNING: set[ChildProcess] = set()


def serve_command(*args: str | Path) -> list[str]:
    """The `mqgate serve` command line with every listener on a free port (0), then `args` (a later flag wins)."""
    return [
        sys.executable, "-m", "mqgate.cli", "serve", "--mqtt-port", "0", "--http-port", "0", "--grpc-port", "0",
        "--remoting-port", "0", "--namesrv-port", "0", *map(str, args),
    ]  # fmt: skip


class ChildProcess:
    """A mqgate command as a child process, its stderr in `stderr_path`, ready once it prints its first line
    (which must start with `ready_prefix`)."""

    def __init__(
        self, command: list[str], stderr_path: Path, ready_prefix: str, env: dict[str, str] | None, cwd: Path = ROOT
    ) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "ab") as stderr:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        RUNNING.add(self)
        self.line = self._read_line()
        assert self.line.startswith(ready_prefix), f"{self.line!r}; stderr: {self.stderr()}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def _read_line(self) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + START_TIMEOUT_S
        data = b""
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            if not readable:
                self.kill()
                raise AssertionError(f"no ready line within {START_TIMEOUT_S} s; stderr: {self.stderr()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                code = self.process.wait()
                raise AssertionError(f"exited ({code}) before ready; stderr: {self.stderr()}")
            data += chunk
        return data.decode().strip()

    def stop(self) -> int:
        """SIGTERM and wait: the exit code (0 after a clean stop)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=STOP_TIMEOUT_S)
        self._close()
        return code

    def _close(self) -> None:
        RUNNING.discard(self)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_S)
        self._close()


class ServeProcess(ChildProcess):
    def __init__(
        self,
        data_dir: Path,
        *args: str | Path,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        """`wrapper`: a command that runs serve (`ip netns exec NS`, for a test that cuts its links)."""
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        # cwd: where relative paths of connector configs lead
        command = [*wrapper, *serve_command("--data-dir", data_dir, *args)]
        super().__init__(command, data_dir.parent / f"{data_dir.name}.stderr", "ready ", env, cwd)
        self.ready = dict(part.split("=", 1) for part in self.line.split()[1:])

    @property
    def http_url(self) -> str:
        return f"http://{self.ready['http']}"


def mqtt_client(serve: ServeProcess, client_id: str, clean: bool = True, v5: bool = False) -> paho.Client:
    """A paho client connected to the server's MQTT listener, its network loop running in a thread."""
    host, port = serve.ready["mqtt"].rsplit(":", 1)
    if v5:
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
    else:
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
    client.connect(host, int(port))
    client.loop_start()
    return client
