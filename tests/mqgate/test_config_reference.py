"""docs/configuration.md is what `mqgate config --reference` prints, from the settings' own help, defaults and
flags; every key has its help and type, and every flag in the table sets the key it names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mqgate.cli import build_parser, settings_from_args
from mqgate.config.help import SECTION_HELP
from mqgate.config.reference import REGENERATE
from mqgate.config.settings import FLAGS, SECTIONS, TOP_LEVEL_PARSERS
from mqgate.config.values import VALUE_TYPES
from tests.serve_process import ROOT


def mqgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_docs_configuration_md_is_the_reference_command_output():
    result = mqgate("config", "--reference")
    assert result.returncode == 0, result.stderr
    document = (ROOT / "docs" / "configuration.md").read_text()
    assert document == result.stdout, f"docs/configuration.md is out of date; regenerate it: {REGENERATE}"


def test_the_reference_has_a_row_per_key_with_its_default_and_flag():
    reference = mqgate("config", "--reference").stdout
    for section in SECTIONS.values():
        assert f"\n## [{section.name}]\n" in reference
        for name in section.parsers:
            assert f"\n| `{name}` | " in reference
    assert "| `port` | port 0 to 65535 (0: a free one) | `1883` | `--mqtt-port` | MQTT over TCP" in reference
    size = "size: bytes, or a string with B, KiB, MiB, GiB or TiB"
    assert f"| `segment_size` | {size} | `1073741824` (1GiB) | `--segment-size` |" in reference
    assert "| `token` | string, or unset | unset |  | bearer token every request must carry" in reference


def test_every_setting_has_help_and_a_type():
    for section in SECTIONS.values():
        assert SECTION_HELP[section.name].strip()
        assert set(section.help) == set(section.parsers), section.name
        for name, parser in section.parsers.items():
            assert section.help[name].strip(), f"[{section.name}] {name}"
            assert parser in VALUE_TYPES, f"[{section.name}] {name}: {parser.__name__} has no type name"
    assert all(parser in VALUE_TYPES for parser in TOP_LEVEL_PARSERS.values())


def test_every_settings_flag_is_in_the_table_and_sets_its_key(tmp_path):
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = {option for action in serve._actions for option in action.option_strings if option.startswith("--")}
    assert flags - {"--help", "--data-dir", "--config", "--no-auto-create-topic"} == set(FLAGS.values())
    values = {"--log-level": "DEBUG", "--flush-mode": "SYNC_FLUSH", "--segment-size": "64MiB", "--mqtt-port": "1999",
              "--grpc-port": "1998", "--http-port": "1997", "--remoting-port": "1996",
              "--namesrv-port": "1995", "--broker-name": "b", "--cluster-name": "c",
              "--namesrv-addr": "ns:9876", "--broker-id": "1", "--role": "SLAVE"}  # fmt: skip
    args = ["config", "--data-dir", str(tmp_path)]
    for flag, value in values.items():
        args += [flag, value]
    settings = settings_from_args(parser.parse_args([*args, "--no-auto-create-topic"]))
    for key, flag in FLAGS.items():
        if flag == "--etcd":  # a slave's settings above; under a controller the role is etcd's (tests/mqgate/...)
            continue
        shown = "--no-auto-create-topic" if flag == "--auto-create-topic" else flag
        assert settings.origins[key] == shown, key
    assert (settings.mqtt.port, settings.grpc.port, settings.http.port) == (1999, 1998, 1997)
    assert (settings.remoting.port, settings.namesrv.port) == (1996, 1995)
    assert (settings.broker.broker_name, settings.broker.cluster_name, settings.broker.namesrv_addr) == (
        "b",
        "c",
        ("ns:9876",),
    )
    assert settings.broker.auto_create_topic is False and settings.store.segment_size == 64 * 1024 * 1024


@pytest.mark.parametrize("extra", [["--config", "x.toml"], ["--mqtt-port", "1"], ["--data-dir", "/srv"]])
def test_reference_takes_no_settings(extra: list[str]):
    result = mqgate("config", "--reference", *extra)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"--reference prints the defaults of every key; drop {extra[0]} (or --reference)" in result.stderr
