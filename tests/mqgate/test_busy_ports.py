"""A port another process holds stops `mqgate serve` with exit code 2 and one line naming the address, the reason
and the setting that moves it, for each listener; other OS errors blame the data directory only when theirs."""

from __future__ import annotations

import errno
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqgate.cli import os_error_message
from tests.serve_process import ROOT, ServeProcess, serve_command


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket of this test holds, as another broker would."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("certificate")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "2", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.pem"],
        cwd=directory, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return directory / "server.pem", directory / "server.key"


def serve_fails(tmp_path: Path, *args: str | Path, config: str = "") -> str:
    """Run `mqgate serve` (every listener on 127.0.0.1, free ports, then `args`); assert exit 2; the error line."""
    config_file = tmp_path / "mqgate.toml"
    config_file.write_text('[mqtt]\nhost = "127.0.0.1"\n' + config + '[grpc]\nhost = "127.0.0.1"\n')
    result = subprocess.run(
        serve_command("--data-dir", tmp_path / "data", "--config", config_file, *args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    # The parts opened before the failing one were closed: the store opens clean.
    server = ServeProcess(tmp_path / "data")
    assert server.ready["recovery"] == "clean"
    assert server.stop() == 0
    return last


def test_mqtt_port_in_use_names_the_address_the_flag_and_the_likely_holder(tmp_path: Path, held_port: int):
    last = serve_fails(tmp_path, "--mqtt-port", str(held_port))
    assert last == (
        f"mqgate: error: [mqtt] cannot listen on 127.0.0.1:{held_port}: address already in use (another MQTT"
        " broker (e.g. the mosquitto service: `systemctl status mosquitto`) may hold it); choose another port with"
        " --mqtt-port or [mqtt] port (0: a free one)"
    )


def test_tls_port_in_use_names_its_key(tmp_path: Path, held_port: int, certificate: tuple[Path, Path]):
    cert, key = certificate
    last = serve_fails(tmp_path, config=f'tls_port = {held_port}\ncertfile = "{cert}"\nkeyfile = "{key}"\n')
    assert last.startswith(f"mqgate: error: [mqtt] cannot listen on 127.0.0.1:{held_port}: address already in use")
    assert last.endswith("; choose another port with [mqtt] tls_port (0: a free one)")


def test_websocket_port_in_use_names_its_key(tmp_path: Path, held_port: int):
    last = serve_fails(tmp_path, config=f"websocket_port = {held_port}\n")
    assert last.startswith(f"mqgate: error: [mqtt] cannot listen on 127.0.0.1:{held_port}: address already in use")
    assert last.endswith("; choose another port with [mqtt] websocket_port (0: a free one)")


def test_grpc_port_in_use_names_the_flag(tmp_path: Path, held_port: int):
    last = serve_fails(tmp_path, "--grpc-port", str(held_port))
    assert last == (
        f"mqgate: error: [grpc] cannot listen on 127.0.0.1:{held_port}: the port is in use, or the host is not an"
        " address of this machine; choose another port with --grpc-port or [grpc] port (0: a free one)"
    )


def test_http_port_in_use_says_the_same_in_the_same_shape(tmp_path: Path, held_port: int):
    last = serve_fails(tmp_path, "--http-port", str(held_port))
    assert last == (
        f"mqgate: error: [http] cannot listen on 127.0.0.1:{held_port}: address already in use;"
        " choose another port with --http-port or [http] port (0: a free one)"
    )


def test_os_errors_blame_the_data_directory_only_for_its_own_files(tmp_path: Path):
    data_dir = tmp_path / "data"
    inside = PermissionError(errno.EACCES, "Permission denied", str(data_dir / "store" / "commitlog"))
    assert os_error_message(inside, data_dir) == (
        f"[Errno 13] Permission denied: '{data_dir / 'store' / 'commitlog'}'; check the data directory {data_dir}"
        " and its permissions"
    )
    elsewhere = PermissionError(errno.EACCES, "Permission denied", "/etc/mqgate/passwd")
    assert os_error_message(elsewhere, data_dir) == "[Errno 13] Permission denied: '/etc/mqgate/passwd'"
    no_file = OSError(errno.EADDRINUSE, "Address already in use")
    assert os_error_message(no_file, data_dir) == "[Errno 98] Address already in use"
    # A relative data directory and an absolute file name under it are the same place.
    relative = Path("data")
    absolute = FileNotFoundError(errno.ENOENT, "No such file", str(Path.cwd() / "data" / "x"))
    assert "check the data directory data" in os_error_message(absolute, relative)
