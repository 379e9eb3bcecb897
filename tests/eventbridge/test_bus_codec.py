"""The bus's event codec: what encode_event writes is compact UTF-8 JSON that decode_event reads back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eventbridge.bus import decode_event, encode_event

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def surrogate_free(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


@given(st.dictionaries(st.text(), JSON_VALUES).map(lambda extra: {**extra, "id": "e1"}).filter(surrogate_free))
def test_encode_is_compact_utf8_json_and_decodes_back(event: dict[str, Any]) -> None:
    body = encode_event(event)
    assert body == json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert decode_event(body) == event
    assert encode_event(decode_event(body)) == body
