"""The event's structured JSON form (eventbridge/event_form.py): `event_as_json` gives what the SDK's JSON format
writes, read back, for any CloudEvent 1.0 (checked against that round trip as the reference), without writing it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import OPTIONAL_ATTRIBUTES, REQUIRED_ATTRIBUTES, CloudEvent
from hypothesis import given
from hypothesis import strategies as st

from eventbridge.event_form import event_as_json

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
CONTENT_TYPES = st.sampled_from(
    [None, "application/json", "text/json; charset=utf-8", "application/vnd.x+json", "text/plain", "image/png"]
)
TIMES = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30)), timezone(timedelta(hours=14))]),
)
EXTENSION_NAMES = st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True).filter(
    lambda name: name not in REQUIRED_ATTRIBUTES and name not in OPTIONAL_ATTRIBUTES and name != "data"
)
EXTENSION_VALUES = st.text() | st.booleans() | st.integers(-(2**31), 2**31 - 1)


@st.composite
def cloud_events(draw: st.DrawFn) -> CloudEvent:
    attributes: dict[str, Any] = {"id": draw(st.text(min_size=1)), "source": "s", "type": "t", "specversion": "1.0"}
    if draw(st.booleans()):
        attributes["time"] = draw(TIMES)
    content_type = draw(CONTENT_TYPES)
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    if draw(st.booleans()):
        attributes["subject"] = draw(st.text(min_size=1))
    attributes.update(draw(st.dictionaries(EXTENSION_NAMES, EXTENSION_VALUES, max_size=3)))
    data = draw(st.none() | JSON_VALUES | st.binary())
    return CloudEvent(attributes, data)


def as_text(value: Any) -> str:
    # Tells apart what == does not (True, 1 and 1.0) and sees the order of keys, which the stored bytes keep.
    return json.dumps(value, allow_nan=True)


@given(cloud_events())
def test_the_form_is_what_the_sdk_writes_read_back(event: CloudEvent) -> None:
    reference = json.loads(JSONFormat().write(event))
    assert as_text(event_as_json(event)) == as_text(reference)


def test_time_in_utc_ends_in_z_and_other_offsets_stay() -> None:
    attributes = {"id": "e", "source": "s", "type": "t", "specversion": "1.0"}
    utc = CloudEvent({**attributes, "time": datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)}, None)
    east = CloudEvent({**attributes, "time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))}, None)
    assert event_as_json(utc)["time"] == "2026-01-02T03:04:05.120000Z"
    assert event_as_json(east)["time"] == "2026-01-02T03:04:05+02:00"
    assert "data" not in event_as_json(utc) and "data_base64" not in event_as_json(utc)
