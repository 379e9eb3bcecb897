"""Connector config validation: common and plugin keys, cross-key checks, names, and Kafka Connect's
validate-endpoint answer."""

from __future__ import annotations

from typing import Any

import pytest

from connectors import api
from connectors.api import ConfigDef, ConfigError, ConfigKey, ConfigType, Connector, SinkTask, at_least
from connectors.plugins import PluginRegistry
from connectors.validation import MAX_NAME_LENGTH, mask_secrets, validate_config, validation_response


class _Task(SinkTask):
    async def put(self, records: list[api.SinkRecord]) -> None:
        pass


class DemoSink(Connector):
    """A sink whose batch must not exceed its buffer (a check across keys)."""

    kind = "sink"
    config_def = (
        ConfigDef()
        .define(ConfigKey("topics", ConfigType.LIST, "topics to read", importance=api.Importance.HIGH))
        .define(ConfigKey("batch.size", ConfigType.INT, "records per batch", 100, validator=at_least(1)))
        .define(ConfigKey("buffer.size", ConfigType.INT, "records held at most", 1000, validator=at_least(1)))
        .define(ConfigKey("password", ConfigType.PASSWORD, "secret of the target", ""))
        .define(ConfigKey("compress", ConfigType.BOOLEAN, "gzip the output", False))
    )

    def validate(self, values: dict[str, Any]) -> list[ConfigError]:
        if values["batch.size"] > values["buffer.size"]:
            return [ConfigError("batch.size", f"must not exceed buffer.size ({values['buffer.size']})")]
        return []

    def task(self) -> SinkTask:
        return _Task()


class ExplodingSink(DemoSink):
    def validate(self, values: dict[str, Any]) -> list[ConfigError]:
        raise RuntimeError("bug in the plugin")


@pytest.fixture
def plugins() -> PluginRegistry:
    return PluginRegistry({"demo-sink": DemoSink, "exploding-sink": ExplodingSink})


def config(**extra: str) -> dict[str, str]:
    return {"name": "demo", "connector.class": "demo-sink", "topics": "orders", **extra}


def by_key(errors: list[ConfigError]) -> dict[str, str]:
    return {error.key: error.message for error in errors}


def test_a_good_config_has_no_errors(plugins):
    assert validate_config(plugins, config()) == []
    # By class path and class name too, and keys nobody declares are let through (Kafka Connect does).
    assert validate_config(plugins, config(**{"connector.class": "DemoSink", "x.extra": "1"})) == []
    assert validate_config(plugins, config(**{"connector.class": f"{__name__}.DemoSink"})) == []


def test_each_bad_key_is_named_with_its_reason(plugins):
    errors = validate_config(
        plugins, {"name": "demo", "connector.class": "demo-sink", "batch.size": "ten", "tasks.max": "0"}
    )
    assert by_key(errors) == {
        "tasks.max": "invalid value '0': must be at least 1",
        "topics": "missing required configuration",
        "batch.size": "invalid value 'ten': expected an integer",
    }


def test_cross_key_checks_run_once_every_key_parses(plugins):
    assert by_key(validate_config(plugins, config(**{"batch.size": "5000"}))) == {
        "batch.size": "must not exceed buffer.size (1000)"
    }
    # With a key that does not parse, the plugin's validate is not called with half a config.
    assert set(by_key(validate_config(plugins, config(**{"batch.size": "5000", "buffer.size": "x"})))) == {
        "buffer.size"
    }


def test_connector_class_missing_or_unknown(plugins):
    assert by_key(validate_config(plugins, {"name": "demo", "tasks.max": "0"})) == {
        "connector.class": "missing required configuration",
        "tasks.max": "invalid value '0': must be at least 1",
    }
    errors = by_key(validate_config(plugins, {"name": "demo", "connector.class": "kafka-sink"}))
    assert errors == {"connector.class": "no connector plugin 'kafka-sink'; installed: demo-sink, exploding-sink"}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "must not be empty"),
        ("a/b", "'/' is not allowed; use letters, digits, '_' or '-'"),
        ("caf\u00e9", "'\u00e9' is not allowed"),
        ("x" * (MAX_NAME_LENGTH + 1), f"{MAX_NAME_LENGTH + 1} characters; at most {MAX_NAME_LENGTH} are allowed"),
    ],
)
def test_connector_names(plugins, name, reason):
    errors = by_key(validate_config(plugins, config(name=name)))
    assert list(errors) == ["name"]
    assert reason in errors["name"]


