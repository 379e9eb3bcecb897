"""The event center: JSON Schemas per source and type, declared in rule files, checked on the way into a bus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eventbridge.errors import RuleFileError
from eventbridge.event_schema import SchemaRegistry
from eventbridge.rules.directory import load_rule_directory
from eventbridge.rules.rule_file import parse_rule_document

SCHEMAS = """
schemas:
  - source: mqgate/mqtt/*
    type: reading
    schema:
      type: object
      required: [temp]
      properties:
        temp: {type: number, minimum: -50}
        room: {type: string}
  - source: billing
    type: invoice
    schema: {type: object, required: [amount]}
  - source: billing
    type: invoice
    schema: {type: object, properties: {amount: {type: integer}}}
"""


def registry(text: str = SCHEMAS) -> SchemaRegistry:
    return SchemaRegistry.of(parse_rule_document("s.yaml", text).schemas)


def event(source: str, kind: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    found = {"specversion": "1.0", "id": "1", "source": source, "type": kind, **extra}
    if data is not None:
        found["data"] = data
    return found


def test_events_of_a_source_prefix_and_type_must_match() -> None:
    schemas = registry()
    assert len(schemas) == 3
    assert schemas.violation(event("mqgate/mqtt/dev1", "reading", {"temp": 3})) is None
    why = schemas.violation(event("mqgate/mqtt/dev1", "reading", {"temp": "warm", "room": 7}))
    assert why is not None
    assert "data.room: 7 is not of type 'string'" in why and "data.temp: 'warm' is not of type 'number'" in why
    assert "s.yaml:3:5" in why
    assert "'temp' is a required property" in (schemas.violation(event("mqgate/mqtt/x", "reading", {})) or "")


def test_events_no_schema_names_pass() -> None:
    schemas = registry()
    assert schemas.violation(event("mqgate/mqtt/dev1", "other", {"temp": "warm"})) is None
    assert schemas.violation(event("mqgate/http", "reading", {"temp": "warm"})) is None
    assert schemas.violation(event("billingx", "invoice", {})) is None  # exact source: no prefix match


def test_every_schema_that_applies_must_hold() -> None:
    schemas = registry()
    assert schemas.violation(event("billing", "invoice", {"amount": 3})) is None
    assert "required" in (schemas.violation(event("billing", "invoice", {"total": 3})) or "")
    assert "integer" in (schemas.violation(event("billing", "invoice", {"amount": 2.5})) or "")


def test_binary_data_is_checked_as_its_base64_string() -> None:
    schemas = registry("schemas:\n  - {source: cam, type: frame, schema: {type: string, maxLength: 8}}\n")
    assert schemas.violation(event("cam", "frame", data_base64="AAAA")) is None
    assert schemas.violation(event("cam", "frame", data_base64="A" * 12)) is not None


@pytest.mark.parametrize(
    ("text", "line", "column", "reason"),
    [
        ("schemas:\n  - {source: a, type: b, schema: {type: 12}}\n", 2, 34, "not a valid JSON Schema"),
        ("schemas:\n  - {source: a, type: b, schema: [1]}\n", 2, 34, "schema must be a mapping"),
        ("schemas:\n  - {source: 'a*b', type: b, schema: {}}\n", 2, 14, "'*' may only end a prefix"),
        ("schemas:\n  - {source: a, schema: {}}\n", 2, 5, "'type' is missing"),
        ("schemas: []\n", 1, 10, "schemas is empty"),
    ],
)
def test_a_bad_schema_refuses_its_file_at_its_position(text: str, line: int, column: int, reason: str) -> None:
    with pytest.raises(RuleFileError) as caught:
        parse_rule_document("s.yaml", text)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert reason in str(caught.value)


def test_a_refused_file_keeps_its_schemas_in_force(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCHEMAS)
    first = load_rule_directory(tmp_path)
    assert len(first.rules.schemas) == 3
    (tmp_path / "s.yaml").write_text(SCHEMAS + "  - {source: x, type: y, schema: {type: 12}}\n")
    second = load_rule_directory(tmp_path, first.rules)
    assert second.errors
    assert second.rules.schemas == first.rules.schemas
