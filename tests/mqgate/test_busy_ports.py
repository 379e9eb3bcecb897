"""A port another process holds stops `mqgate serve` with exit code 2 and one line naming the address, the reason
and the setting that moves it, for each listener, whether the holder set SO_REUSEPORT (as grpcio does by default)
or not; a second `mqgate serve` on the ports of a running one stops so and the first serves on. Other OS errors
blame the data directory only when theirs."""

from __future__ import annotations

import errno
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import Code, definition_pb2, service_pb2, service_pb2_grpc

from mqgate.cli import os_error_message
from tests.proxy.serving import write_topics
from tests.serve_process import ROOT, ServeProcess, mqtt_client, serve_command


@pytest.fixture(params=["plain", "SO_REUSEPORT"])
def held_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket of this test holds, as another broker would; with SO_REUSEPORT,
    as another grpcio server holds it (the kernel would let a listener that sets it too share the port)."""
    with socket.socket() as taken:
        if request.param == "SO_REUSEPORT":
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
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


def serve_fails(tmp_path: Path, *args: str | Path, config: str = "", grpc_host: str = "127.0.0.1") -> str:
    """Run `mqgate serve` (every listener on 127.0.0.1, free ports, then `args`; `config` goes in [mqtt]); assert
    exit 2; the error line."""
    config_file = tmp_path / "mqgate.toml"
    config_file.write_text(
        f'[mqtt]\nhost = "127.0.0.1"\n{config}[grpc]\nhost = "{grpc_host}"\n[remoting]\nhost = "127.0.0.1"\n'
        '[namesrv]\nhost = "127.0.0.1"\n'
    )
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
        f"mqgate: error: [grpc] cannot listen on 127.0.0.1:{held_port}: address already in use;"
        " choose another port with --grpc-port or [grpc] port (0: a free one)"
    )


def test_a_grpc_host_that_is_not_of_this_machine_says_so(tmp_path: Path):
    last = serve_fails(tmp_path, "--grpc-port", "0", grpc_host="192.0.2.1")  # TEST-NET-1: nobody's address
    assert last == (
        "mqgate: error: [grpc] cannot listen on 192.0.2.1:0: cannot assign requested address;"
        " choose another port with --grpc-port or [grpc] port (0: a free one)"
    )


@pytest.mark.parametrize(("section", "flag"), [("remoting", "--remoting-port"), ("namesrv", "--namesrv-port")])
def test_a_rocketmq4_port_in_use_names_the_flag_and_the_likely_holder(
    tmp_path: Path, held_port: int, section: str, flag: str
):
    last = serve_fails(tmp_path, flag, str(held_port))
    assert last == (
        f"mqgate: error: [{section}] cannot listen on 127.0.0.1:{held_port}: address already in use (a RocketMQ"
        f" broker or NameServer (mqbroker, mqnamesrv) may hold it); choose another port with {flag} or [{section}]"
        " port (0: a free one)"
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


def second_serve(tmp_path: Path, *args: str | Path) -> tuple[str, int, str]:
    """Run another `mqgate serve` (free ports, then `args`), stopped if it gets as far as its ready line: that line
    (empty if none), its exit code and the last line of its stderr."""
    stderr_path = tmp_path / "second.stderr"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            serve_command("--data-dir", tmp_path / "second", *args), cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr
        )
    assert process.stdout is not None
    with process.stdout:
        line = process.stdout.readline().decode()  # the ready line, or nothing at the exit
        if line:
            process.send_signal(signal.SIGTERM)
    code = process.wait(timeout=60)
    lines = stderr_path.read_text().strip().splitlines()
    return line, code, lines[-1] if lines else ""


def test_a_second_server_on_the_ports_of_a_running_one_exits_2_and_the_first_serves_on(
    tmp_path: Path, certificate: tuple[Path, Path]
):
    cert, key = certificate
    tls = f'certfile = "{cert}"\nkeyfile = "{key}"\n'
    first_config = tmp_path / "first.toml"
    first_config.write_text(f"[mqtt]\ntls_port = 0\nwebsocket_port = 0\n{tls}")
    write_topics(tmp_path / "first", {"busy": "NORMAL"})
    first = ServeProcess(tmp_path / "first", "--config", first_config)  # every listener on its default host
    names = ("grpc", "remoting", "namesrv", "mqtt", "mqtts", "mqtt_wss", "http")
    ports = {name: int(first.ready[name].rpartition(":")[2]) for name in names}
    wss, remoting, namesrv = ports["mqtt_wss"], ports["remoting"], ports["namesrv"]
    # (the part, the flags or [mqtt] keys that give the second server a port of the first, its address, the setting)
    tried = [
        ("grpc", ["--grpc-port", ports["grpc"]], "", f"0.0.0.0:{ports['grpc']}", "--grpc-port or [grpc] port"),
        ("remoting", ["--remoting-port", remoting], "", f"0.0.0.0:{remoting}", "--remoting-port or [remoting] port"),
        ("namesrv", ["--namesrv-port", namesrv], "", f"0.0.0.0:{namesrv}", "--namesrv-port or [namesrv] port"),
        ("mqtt", ["--mqtt-port", ports["mqtt"]], "", f"0.0.0.0:{ports['mqtt']}", "--mqtt-port or [mqtt] port"),
        ("mqtt", [], f"tls_port = {ports['mqtts']}\n", f"0.0.0.0:{ports['mqtts']}", "[mqtt] tls_port"),
        ("mqtt", [], f"websocket_port = {wss}\n", f"0.0.0.0:{wss}", "[mqtt] websocket_port"),
        ("http", ["--http-port", ports["http"]], "", f"127.0.0.1:{ports['http']}", "--http-port or [http] port"),
    ]
    second_config = tmp_path / "second.toml"
    for section, flags, keys, address, setting in tried:
        second_config.write_text(f"[mqtt]\n{keys}{tls}")
        line, code, last = second_serve(tmp_path, "--config", second_config, *flags)
        assert (line, code) == ("", 2), f"a second server started on {address} beside the first: {line}"
        assert last.startswith(f"mqgate: error: [{section}] cannot listen on {address}: address already in use")
        assert last.endswith(f"; choose another port with {setting} (0: a free one)")
    # The first serves on, on every port: gRPC, MQTT over TCP, HTTP, remoting and NameServer (TLS and WebSocket
    # share the gateway).
    with grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}") as channel:
        route = service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(
            service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="busy")),
            metadata=(("x-mq-client-id", "busy-ports"),),
            timeout=10,
        )
    assert route.status.code == Code.OK
    assert {queue.broker.endpoints.addresses[0].port for queue in route.message_queues} == {ports["grpc"]}
    client = mqtt_client(first, "still-there")
    published = client.publish("busy/x", b"x", qos=1)
    published.wait_for_publish(10)
    assert published.is_published()
    client.disconnect()
    client.loop_stop()
    with urllib.request.urlopen(f"{first.http_url}/", timeout=10) as response:
        assert response.status == 200
    for name in ("remoting", "namesrv"):
        with socket.create_connection(("127.0.0.1", ports[name]), timeout=10):
            pass
    assert first.stop() == 0
