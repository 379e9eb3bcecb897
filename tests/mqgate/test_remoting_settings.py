"""The [remoting] and [namesrv] sections (RocketMQ 4's protocol: the broker's remoting port and the NameServer), the
cluster keys of [broker] (cluster_name, namesrv_addr), and their flags --remoting-port, --namesrv-port,
--broker-name, --cluster-name and --namesrv-addr: defaults, files, flags, and the errors that name the key and the
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
    assert (settings.remoting.enabled, settings.remoting.port, settings.broker.namesrv_addr) == (True, 10911, ())
    assert (settings.broker.broker_name, settings.broker.cluster_name) == ("broker-a", "DefaultCluster")
    assert settings.namesrv == NamesrvConfig()
    assert (settings.namesrv.embedded, settings.namesrv.host, settings.namesrv.port) == (None, "0.0.0.0", 9876)


def test_every_key_from_a_toml_file_and_back_through_mqgate_config(tmp_path: Path):
    config = write(
        tmp_path / "mqgate.toml",
        '[broker]\ncluster_name = "east"\nnamesrv_addr = ["10.0.0.5:9876", "ns.example:9877"]\n'
        '[remoting]\nport = 0\nhost = "127.0.0.1"\nbroker_ip = "192.0.2.10"\n'
        'acl_file = "/etc/mqgate/plain_acl.yml"\n[namesrv]\nembedded = false\nhost = "127.0.0.1"\nport = 0\n',
    )
    settings = load_settings(tmp_path, config)
    assert settings.remoting == RemotingConfig(
        enabled=True,
        host="127.0.0.1",
        port=0,
        broker_ip="192.0.2.10",
        acl_file="/etc/mqgate/plain_acl.yml",
    )
    assert settings.broker.cluster_name == "east"
    assert settings.broker.namesrv_addr == ("10.0.0.5:9876", "ns.example:9877")
    assert settings.namesrv == NamesrvConfig(embedded=False, host="127.0.0.1", port=0)
    assert settings.origins["broker.namesrv_addr"].endswith("mqgate.toml:3")
    rendered = render_toml(settings)
    assert 'namesrv_addr = ["10.0.0.5:9876", "ns.example:9877"]' in rendered
    again = load_settings(tmp_path, write(tmp_path / "rendered.toml", rendered))
    assert (again.remoting, again.namesrv, again.broker) == (settings.remoting, settings.namesrv, settings.broker)


def test_namesrv_addr_is_also_rocketmqs_semicolon_string(tmp_path: Path):
    config = write(tmp_path / "mqgate.toml", '[broker]\nnamesrv_addr = "10.0.0.5:9876; 10.0.0.6:9876;"\n')
    assert load_settings(tmp_path, config).broker.namesrv_addr == ("10.0.0.5:9876", "10.0.0.6:9876")


def test_the_cluster_flags_name_the_broker_its_cluster_and_nameservers(tmp_path: Path):
    args = ["serve", "--data-dir", str(tmp_path), "--namesrv-addr", "127.0.0.1:9876;127.0.0.1:9877"]
    args += ["--cluster-name", "C", "--broker-name", "b2"]
    settings = settings_from_args(build_parser().parse_args(args))
    assert settings.broker.namesrv_addr == ("127.0.0.1:9876", "127.0.0.1:9877")
    assert (settings.broker.cluster_name, settings.broker.broker_name) == ("C", "b2")
    assert settings.origins["broker.namesrv_addr"] == "--namesrv-addr"
    bad = ["serve", "--data-dir", str(tmp_path), "--namesrv-addr", "127.0.0.1"]
    with pytest.raises(ConfigError) as caught:
        settings_from_args(build_parser().parse_args(bad))
    assert "--namesrv-addr: entry '127.0.0.1': not HOST:PORT" in str(caught.value)


def test_yaml_takes_the_same_keys(tmp_path: Path):
    config = write(tmp_path / "mqgate.yaml", "broker:\n  namesrv_addr:\n    - ::1:9876\nnamesrv:\n  port: 0\n")
    settings = load_settings(tmp_path, config)
    assert (settings.broker.namesrv_addr, settings.namesrv.port) == (("::1:9876",), 0)


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
            '[broker]\nnamesrv_addr = "10.0.0.5:9876,10.0.0.6:9876"\n',
            "mqgate.toml:2: broker.namesrv_addr: entry '10.0.0.5:9876,10.0.0.6:9876': separate addresses with ';'",
        ),
        (
            '[broker]\nnamesrv_addr = ["10.0.0.5:9876", "10.0.0.6"]\n',
            "mqgate.toml:2: broker.namesrv_addr: entry '10.0.0.6': not HOST:PORT; write each address as"
            ' "HOST:PORT", e.g. "10.0.0.5:9876"',
        ),
        (
            '[broker]\nnamesrv_addr = [":9876"]\n',
            "broker.namesrv_addr: entry ':9876': no HOST before the port",
        ),
        (
            '[broker]\nnamesrv_addr = ["ns:98765"]\n',
            "broker.namesrv_addr: entry 'ns:98765': port '98765' is not a port from 1 to 65535",
        ),
        (
            '[broker]\nnamesrv_addr = ["ns:x"]\n',
            "broker.namesrv_addr: entry 'ns:x': port 'x' is not a port from 1 to 65535",
        ),
        (
            '[broker]\nnamesrv_addr = ["a b:9876"]\n',
            "broker.namesrv_addr: entry 'a b:9876': not HOST:PORT",
        ),
        (
            '[broker]\nnamesrv_addr = ["[::1]:9876"]\n',
            "broker.namesrv_addr: entry '[::1]:9876': write an IPv6 address without brackets",
        ),
        ("[broker]\nnamesrv_addr = [9876]\n", "broker.namesrv_addr: expected a list of strings"),
        ("[broker]\nnamesrv_addr = 9876\n", 'broker.namesrv_addr: expected "HOST:PORT;HOST:PORT" or a list'),
        (
            '[remoting]\nbroker_ip = "broker.example"\n',
            "mqgate.toml:2: remoting.broker_ip: 'broker.example' is not an IP address; give one such as 192.0.2.10",
        ),
        ("[remoting]\nport = 70000\n", "mqgate.toml:2: remoting.port: 70000: a port goes from 1 to 65535"),
        ('[namesrv]\nembedded = "yes"\n', "mqgate.toml:2: namesrv.embedded: expected true or false"),
        ("[namesrv]\nnamesrv_port = 1\n", "unknown key namesrv.namesrv_port"),
        ("namesrv_addr = []\n", "broker settings go in the [broker] section"),
        ("[remoting]\nnamesrv_addresses = []\n", "unknown key remoting.namesrv_addresses"),
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