def test_values_must_be_strings(plugins):
    bad: dict[str, Any] = {**config(), "tasks.max": 2, "topics": ["a"]}
    errors = by_key(validate_config(plugins, bad))
    assert errors["tasks.max"] == "expected a string value, got int"
    assert errors["topics"] == "expected a string value, got list"


def test_a_plugin_whose_validate_raises_is_reported_not_raised(plugins):
    errors = by_key(validate_config(plugins, config(**{"connector.class": "exploding-sink"})))
    assert errors == {"connector.class": "ExplodingSink.validate failed: RuntimeError('bug in the plugin')"}


def test_passwords_are_masked(plugins):
    shown = mask_secrets(plugins, config(password="s3cret"))
    assert shown == {**config(), "password": "[hidden]"}
    # An unknown plugin: nothing known to be secret; the config is shown as it is.
    assert mask_secrets(plugins, {"connector.class": "nope", "password": "p"}) == {
        "connector.class": "nope",
        "password": "p",
    }


def test_validation_response_has_kafka_connects_shape(plugins):
    answer = validation_response(DemoSink, config(**{"batch.size": "x", "password": "s3cret"}), "demo-sink")
    assert answer["name"] == f"{__name__}.DemoSink"
    assert answer["error_count"] == 1
    assert answer["groups"] == ["Common", "Error Handling", "demo-sink"]
    entries = {entry["value"]["name"]: entry for entry in answer["configs"]}
    assert set(entries) == set(api.COMMON_CONFIG.keys) | set(DemoSink.config_def.keys)
    batch = entries["batch.size"]
    assert batch["definition"] == {
        "name": "batch.size",
        "type": "INT",
        "required": False,
        "default_value": "100",
        "importance": "MEDIUM",
        "documentation": "records per batch",
        "group": "demo-sink",
        "width": "NONE",
        "display_name": "batch.size",
        "dependents": [],
        "order": 2,
    }
    assert batch["value"] == {
        "name": "batch.size",
        "value": "x",
        "recommended_values": [],
        "errors": ["invalid value 'x': expected an integer"],
        "visible": True,
    }
    assert entries["password"]["value"]["value"] == "[hidden]"
    assert entries["compress"]["value"]["value"] == "false"  # the default, as a config string
    assert entries["topics"]["definition"]["required"] is True
    assert entries["topics"]["definition"]["default_value"] is None
    assert entries["errors.tolerance"]["definition"]["group"] == "Error Handling"
    assert entries["connector.class"]["value"]["value"] == "demo-sink"


def test_validation_response_counts_cross_key_and_undeclared_errors(plugins):
    answer = validation_response(DemoSink, {**config(**{"batch.size": "5000"}), "x.extra": 5}, "demo-sink")  # type: ignore[dict-item]
    assert answer["error_count"] == 1  # x.extra's type error stops before validate
    entries = {entry["value"]["name"]: entry for entry in answer["configs"]}
    assert entries["x.extra"] == {
        "definition": None,
        "value": {
            "name": "x.extra",
            "value": None,
            "recommended_values": [],
            "errors": ["expected a string value, got int"],
            "visible": True,
        },
    }
    answer = validation_response(DemoSink, config(**{"batch.size": "5000"}), "demo-sink")
    assert answer["error_count"] == 1
    entries = {entry["value"]["name"]: entry for entry in answer["configs"]}
    assert entries["batch.size"]["value"]["errors"] == ["must not exceed buffer.size (1000)"]


def test_a_plugin_redeclaring_a_common_key_is_refused():
    class Redeclares(DemoSink):
        config_def = ConfigDef().define(ConfigKey("tasks.max", ConfigType.INT, "", 1))

    with pytest.raises(ValueError, match=r"'tasks\.max' is defined twice; the common keys need not be declared"):
        PluginRegistry({"bad": Redeclares})
