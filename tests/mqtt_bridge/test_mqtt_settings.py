"""The [mqtt] keys of the MQTT 5 limits as `mqgate` reads them from a configuration file."""

from __future__ import annotations

import pytest

from mqgate.config.settings import ConfigError, load_settings
from mqtt_bridge.config import MqttConfig


def load(tmp_path, text: str) -> MqttConfig:
    config = tmp_path / "mqgate.toml"
    config.write_text(text)
    return load_settings(tmp_path, config).mqtt


def test_server_topic_alias_maximum_defaults_to_64_and_takes_0_to_65535(tmp_path):
    assert MqttConfig().server_topic_alias_maximum == 64
    assert load(tmp_path, "[mqtt]\nserver_topic_alias_maximum = 0\n").server_topic_alias_maximum == 0
    assert load(tmp_path, "[mqtt]\nserver_topic_alias_maximum = 65535\n").server_topic_alias_maximum == 65535


@pytest.mark.parametrize("value", ["65536", "-1", "true", '"10"'])
def test_server_topic_alias_maximum_out_of_range_is_refused_with_the_key(tmp_path, value):
    with pytest.raises(ConfigError, match=r"mqgate.toml:2.*server_topic_alias_maximum.*0 to 65535"):
        load(tmp_path, f"[mqtt]\nserver_topic_alias_maximum = {value}\n")


def test_max_keepalive_defaults_to_no_maximum_and_takes_0_to_65535(tmp_path):
    assert MqttConfig().max_keepalive == 0
    assert load(tmp_path, "[mqtt]\nmax_keepalive = 60\n").max_keepalive == 60
    assert load(tmp_path, "[mqtt]\nmax_keepalive = 0\n").max_keepalive == 0
    with pytest.raises(ConfigError, match=r"mqgate.toml:2.*max_keepalive.*0 to 65535"):
        load(tmp_path, "[mqtt]\nmax_keepalive = 65536\n")


def test_receive_maximum_takes_1_to_65535(tmp_path):
    # Announced in CONNACK as a two-byte integer, and 0 is a protocol error there (MQTT 5 3.2.2.3.3).
    assert load(tmp_path, "[mqtt]\nreceive_maximum = 65535\n").receive_maximum == 65535
    for value in ("0", "65536"):
        with pytest.raises(ConfigError, match=r"receive_maximum.*1 to 65535"):
            load(tmp_path, f"[mqtt]\nreceive_maximum = {value}\n")


def test_topic_alias_maximum_0_turns_inbound_aliases_off(tmp_path):
    assert load(tmp_path, "[mqtt]\ntopic_alias_maximum = 0\n").topic_alias_maximum == 0
    with pytest.raises(ConfigError, match=r"topic_alias_maximum.*0 to 65535"):
        load(tmp_path, "[mqtt]\ntopic_alias_maximum = 70000\n")


def test_sys_interval_defaults_to_mosquittos_10_and_0_turns_sys_off(tmp_path):
    assert MqttConfig().sys_interval == 10
    assert load(tmp_path, "[mqtt]\nsys_interval = 0\n").sys_interval == 0
    assert load(tmp_path, "[mqtt]\nsys_interval = 60\n").sys_interval == 60
    for value in ("-1", "65536", "1.5"):
        with pytest.raises(ConfigError, match=r"mqgate.toml:2.*sys_interval.*0 to 65535"):
            load(tmp_path, f"[mqtt]\nsys_interval = {value}\n")
