"""ConfigDef: parsing and validating a connector's flat string config."""

from __future__ import annotations

import pytest

from connectors.api import COMMON_CONFIG, ConfigDef, ConfigError, ConfigKey, ConfigType, at_least, partition_key


def test_common_config_fills_defaults_and_types():
    values, errors = COMMON_CONFIG.parse({"name": "n", "connector.class": "file-sink", "tasks.max": " 3 "})
    assert errors == []
    assert values["tasks.max"] == 3
    assert values["errors.tolerance"] == "none"
    assert values["errors.retry.timeout"] == 0


def test_each_bad_key_is_named_with_its_reason():
    _, errors = COMMON_CONFIG.parse({"connector.class": "x", "tasks.max": "0", "errors.tolerance": "some"})
    by_key = {error.key: error.message for error in errors}
    assert by_key["name"] == "missing required configuration"
    assert by_key["tasks.max"] == "invalid value '0': must be at least 1"
    assert by_key["errors.tolerance"] == "invalid value 'some': must be one of none, all"


def test_types():
    definition = (
        ConfigDef()
        .define(ConfigKey("b", ConfigType.BOOLEAN, "", False))
        .define(ConfigKey("l", ConfigType.LIST, "", []))
        .define(ConfigKey("d", ConfigType.DOUBLE, "", 1.0, validator=at_least(0)))
    )
    values, errors = definition.parse({"b": "TRUE", "l": "a, b,,c", "d": "2.5"})
    assert (values, errors) == ({"b": True, "l": ["a", "b", "c"], "d": 2.5}, [])
    _, errors = definition.parse({"b": "yes", "d": "-1"})
    assert errors == [
        ConfigError("b", "invalid value 'yes': expected true or false"),
        ConfigError("d", "invalid value '-1': must be at least 0"),
    ]


def test_a_key_defined_twice_is_refused():
    definition = ConfigDef().define(ConfigKey("x", ConfigType.STRING, ""))
    with pytest.raises(ValueError, match="'x' is defined twice"):
        definition.merged(ConfigDef().define(ConfigKey("x", ConfigType.INT, "")))


def test_partition_key_is_canonical():
    assert partition_key({"b": 1, "a": "f"}) == partition_key({"a": "f", "b": 1}) == '{"a":"f","b":1}'
