"""Rules, event sources and archives created through the HTTP API, kept as rule files of their own in the rules
directory.

An operator's files and the API's live side by side, so the directory stays the one truth that a reload reads:

    api-rule@<bus>@<rule>.yaml      one rule (rules: [...]), written by PUT /rules/{bus}/{name}
    api-source@<source>.yaml        one event source (sources: [...]), written by PUT /sources/{name}
    api-archive@<archive>.yaml      one archive (archives: [...]), written by PUT /archives/{name}

'@' cannot occur in bus, rule, source or archive names, so no two definitions share a file. The API changes only the
definitions it wrote: a rule from an operator's file is refused with the file's name (edit the file instead).
A definition is checked by the same parser as any rule file before its file is written, and the file is
written under a hidden temporary name and renamed, so a reload never reads half of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from eventbridge.errors import EventBridgeError, RuleFileError
from eventbridge.patterns.compiler import compile_pattern
from eventbridge.rules.rule_file import RuleDocument, parse_rule_document

RULE_FILE_PREFIX = "api-rule@"
SOURCE_FILE_PREFIX = "api-source@"
ARCHIVE_FILE_PREFIX = "api-archive@"


class DefinitionError(EventBridgeError, ValueError):
    """A definition sent to the API that is not valid (HTTP 400), with the reason."""


def rule_file_path(directory: Path, bus: str, name: str) -> Path:
    return directory / f"{RULE_FILE_PREFIX}{bus}@{name}.yaml"


def source_file_path(directory: Path, name: str) -> Path:
    return directory / f"{SOURCE_FILE_PREFIX}{name}.yaml"


def archive_file_path(directory: Path, name: str) -> Path:
    return directory / f"{ARCHIVE_FILE_PREFIX}{name}.yaml"


def is_api_file(path: str | Path) -> bool:
    return Path(path).name.startswith((RULE_FILE_PREFIX, SOURCE_FILE_PREFIX, ARCHIVE_FILE_PREFIX))


def read_definition(path: Path, kind: str) -> dict[str, Any]:
    """The one rule, source or archive an API file holds, as the dict it was written from."""
    document = yaml.safe_load(path.read_text())
    found: dict[str, Any] = document[kind][0]
    return found


def check_definition(kind: str, definition: Mapping[str, Any]) -> RuleDocument:
    """Parse a definition as its file would be parsed; DefinitionError with the parser's reason if it is bad."""
    text = _render(kind, definition)
    try:
        return parse_rule_document("request", text, compile_pattern=compile_pattern)
    except RuleFileError as exc:
        raise DefinitionError(exc.reason) from None


def write_definition(path: Path, kind: str, definition: Mapping[str, Any]) -> None:
    check_definition(kind, definition)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(_render(kind, definition))
    with open(temporary, "rb+") as file:
        os.fsync(file.fileno())
    temporary.rename(path)


def _render(kind: str, definition: Mapping[str, Any]) -> str:
    header = "# Written by the mqgate HTTP API; change it through the API (PUT, DELETE).\n"
    return header + yaml.safe_dump({kind: [dict(definition)]}, sort_keys=False, allow_unicode=True)
