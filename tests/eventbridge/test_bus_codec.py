"""The bus's event codec: what encode_event writes is UTF-8 JSON (RFC 8259: no NaN or Infinity) that decode_event
reads back equal, integers past 64 bits included; a body that is not such JSON is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventbridge.bus import BusError, decode_event, encode_event

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def surrogate_free(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def strict_json(body: bytes) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(body.decode("utf-8"), parse_constant=refuse)


@given(st.dictionaries(st.text(), JSON_VALUES).map(lambda extra: {**extra, "id": "e1"}).filter(surrogate_free))
def test_encode_is_utf8_json_that_decodes_back_equal(event: dict[str, Any]) -> None:
    body = encode_event(event)
    assert strict_json(body) == event  # any JSON reader gets the event back
    assert decode_event(body) == event
    assert encode_event(decode_event(body)) == body


def test_an_integer_past_64_bits_and_text_beyond_ascii_survive() -> None:
    event = {"id": "e1", "data": {"n": 2**70, "m": -(2**64), "text": "Grüße ☃"}}
    body = encode_event(event)
    assert "Grüße ☃".encode() in body  # UTF-8, not \\u escapes
    assert decode_event(body) == event


@pytest.mark.parametrize(
    "body",
    [b'{"id": "e1", "x": NaN}', b'{"id": "e1", "x": -Infinity}', b"[1]", b'{"x": 1}', b"\xff", b'{"id": 1}'],
)
def test_a_body_that_is_not_an_event_in_json_is_refused(body: bytes) -> None:
    with pytest.raises(BusError):
        decode_event(body)
