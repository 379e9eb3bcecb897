"""The spark-sink connector's config: keys, cross-key checks, the plugin entry point (no Spark needed)."""

from connectors.api import COMMON_CONFIG, ConfigError
from connectors.plugins import PluginRegistry
from connectors.validation import validate_config
from spark_sink.connector import SparkSinkConnector, task_values

PLUGINS = PluginRegistry.load()


def errors(**config: str) -> list[ConfigError]:
    return validate_config(PLUGINS, {"name": "lake", "connector.class": "spark-sink", "topics": "t", **config})


def test_registered_as_spark_sink() -> None:
    assert PLUGINS.get("spark-sink") is SparkSinkConnector
    assert SparkSinkConnector.kind == "sink"
    assert not set(SparkSinkConnector.config_def.keys) & set(COMMON_CONFIG.keys)


def test_defaults_and_a_good_config() -> None:
    assert errors(path="/srv/lake") == []
    values = task_values({"path": "/srv/lake"})
    assert values["spark.master"] == "local[2]"
    assert values["partition.columns"] == ["topic", "dt"]
    assert values["batch.size"] == 20_000
    assert values["json.schema"] == ""


def test_errors_name_the_key() -> None:
    assert [e.key for e in errors()] == ["path"]
    assert [(e.key, e.message) for e in errors(path="lake")] == [
        ("path", "invalid value 'lake': must be an absolute path (the table root, a local or shared POSIX file system)")
    ]
    assert [e.key for e in errors(path="/l", **{"batch.size": "0"})] == ["batch.size"]
    (bad_ddl,) = errors(path="/l", **{"json.schema": "temp DUBBLE"})
    assert bad_ddl.key == "json.schema" and "unknown or unsupported type 'DUBBLE'" in bad_ddl.message
    (clash,) = errors(path="/l", **{"json.schema": "body STRING"})
    assert clash.key == "json.schema" and "clashes" in clash.message
    (partition,) = errors(path="/l", **{"partition.columns": "device"})
    assert partition.key == "partition.columns" and "no column 'device'" in partition.message
    assert errors(path="/l", **{"json.schema": "device STRING", "partition.columns": "device,dt"}) == []


def test_task_values_from_strings_or_typed() -> None:
    raw = {"path": "/l", "partition.columns": "dt, topic", "batch.size": "7", "spark.executor.memory": "2g"}
    assert task_values(raw)["partition.columns"] == ["dt", "topic"]
    assert task_values(raw)["batch.size"] == 7
    assert task_values({**raw, "batch.size": 9, "partition.columns": ["topic"]})["partition.columns"] == ["topic"]
