"""Reading a configuration file: TOML (`mqgate.toml`) or YAML (`.yaml`/`.yml`, `yaml.safe_load`) into a mapping, with
a way back to the line that set a key, so that every error names `file:line`; and ConfigError, the one error of
mqgate's configuration."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from mqgate.config.values import describe_value


class ConfigError(Exception):
    """A configuration file or flag is wrong. The message names where, which key, and what is allowed."""


@dataclass(slots=True, frozen=True)
class ConfigFile:
    """A parsed configuration file, and a way back to the line of a key for error messages."""

    path: Path
    data: Mapping[str, object]
    locate: Callable[[Sequence[str]], int | None]

    def where(self, *keys: str) -> str:
        line = self.locate(keys)
        return f"{self.path}:{line}" if line is not None else str(self.path)


def read_config_file(path: Path) -> ConfigFile:
    suffix = path.suffix.lower()
    if suffix not in {".toml", ".yaml", ".yml"}:
        raise ConfigError(f"{path}: unknown configuration format {suffix or '(no suffix)'!r}; use .toml, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found; check --config") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration file: {exc}") from None
    if suffix == ".toml":
        return _read_toml(path, text)
    return _read_yaml(path, text)


def _read_toml(path: Path, text: str) -> ConfigFile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message already carries "(at line N, column M)".
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return ConfigFile(path, data, lambda keys: _toml_line(text, keys))


_TOML_TABLE = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def _toml_line(text: str, keys: Sequence[str]) -> int | None:
    """The line that sets keys[-1] inside table keys[:-1]. tomllib keeps no positions, so this reads the text;
    it finds the usual `[table]` / `key = value` forms and gives up (None) on anything more exotic."""
    *tables, name = keys
    table = ".".join(tables)
    assignment = re.compile(rf"\s*[\"']?{re.escape(name)}[\"']?\s*=")
    dotted = re.compile(rf"\s*{re.escape(table)}\.{re.escape(name)}\s*=") if table else None
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TOML_TABLE.match(line)
        if header is not None:
            current = header.group(1).replace(" ", "")
            continue
        if current == table and assignment.match(line):
            return number
        if current == "" and dotted is not None and dotted.match(line):
            return number
    if not tables:
        return None
    for number, line in enumerate(text.splitlines(), start=1):  # inline tables: store = { key = ... }
        if re.search(rf"[{{,]\s*{re.escape(name)}\s*=", line):
            return number
    return None


def _read_yaml(path: Path, text: str) -> ConfigFile:
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        found = describe_value(data)
        raise ConfigError(f"{path}: the file must hold a mapping of keys (log_level, store), not {found}")
    return ConfigFile(path, data, lambda keys: _yaml_line(root, keys))


def _yaml_line(node: yaml.Node | None, keys: Sequence[str]) -> int | None:
    line = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return line
        for key_node, value_node in node.value:
            if key_node.value == key:
                line = key_node.start_mark.line + 1
                node = value_node
                break
        else:
            return line
    return line
