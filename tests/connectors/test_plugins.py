"""The plugin registry: entry points of installed distributions, a third-party wheel installed with pip, and
plugins that cannot be loaded."""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.metadata
import logging
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.plugins import ENTRY_POINT_GROUP, PluginInfo, PluginNotFound, PluginRegistry

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = {
    "file-source": "connectors.file_source:FileSourceConnector",
    "file-sink": "connectors.file_sink:FileSinkConnector",
    "http-sink": "connectors.http_sink:HttpSinkConnector",
    "spark-sink": "spark_sink.connector:SparkSinkConnector",
}

ACME_MODULE = """
from connectors.api import ConfigDef, ConfigKey, ConfigType, Connector, SinkTask


class AcmeTask(SinkTask):
    async def put(self, records):
        pass


class AcmeSinkConnector(Connector):
    kind = "sink"
    version = "0.3.1"
    config_def = ConfigDef().define(ConfigKey("acme.url", ConfigType.STRING, "where the records go"))

    def task(self):
        return AcmeTask()
"""


TASK_METHOD = "    def task(self):\n        return AcmeTask()\n"


def build_wheel(directory: Path, distribution: str, version: str, files: dict[str, str], entry_points: str) -> Path:
    """A pure-Python wheel, written by hand as the wheel format (PEP 427) lays it out."""
    dist_info = f"{distribution}-{version}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: mqgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/entry_points.txt": textwrap.dedent(entry_points),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{distribution}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def pip_install(wheel: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=120,
    )
    monkeypatch.syspath_prepend(str(target))
    importlib.invalidate_caches()


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The distribution acme-connectors, pip-installed into a directory on sys.path."""
    wheel = build_wheel(
        tmp_path,
        "acme_connectors",
        "0.3.1",
        {"acme_connectors/__init__.py": "", "acme_connectors/sink.py": ACME_MODULE},
        """
        [mqgate.connectors]
        acme-sink = acme_connectors.sink:AcmeSinkConnector
        """,
    )
    target = tmp_path / "site"
    pip_install(wheel, target, monkeypatch)
    yield target
    for name in [name for name in sys.modules if name.startswith("acme_connectors")]:
        del sys.modules[name]


def test_the_built_in_plugins_are_declared_as_entry_points():
    declared = {point.name: point.value for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {name: declared.get(name) for name in BUILT_IN} == BUILT_IN
    registry = PluginRegistry.load()
    assert registry.failures == {}
    assert set(BUILT_IN) <= set(registry.names())
    kinds = {info.name: info.type for info in registry.infos()}
    assert {name: kinds[name] for name in BUILT_IN} == {
        "file-source": "source",
        "file-sink": "sink",
        "http-sink": "sink",
        "spark-sink": "sink",
    }


def test_a_plugin_installed_with_pip_is_found(acme: Path):
    registry = PluginRegistry.load()
    assert "acme-sink" in registry.names()
    plugin = registry.get("acme-sink")
    assert plugin.__module__ == "acme_connectors.sink"
    assert plugin.config_def.keys["acme.url"].doc == "where the records go"
    assert PluginInfo("acme-sink", "acme_connectors.sink.AcmeSinkConnector", "sink", "0.3.1") in registry.infos()
    # Kafka Connect's spellings of a connector.class: the class path, with a dot or a colon, or the class name.
    for spelling in ("acme_connectors.sink.AcmeSinkConnector", "acme_connectors.sink:AcmeSinkConnector"):
        assert registry.get(spelling) is plugin
    assert registry.get("AcmeSinkConnector") is plugin
    assert registry.name_of(plugin) == "acme-sink"


def test_a_broken_plugin_is_left_out_and_the_others_stay(tmp_path: Path, monkeypatch, caplog):
    wheel = build_wheel(
        tmp_path,
        "broken_connectors",
        "1.0",
        {
            "broken_connectors/__init__.py": "",
            "broken_connectors/bad_import.py": "import no_such_module_anywhere\n",
            "broken_connectors/not_a_connector.py": "class Thing:\n    pass\n",
            "broken_connectors/abstract.py": ACME_MODULE.replace(
                "    def task(self):\n        return AcmeTask()\n", ""
            ),
        },
        """
        [mqgate.connectors]
        bad-import = broken_connectors.bad_import:Connector
        not-a-connector = broken_connectors.not_a_connector:Thing
        abstract = broken_connectors.abstract:AcmeSinkConnector
        a-task = broken_connectors.abstract:AcmeTask
        """,
    )
    pip_install(wheel, tmp_path / "site", monkeypatch)
    with caplog.at_level(logging.WARNING, logger="connectors.plugins"):
        registry = PluginRegistry.load()
    assert set(registry.failures) >= {"bad-import", "not-a-connector", "abstract", "a-task"}
    assert "ModuleNotFoundError" in registry.failures["bad-import"]
    assert "not a subclass of connectors.api.Connector" in registry.failures["not-a-connector"]
    assert "does not implement task" in registry.failures["abstract"]
    assert "connector plugin 'bad-import' left out" in caplog.text
    for name in ("bad-import", "not-a-connector", "abstract", "a-task"):
        assert name not in registry.names()
    with pytest.raises(PluginNotFound) as raised:
        registry.get("bad-import")
    assert "'bad-import' failed to load: broken_connectors.bad_import:Connector: ModuleNotFoundError" in str(
        raised.value
    )


def test_an_unknown_plugin_names_the_installed_ones(acme: Path):
    registry = PluginRegistry.load()
    with pytest.raises(KeyError) as raised:
        registry.get("kafka-sink")
    message = str(raised.value)
    assert message.startswith("no connector plugin 'kafka-sink'; installed: ")
    assert "acme-sink" in message


def test_the_same_class_under_two_names_is_one_plugin_by_class_name(acme: Path):
    entry_points = [
        importlib.metadata.EntryPoint("acme-sink", "acme_connectors.sink:AcmeSinkConnector", ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("acme-alias", "acme_connectors.sink:AcmeSinkConnector", ENTRY_POINT_GROUP),
    ]
    registry = PluginRegistry.from_entry_points(entry_points)
    assert registry.names() == ["acme-alias", "acme-sink"]
    assert registry.get("AcmeSinkConnector") is registry.get("acme-alias")
