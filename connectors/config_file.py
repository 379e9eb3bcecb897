"""Connector config files (`DATA_DIR/connectors/*.json|*.yaml|*.yml`, and the files `mqgate connect create` sends):
how one is read, and what is said when it cannot be.

A file holds one connector: a flat object of config keys (`name` defaulting to the file's stem), or the REST API's
shape `{"name": ..., "config": {...}}`. A YAML or JSON error names the file, line and column, and shows the line
with a caret under the place, as the parsers do themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from connectors.errors import ConnectorError

CONFIG_FILE_SUFFIXES = (".json", ".yaml", ".yml")


class ConfigFileError(ConnectorError, ValueError):
    """A connector config file that cannot be read or parsed; the message names the file (and line and column)."""


def parse_config_document(path: Path, text: str) -> Any:
    """The parsed document of a config file's `text`: JSON for .json, else YAML."""
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            lines = text.splitlines()
            line = lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else ""
            raise ConfigFileError(
                f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}\n{_caret(line, exc.colno)}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        if mark is None:
            raise ConfigFileError(f"{path}: invalid YAML: {problem}") from None
        lines = text.splitlines()
        line = lines[mark.line] if mark.line < len(lines) else ""
        raise ConfigFileError(
            f"{path}:{mark.line + 1}:{mark.column + 1}: invalid YAML: {problem}\n{_caret(line, mark.column + 1)}"
        ) from None
    except yaml.YAMLError as exc:  # no position (e.g. a character YAML does not allow)
        raise ConfigFileError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None


def _caret(line: str, column: int) -> str:
    """The line, indented, with a caret under `column` (1-based)."""
    return f"    {line}\n    {' ' * (column - 1)}^"


def render_value(value: Any) -> str:
    """A parsed config value as the string a config holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if value is None:
        return ""
    return str(value)


def read_config_file(path: Path) -> dict[str, str]:
    """A connector config file: one flat object of strings (numbers and booleans are turned into strings).
    Raises ConfigFileError (or OSError when the file cannot be read)."""
    data = parse_config_document(path, path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path}: expected an object of config keys")
    if isinstance(data.get("config"), dict):  # the REST API's {"name": ..., "config": {...}} shape
        data = {"name": data.get("name", path.stem), **data["config"]}
    config = {str(key): render_value(value) for key, value in data.items()}
    config.setdefault("name", path.stem)
    return config
