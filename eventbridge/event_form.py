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

import base64
import json
from datetime import datetime
from typing import Any

from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.formats.json import JSONFormat


def event_as_json(event: BaseCloudEvent) -> dict[str, Any]:
    """The structured JSON form of a CloudEvent 1.0 (the CloudEvents JSON format), which every transform and JSONPath
    sees: attributes and extensions at the top level, `data` as JSON, or `data_base64` for bytes.

    What the SDK's JSON format writes, read back (`json.loads(JSONFormat().write(event))`), built without writing
    it: an event's attributes and data are already JSON values but for `time`, a datetime, and bytes data. The
    data's objects are the event's own, not copies.
    """
    form = {
        name: _rfc3339(value) if isinstance(value, datetime) else value
        for name, value in event.get_attributes().items()
    }
    data = event.get_data()
    if data is None:
        return form
    if isinstance(data, bytes | bytearray):
        form["data_base64"] = base64.b64encode(data).decode("ascii")
    elif _JSON_DATA.match(form.get("datacontenttype", JSONFormat.DEFAULT_CONTENT_TYPE)):
        form["data"] = data
    else:
        form["data"] = str(data)
    return form


_JSON_DATA = JSONFormat.JSON_CONTENT_TYPE_PATTERN


def _rfc3339(moment: datetime) -> str:
    # The SDK's JSON writer: isoformat, with UTC as 'Z'.
    text = moment.isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def canonical_json(value: Any) -> str:
    """JSON text that tells apart what Python equality does not (`true` and `1`, `1` and `1.0`)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
