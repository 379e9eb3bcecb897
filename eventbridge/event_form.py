"""The form an event takes inside EventBridge, and the JSON text by which rules compare JSON values.

An event is a dict in the CloudEvents JSON event format 1.0 (the structured form): attributes and extensions at
the top level, `time` as RFC 3339 text, `data` as a JSON value, or `data_base64` for bytes. Everything past
ingress sees this form: the event center's schemas, the router's matcher, JSONPath, transforms and templates,
headers, the targets. It is built once per event, at ingress (`event_as_json`, from the CloudEvent the SDK
validated); a bus stores it as JSON (bus.encode_event) and whoever reads it back from the store decodes it once
(bus.decode_event).

`canonical_json` is how a rule's JSON values (patterns, schemas, a CONSTANT transform's value) are compared: as
text, which tells apart what Python equality does not.
"""

from __future__ import annotations

import json
from typing import Any

from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.formats.json import JSONFormat


def event_as_json(event: BaseCloudEvent) -> dict[str, Any]:
    """The structured JSON form of a CloudEvent (the CloudEvents JSON format), which every transform and JSONPath
    sees: attributes and extensions at the top level, `data` as JSON, or `data_base64` for bytes."""
    parsed: dict[str, Any] = json.loads(JSONFormat().write(event))
    return parsed


def canonical_json(value: Any) -> str:
    """JSON text that tells apart what Python equality does not (`true` and `1`, `1` and `1.0`)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
