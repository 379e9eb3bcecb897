"""The extra HTTP headers an EventBridge target sends with one event: static, event-derived, and auth.

Pure: the HTTP target adds these to the CloudEvents headers it builds itself (ce-*, content-type), which a rule
file may not set (see rule_file). A derived header takes the value its JSONPath matches: a string as is, any other
JSON value as compact JSON; a path that matches nothing leaves the header out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from eventbridge.errors import TransformRenderError
from eventbridge.rules.model import ApiKeyAuth, BasicAuth, HttpTarget

# aiohttp's default max_field_size (8190) and nginx's large_client_header_buffers (8 KiB): a longer value would be
# refused by the receiver anyway.
MAX_HEADER_VALUE_CHARS = 8 * 1024


def target_headers(target: HttpTarget, event: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Headers in the order: static (file order), derived (file order), auth. Raises TransformRenderError when a
    derived value would break the header (line breaks, control characters, too long)."""
    headers = list(target.headers)
    for name, path in target.derived_headers:
        values = path.find(event)
        if not values:
            continue
        value = values[0] if len(values) == 1 else values
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
            raise TransformRenderError(f"header {name!r}: the value from {path.text!r} contains control characters")
        if len(text) > MAX_HEADER_VALUE_CHARS:
            raise TransformRenderError(
                f"header {name!r}: the value from {path.text!r} is longer than {MAX_HEADER_VALUE_CHARS} characters"
            )
        headers.append((name, text))
    if isinstance(target.auth, BasicAuth):
        token = base64.b64encode(f"{target.auth.username}:{target.auth.password}".encode()).decode("ascii")
        headers.append(("Authorization", f"Basic {token}"))
    elif isinstance(target.auth, ApiKeyAuth):
        headers.append((target.auth.header, target.auth.value))
    return headers
