"""mqgate's HTTP port: the ready line, JSON errors, bearer tokens, `[http]` settings and `--http-port`, against a
real `mqgate serve` and aiohttp clients."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from mqgate.config.settings import HTTP_KEY_HELP, ConfigError, Override, load_settings, render_toml
from mqgate.http.app import build_app
from mqgate.http.config import DEFAULT_HOST, DEFAULT_PORT, HttpConfig
from tests.serve_process import ROOT, ServeProcess, serve_command

TOKEN = "t0ken-for-tests"
MQGATE = [sys.executable, "-m", "mqgate.cli"]


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, CIMultiDict[str], object]:
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, response.headers.copy(), await response.json()


async def test_serve_names_the_http_port_and_answers_json(tmp_path: Path):
    server = ServeProcess(tmp_path / "data")
    try:
        host, port = server.ready["http"].rsplit(":", 1)
        assert host == DEFAULT_HOST and int(port) > 0
        status, _, body = await get(f"{server.http_url}/")
        assert status == 200
        assert body == {"name": "mqgate", "version": "0.1.0"}
        status, headers, body = await get(f"{server.http_url}/no/such/thing")
        assert status == 404
        assert headers["Content-Type"].startswith("application/json")
        message = "no resource /no/such/thing (the HTTP APIs are described in docs/)"
        assert body == {"error_code": 404, "message": message}
        async with aiohttp.ClientSession() as session, session.delete(f"{server.http_url}/") as response:
            assert response.status == 405
            assert response.headers["Allow"] == "GET,HEAD"
            assert await response.json() == {
                "error_code": 405,
                "message": "DELETE is not allowed on /; allowed: GET, HEAD",
            }
    finally:
        assert server.stop() == 0


async def test_a_token_is_required_when_configured(tmp_path: Path):
    config = tmp_path / "mqgate.toml"
    config.write_text(f'[http]\ntoken = "{TOKEN}"\n')
    server = ServeProcess(tmp_path / "data", "--config", config)
    try:
        status, headers, body = await get(f"{server.http_url}/")
        assert status == 401
        # Both schemes: a browser asks for a user and password, and takes the token as the password.
        assert headers.getall("WWW-Authenticate") == ['Basic realm="mqgate", charset="UTF-8"', 'Bearer realm="mqgate"']
        assert body == {
            "error_code": 401,
            "message": "authentication required: send the header 'Authorization: Bearer <token>' ([http] token)",
        }
        status, _, body = await get(f"{server.http_url}/", {"Authorization": "Bearer wrong"})
        assert (status, body) == (401, {"error_code": 401, "message": "invalid bearer token"})
        status, _, _ = await get(f"{server.http_url}/", {"Authorization": f"Basic {TOKEN}"})
        assert status == 401
        status, _, body = await get(f"{server.http_url}/", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200
        basic = base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
        status, _, body = await get(f"{server.http_url}/", {"Authorization": f"Basic {basic}"})
        assert status == 200
        wrong = base64.b64encode(b"anyone:wrong").decode()
        status, _, body = await get(f"{server.http_url}/", {"Authorization": f"Basic {wrong}"})
        assert (status, body["message"]) == (401, "user 'anyone': unknown user or wrong password")
        # Unknown routes too: nothing is answered without the token but 401.
        status, _, _ = await get(f"{server.http_url}/nothing")
        assert status == 401
    finally:
        assert server.stop() == 0


def test_a_port_in_use_stops_serve_with_exit_2_naming_the_flag(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            serve_command("--data-dir", tmp_path / "data", "--http-port", port),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mqgate: error: [http] cannot listen on 127.0.0.1:{port}: ")
    assert "--http-port" in last
    # The store was closed cleanly on the way out.
    server = ServeProcess(tmp_path / "data")
    assert server.ready["recovery"] == "clean"
    assert server.stop() == 0


def test_http_can_be_turned_off(tmp_path: Path):
    config = tmp_path / "mqgate.yaml"
    config.write_text("http:\n  enabled: false\n")
    server = ServeProcess(tmp_path / "data", "--config", config)
    assert "http" not in server.ready
    assert server.stop() == 0


def test_http_settings_file_and_flag(tmp_path: Path):
    assert load_settings(tmp_path).http == HttpConfig(True, DEFAULT_HOST, DEFAULT_PORT, None)
    config = tmp_path / "mqgate.toml"
    config.write_text(f'[http]\nhost = "0.0.0.0"\nport = 9000\ntoken = "{TOKEN}"\n')
    settings = load_settings(tmp_path, config)
    assert settings.http == HttpConfig(True, "0.0.0.0", 9000, TOKEN)
    flagged = load_settings(tmp_path, config, [Override("http.port", 0, "--http-port")])
    assert flagged.http.port == 0
    assert flagged.origins["http.port"] == "--http-port"
    rendered = render_toml(flagged)
    assert TOKEN not in rendered  # `mqgate config` output gets pasted into issues
    assert f"# token =  (set, hidden; from {config}:4)" in rendered
    # What it prints is a configuration mqgate accepts (with the token left out).
    again = tmp_path / "again.toml"
    again.write_text(rendered)
    assert load_settings(tmp_path, again).http == HttpConfig(True, "0.0.0.0", 0, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("port = 70000", r"mqgate.toml:2: http.port: 70000: a port goes from 1 to 65535"),
        ('port = "x"', r"http.port: expected a positive integer"),
        ('token = "two words"', r"invalid \[http\] settings: http token: must be non-empty without spaces"),
        (
            "tokens = 1",
            r"unknown key http.tokens \(did you mean token\?\); "
            r"\[http\] takes: admin_users, enabled, host, port, token",
        ),
    ],
)
def test_bad_http_settings_are_named(tmp_path: Path, text: str, expected: str):
    config = tmp_path / "mqgate.toml"
    config.write_text(f"[http]\n{text}\n")
    with pytest.raises(ConfigError, match=expected):
        load_settings(tmp_path, config)


def test_a_bad_http_port_flag_is_named(tmp_path: Path):
    with pytest.raises(ConfigError, match="--http-port: 65536: a port goes from 1 to 65535"):
        load_settings(tmp_path, None, [Override("http.port", 65536, "--http-port")])


def test_every_http_field_is_documented():
    assert set(HTTP_KEY_HELP) == set(HttpConfig.__dataclass_fields__)


def test_serve_help_names_the_flag():
    result = subprocess.run([*MQGATE, "serve", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "--http-port N" in result.stdout


async def test_an_unexpected_exception_is_a_json_500_and_the_server_goes_on():
    app = build_app(HttpConfig())

    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    app.router.add_get("/broken", broken)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/broken")
        assert response.status == 500
        assert await response.json() == {"error_code": 500, "message": "internal error: RuntimeError: a bug"}
        response = await client.get("/")
        assert response.status == 200
