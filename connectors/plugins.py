"""Connector plugins: the classes installed distributions declare in the entry-point group `mqgate.connectors`.

A distribution adds a connector with one line in its pyproject.toml,

    [project.entry-points."mqgate.connectors"]
    acme-sink = "acme_connectors.sink:AcmeSinkConnector"

and `pip install` makes it available to `mqgate serve` at its next start (entry points are read once, when the
registry is built). A config names its plugin in `connector.class` by the entry-point name (`acme-sink`), the
class path (`acme_connectors.sink:AcmeSinkConnector` or `acme_connectors.sink.AcmeSinkConnector`, Kafka Connect's
spelling) or the bare class name when only one plugin has it (`AcmeSinkConnector`).

A plugin that cannot be imported, or is not a `connectors.api.Connector`, is logged and left out; the others stay
usable, so one broken distribution does not stop the runtime. `failures` keeps why, for error messages.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from connectors.api import COMMON_CONFIG, ConfigDef, Connector

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mqgate.connectors"
CONNECTOR_KINDS = ("source", "sink")


@dataclass(slots=True, frozen=True)
class PluginInfo:
    """What `GET /connector-plugins` shows of a plugin."""

    name: str  # the entry-point name, e.g. "file-sink"
    class_path: str  # "module.Class", as Kafka Connect names a plugin
    type: str  # "source" or "sink"
    version: str


class PluginNotFound(KeyError):
    """No plugin by that name; the message names the plugins there are."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0])


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def check_plugin(cls: object) -> type[Connector]:
    """`cls` as a connector class, or ValueError saying what it lacks."""
    if not isinstance(cls, type) or not issubclass(cls, Connector):
        raise ValueError(f"{cls!r} is not a subclass of connectors.api.Connector")
    kind = getattr(cls, "kind", None)
    if kind not in CONNECTOR_KINDS:
        raise ValueError(f"{class_path(cls)}.kind is {kind!r}; expected 'source' or 'sink'")
    if not isinstance(getattr(cls, "config_def", None), ConfigDef):
        raise ValueError(f"{class_path(cls)}.config_def is not a connectors.api.ConfigDef")
    try:
        COMMON_CONFIG.merged(cls.config_def)
    except ValueError as exc:
        raise ValueError(f"{class_path(cls)}.config_def: {exc}; the common keys need not be declared") from None
    if getattr(cls, "__abstractmethods__", None):
        raise ValueError(f"{class_path(cls)} does not implement {', '.join(sorted(cls.__abstractmethods__))}")
    return cls


class PluginRegistry:
    """The connector classes by entry-point name."""

    def __init__(self, plugins: Mapping[str, type[Connector]], failures: Mapping[str, str] | None = None) -> None:
        self._plugins = {name: check_plugin(cls) for name, cls in plugins.items()}
        self.failures = dict(failures or {})  # entry-point name -> why it was left out

    @classmethod
    def load(cls, group: str = ENTRY_POINT_GROUP) -> PluginRegistry:
        """Every plugin the installed distributions declare in `group`."""
        return cls.from_entry_points(importlib.metadata.entry_points(group=group))

    @classmethod
    def from_entry_points(cls, entry_points: Iterable[importlib.metadata.EntryPoint]) -> PluginRegistry:
        plugins: dict[str, type[Connector]] = {}
        failures: dict[str, str] = {}
        for entry_point in entry_points:
            name = entry_point.name
            if name in plugins or name in failures:
                # importlib.metadata lists a distribution once per sys.path entry holding it; the first one is
                # what `import` would find too.
                if entry_point.value != _value_of(plugins.get(name)):
                    log.warning("connector plugin %r: %s ignored, %r came first", name, entry_point.value, name)
                continue
            try:
                plugins[name] = check_plugin(entry_point.load())
            except Exception as exc:  # any import error of third-party code; the other plugins stay usable
                failures[name] = f"{entry_point.value}: {type(exc).__name__}: {exc}"
                log.warning("connector plugin %r left out: cannot load %s", name, failures[name])
        return cls(plugins, failures)

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def get(self, name: str) -> type[Connector]:
        """The plugin named by its entry-point name, class path or unique class name; KeyError naming the plugins
        there are."""
        wanted = name.strip()
        found = self._plugins.get(wanted)
        if found is not None:
            return found
        dotted = wanted.replace(":", ".")
        matches = [cls for cls in self._plugins.values() if class_path(cls) == dotted or cls.__qualname__ == dotted]
        if len({id(cls) for cls in matches}) == 1:
            return matches[0]
        if matches:
            paths = ", ".join(sorted({class_path(cls) for cls in matches}))
            raise PluginNotFound(f"connector plugin {name!r} is ambiguous: {paths}; give the class path")
        raise PluginNotFound(self._not_found(name))

    def _not_found(self, name: str) -> str:
        known = ", ".join(self.names()) or "none"
        message = f"no connector plugin {name!r}; installed: {known}"
        if name in self.failures:
            message += f" ({name!r} failed to load: {self.failures[name]})"
        return message

    def name_of(self, cls: type[Connector]) -> str:
        """The entry-point name of a plugin class."""
        return next(name for name, plugin in self._plugins.items() if plugin is cls)

    def infos(self) -> list[PluginInfo]:
        return [
            PluginInfo(name, class_path(plugin), plugin.kind, str(plugin.version))
            for name, plugin in sorted(self._plugins.items())
        ]


def _value_of(cls: type | None) -> str | None:
    return None if cls is None else f"{cls.__module__}:{cls.__qualname__}"
