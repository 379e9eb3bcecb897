"""The event center: a JSON Schema per event source and type that events must satisfy to enter a bus.

A rule file declares them next to its rules:

    schemas:
      - source: mqgate/mqtt/*         # an event source, exactly, or a prefix ending in '*'
        type: mqgate.mqtt.message     # the event type, exactly
        schema:                       # JSON Schema (draft 2020-12) of the event's `data`
          type: object
          required: [temp]
          properties: {temp: {type: number}}

The schema describes `data`, as rocketmq-eventbridge's event center does, since that is what producers write;
an event whose data is bytes (`data_base64`) is checked as a string. Events of a (source, type) that no schema
names pass unchecked; if several schemas name it, all of them must hold. Schemas are checked when their file is
loaded (an invalid schema refuses the file at its position) and compiled once (jsonschema validators).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from eventbridge.rules.model import EventSchema

# An error names at most this many violations (the first ones by position in the data).
MAX_REPORTED_ERRORS = 3


def check_schema(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a valid JSON Schema, or None."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        return f"not a valid JSON Schema{' at ' + where if where else ''}: {exc.message}"
    return None


@dataclass(slots=True)
class _Entry:
    declared: EventSchema
    validator: Draft202012Validator


@dataclass(slots=True)
class SchemaRegistry:
    _exact: dict[tuple[str, str], list[_Entry]] = field(default_factory=dict)
    _prefixed: list[tuple[str, str, _Entry]] = field(default_factory=list)

    @classmethod
    def of(cls, schemas: Iterable[EventSchema]) -> SchemaRegistry:
        registry = cls()
        for declared in schemas:
            entry = _Entry(declared, Draft202012Validator(declared.schema))
            if declared.source.endswith("*"):
                registry._prefixed.append((declared.source[:-1], declared.type, entry))
            else:
                registry._exact.setdefault((declared.source, declared.type), []).append(entry)
        return registry

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._exact.values()) + len(self._prefixed)

    def violation(self, event: Mapping[str, Any]) -> str | None:
        """Why the event breaks a schema that applies to it, or None when it satisfies them all."""
        source, event_type = str(event.get("source", "")), str(event.get("type", ""))
        entries = list(self._exact.get((source, event_type), ()))
        entries += [entry for prefix, kind, entry in self._prefixed if kind == event_type and source.startswith(prefix)]
        if not entries:
            return None
        data = event["data"] if "data" in event else event.get("data_base64")
        for entry in entries:
            errors = sorted(entry.validator.iter_errors(data), key=lambda error: list(error.absolute_path))
            if errors:
                shown = "; ".join(_describe(error) for error in errors[:MAX_REPORTED_ERRORS])
                more = f" (and {len(errors) - MAX_REPORTED_ERRORS} more)" if len(errors) > MAX_REPORTED_ERRORS else ""
                where = f" ({entry.declared.position})" if entry.declared.position else ""
                return f"data does not match the schema for source {entry.declared.source!r} type {event_type!r}" \
                    f"{where}: {shown}{more}"  # fmt: skip
        return None


def _describe(error: Any) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return f"data{path}: {error.message}"
