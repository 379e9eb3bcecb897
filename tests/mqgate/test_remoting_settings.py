"""The [remoting] and [namesrv] sections (RocketMQ 4's protocol: the broker's remoting port and the NameServer) and
their flags --remoting-port and --namesrv-port: defaults, files, flags, and the errors that name the key and the
bad value. In-process, real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_remoting.config import RemotingConfig
from mqgate.cli import build_parser, settings_from_args
from mqgate.config.settings import ConfigError, load_settings, render_toml
from namesrv.config import NamesrvConfig


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_are_rocketmqs_ports_and_the_embedded_nameserver(tmp_path: Path):
    settings = load_settings(tmp_path)
    assert settings.remoting == RemotingConfig()
    assert (settings.remoting.enabled, settings.remoting.port, settings.remoting.namesrv_addresses) == (True, 10911, ())
    assert settings.namesrv == NamesrvConfig()
    assert (settings.namesrv.embedded, settings.namesrv.host, settings.namesrv.port) == (True, "0.0.0.0", 9876)


def test_every_key_from_a_toml_file_and_back_through_mqgate_config(tmp_path: Path):
    config = write(
        tmp_path / "mqgate.toml",
        '[remoting]\nport = 0\nhost = "127.0.0.1"\nbroker_ip = "192.0.2.10"\ncluster_name = "east"\n'
        'namesrv_addresses = ["10.0.0.5:9876", "ns.example:9877"]\n'
        'acl_file = "/etc/mqgate/plain_acl.yml"\n[namesrv]\nembedded = false\nhost = "127.0.0.1"\nport = 0\n',
    )
    settings = load_settings(tmp_path, config)
    assert settings.remoting == RemotingConfig(
        enabled=True,
        host="127.0.0.1",
        port=0,
        broker_ip="192.0.2.10",
        cluster_name="east",
        namesrv_addresses=("10.0.0.5:9876", "ns.example:9877"),
        acl_file="/etc/mqgate/plain_acl.yml",
    )
    assert settings.namesrv == NamesrvConfig(embedded=False, host="127.0.0.1", port=0)
    assert settings.origins["remoting.namesrv_addresses"].endswith("mqgate.toml:6")
    rendered = render_toml(settings)
    assert 'namesrv_addresses = ["10.0.0.5:9876", "ns.example:9877"]' in rendered
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", rendered))
    assert (again.remoting, again.namesrv) == (settings.remoting, settings.namesrv)


def test_yaml_takes_the_same_keys(tmp_path: Path):
    config = write(tmp_path / "mqgate.yaml", "remoting:\n  namesrv_addresses:\n    - ::1:9876\nnamesrv:\n  port: 0\n")
    settings = load_settings(tmp_path, config)
    assert (settings.remoting.namesrv_addresses, settings.namesrv.port) == (("::1:9876",), 0)


def test_the_flags_set_the_ports_and_win_over_the_file(tmp_path: Path):
    config = write(tmp_path / "mqgate.toml", "[remoting]\nport = 20911\n[namesrv]\nport = 19876\n")
    args = ["serve", "--data-dir", str(tmp_path), "--config", str(config), "--remoting-port", "0"]
    settings = settings_from_args(build_parser().parse_args([*args, "--namesrv-port", "0"]))
    assert (settings.remoting.port, settings.namesrv.port) == (0, 0)
    assert (settings.origins["remoting.port"], settings.origins["namesrv.port"]) == (
        "--remoting-port",
        "--namesrv-port",
    )
    assert "port = 0  # from --remoting-port" in render_toml(settings)


def test_the_flags_are_in_serves_help():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    text = serve.format_help()
    assert "0 picks a free one, named in the ready line (remoting.port" in " ".join(text.split())
    assert "0 picks a free one, named in the ready line (namesrv.port" in " ".join(text.split())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[remoting]\nnamesrv_addresses = "10.0.0.5:9876;10.0.0.6:9876"\n',
            "mqgate.toml:2: remoting.namesrv_addresses: expected a list of HOST:PORT strings, got a string"
            ' ("10.0.0.5:9876;10.0.0.6:9876"); write it as ["10.0.0.5:9876", "10.0.0.6:9876"]',
        ),
        (
            '[remoting]\nnamesrv_addresses = ["10.0.0.5:9876", "10.0.0.6"]\n',
            "mqgate.toml:2: remoting.namesrv_addresses: entry '10.0.0.6': not HOST:PORT; write each address as"
            ' "HOST:PORT", e.g. "10.0.0.5:9876"',
        ),
        (
            '[remoting]\nnamesrv_addresses = [":9876"]\n',
            "remoting.namesrv_addresses: entry ':9876': no HOST before the port",
        ),
        (
            '[remoting]\nnamesrv_addresses = ["ns:98765"]\n',
            "remoting.namesrv_addresses: entry 'ns:98765': port '98765' is not a port from 1 to 65535",
        ),
        (
            '[remoting]\nnamesrv_addresses = ["ns:x"]\n',
            "remoting.namesrv_addresses: entry 'ns:x': port 'x' is not a port from 1 to 65535",
        ),
        (
            '[remoting]\nnamesrv_addresses = ["a b:9876"]\n',
            "remoting.namesrv_addresses: entry 'a b:9876': not HOST:PORT",
        ),
        (
            '[remoting]\nnamesrv_addresses = ["[::1]:9876"]\n',
            "remoting.namesrv_addresses: entry '[::1]:9876': write an IPv6 address without brackets",
        ),
        ("[remoting]\nnamesrv_addresses = [9876]\n", "remoting.namesrv_addresses: expected a list of strings"),
        (
            '[remoting]\nbroker_ip = "broker.example"\n',
            "mqgate.toml:2: remoting.broker_ip: 'broker.example' is not an IP address; give one such as 192.0.2.10",
        ),
        ("[remoting]\nport = 70000\n", "mqgate.toml:2: remoting.port: 70000: a port goes from 1 to 65535"),
        ('[namesrv]\nembedded = "yes"\n', "mqgate.toml:2: namesrv.embedded: expected true or false"),
        ("[namesrv]\nnamesrv_port = 1\n", "unknown key namesrv.namesrv_port"),
        ("namesrv_addresses = []\n", "remoting settings go in the [remoting] section"),
    ],
)
def test_bad_values_name_the_file_line_key_and_entry(tmp_path: Path, text: str, message: str):
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path, write(tmp_path / "mqgate.toml", text))
    assert message in str(caught.value)


@pytest.mark.parametrize("flag", ["--remoting-port", "--namesrv-port"])
def test_a_bad_port_flag_is_named(tmp_path: Path, flag: str):
    args = build_parser().parse_args(["serve", "--data-dir", str(tmp_path), flag, "-1"])
    with pytest.raises(ConfigError, match=rf"^{flag}: -1: must be a positive integer"):
        settings_from_args(args)
