"""Reading one structured event (eventbridge/ingress_event.py) from the object the request layer parsed: the
attributes and data the event is built from are those the SDK's JSON format reads from the object's text (the
reference), so the text need not be parsed a second time."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from cloudevents.core.formats.json import JSONFormat
from hypothesis import given
from hypothesis import strategies as st

from eventbridge.ingress_event import structured_attributes_and_data

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-3)), timezone(timedelta(hours=5, minutes=45))]),
).map(lambda moment: moment.isoformat().replace("+00:00", "Z"))


@st.composite
def elements(draw: st.DrawFn) -> dict[str, Any]:
    element: dict[str, Any] = {"specversion": "1.0", "id": draw(st.text()), "source": "s", "type": "t"}
    element.update(draw(st.dictionaries(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), JSON_VALUES, max_size=3)))
    if draw(st.booleans()):
        element["time"] = draw(TIMES)
    kind = draw(st.sampled_from(["none", "data", "null data", "data_base64", "null data and data_base64"]))
    if kind == "data":
        element["data"] = draw(JSON_VALUES)
    if kind.startswith("null data"):
        element["data"] = None
    if kind.endswith("data_base64"):
        element["data_base64"] = base64.b64encode(draw(st.binary())).decode()
    keys = draw(st.permutations(list(element)))  # the order of members is kept: the stored form keeps it too
    return {key: element[key] for key in keys}


def as_text(value: Any) -> str:
    # Tells apart what == does not (True, 1 and 1.0) and sees the order of keys.
    return json.dumps(value, default=repr)


@given(elements())
def test_attributes_and_data_are_what_the_sdk_reads_from_the_text(element: dict[str, Any]) -> None:
    text = json.dumps(element, ensure_ascii=False)
    reference = JSONFormat().read(lambda attributes, data: (attributes, data), text)
    attributes, data = structured_attributes_and_data(element)
    assert as_text(attributes) == as_text(reference[0])
    assert as_text(data) == as_text(reference[1])
    assert type(data) is type(reference[1])


def test_the_object_read_is_left_as_it_was() -> None:
    element = {"specversion": "1.0", "id": "e", "source": "s", "type": "t", "time": "2026-01-02T03:04:05Z", "data": 1}
    before = dict(element)
    structured_attributes_and_data(element)
    assert element == before
