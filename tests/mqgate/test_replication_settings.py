"""The replication keys (RocketMQ's HA): [broker] broker_id, broker_role and slave_read_enable with their flags
--broker-id and --role, the [ha] section, and [store] access_message_in_memory_max_ratio: defaults, files, flags,
the errors that name what is wrong, and an HA port in use stopping `mqgate serve` as any busy port does."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from core import BrokerRole, HAConfig
from mqgate.cli import build_parser, settings_from_args
from mqgate.config.settings import ConfigError, load_settings, render_toml
from tests.serve_process import ROOT, serve_command


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_a_master_listening_on_the_remoting_port_plus_one(tmp_path: Path):
    settings = load_settings(tmp_path)
    assert (settings.broker.broker_id, settings.broker.broker_role) == (0, BrokerRole.ASYNC_MASTER)
    assert settings.store.role is BrokerRole.ASYNC_MASTER
    assert settings.store.ha == HAConfig(listen_port=10912)
    assert settings.store.access_message_in_memory_max_ratio == 40
    free = load_settings(tmp_path, write(tmp_path / "free.toml", "[remoting]\nport = 0\n"))
    assert free.store.ha.listen_port == 0


def test_a_slave_from_a_file_and_back_through_mqgate_config(tmp_path: Path):
    config = write(
        tmp_path / "mqgate.toml",
        '[broker]\nbroker_id = 2\nbroker_role = "slave"\nslave_read_enable = true\n'
        '[ha]\nmaster_address = "10.0.0.7:10912"\nslave_timeout_ms = 1500\nmax_gap_not_in_sync = "64MiB"\n'
        "[store]\naccess_message_in_memory_max_ratio = 0\n",
    )
    settings = load_settings(tmp_path, config)
    assert (settings.broker.broker_id, settings.store.role) == (2, BrokerRole.SLAVE)
    assert settings.store.ha.master_address == "10.0.0.7:10912"
    assert (settings.store.ha.slave_timeout_ms, settings.store.ha.max_gap_not_in_sync) == (1500, 64 * 1024 * 1024)
    assert settings.store.access_message_in_memory_max_ratio == 0
    rendered = render_toml(settings)
    assert 'broker_role = "SLAVE"' in rendered and "[ha]" in rendered
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", rendered))
    assert (again.broker, again.store) == (settings.broker, settings.store)


def test_the_flags(tmp_path: Path):
    args = build_parser().parse_args(["serve", "--data-dir", str(tmp_path), "--broker-id", "1", "--role", "SLAVE"])
    settings = settings_from_args(args)
    assert (settings.broker.broker_id, settings.broker.broker_role) == (1, BrokerRole.SLAVE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[broker]\nbroker_role = "SLAVE"\n', "a SLAVE's broker_id must be 1 or more"),
        ("[broker]\nbroker_id = 1\n", "a master's broker_id is 0, not 1"),
        ('[broker]\nbroker_role = "LEADER"\n', "'LEADER' is not a broker role; expected ASYNC_MASTER, SYNC_MASTER"),
        ('[ha]\nmaster_address = "nowhere"\n', "master_address 'nowhere': give host:port"),
        ("[ha]\nslave_timeout_ms = 0\n", "ha.slave_timeout_ms: 0: must be a positive integer"),
        ("[store]\naccess_message_in_memory_max_ratio = 140\n", "a percentage, 0 to 100"),
        ("[ha]\nlisten_port = 70000\n", "70000"),
    ],
)
def test_bad_values_are_named(tmp_path: Path, text: str, message: str):
    with pytest.raises(ConfigError, match=message):
        load_settings(tmp_path, write(tmp_path / "mqgate.toml", text))


def test_an_ha_port_in_use_stops_serve_with_exit_code_2(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        write(tmp_path / "mqgate.toml", f'[ha]\nhost = "127.0.0.1"\nlisten_port = {port}\n')
        done = subprocess.run(
            serve_command("--data-dir", tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"[ha] cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "[ha] listen_port" in done.stderr
