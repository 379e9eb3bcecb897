"""EventBridge ingress: CloudEvents from a PutEvents request, per entry, in binary, structured and batch mode."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from cloudevents.core.bindings.http import to_binary, to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventbridge.event_form import event_as_json
from eventbridge.ingress import (
    BATCH_CONTENT_TYPE,
    MAX_BATCH_ENTRIES,
    MAX_BODY_BYTES,
    MAX_EVENT_BYTES,
    STRUCTURED_CONTENT_TYPE,
    Entry,
    EntryError,
    IngressError,
    parse_events,
    put_events_response,
)

REQUIRED = {"id": "e-1", "source": "mqgate/gw1", "type": "sensor.reading", "specversion": "1.0"}
BINARY_HEADERS = {"ce-id": "e-1", "ce-source": "mqgate/gw1", "ce-type": "sensor.reading", "ce-specversion": "1.0"}
STRUCTURED = {"Content-Type": STRUCTURED_CONTENT_TYPE}
BATCH = {"Content-Type": BATCH_CONTENT_TYPE}


def only_event(entries: list[Entry]) -> CloudEvent:
    assert len(entries) == 1
    event = entries[0]
    assert isinstance(event, CloudEvent), event
    return event


def only_error(entries: list[Entry]) -> EntryError:
    assert len(entries) == 1
    error = entries[0]
    assert isinstance(error, EntryError), error
    return error


def structured(event: dict[str, Any]) -> list[Entry]:
    return parse_events(STRUCTURED, json.dumps(event).encode())


def structured_error(**attributes: Any) -> EntryError:
    return only_error(structured({**REQUIRED, **attributes}))


# --- binary mode -------------------------------------------------------------------------------------------------


def test_binary_json_data_with_all_attributes() -> None:
    headers = {
        **BINARY_HEADERS,
        "ce-subject": "plant/a/temp",
        "ce-time": "2026-01-02T03:04:05.25%2B02:00",  # percent-encoded '+', as the binding writes it
        "ce-dataschema": "https://example.com/reading.json",
        "ce-line": "3",
        "Content-Type": "application/json",
    }
    event = only_event(parse_events(headers, b'{"temp": 21.5, "tags": ["a", "b"]}'))
    assert event.get_attributes() == {
        **REQUIRED,
        "subject": "plant/a/temp",
        "time": datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=timezone(timedelta(hours=2))),
        "dataschema": "https://example.com/reading.json",
        "line": "3",
        "datacontenttype": "application/json",
    }
    assert event.get_data() == {"temp": 21.5, "tags": ["a", "b"]}


def test_binary_text_data() -> None:
    event = only_event(
        parse_events({**BINARY_HEADERS, "content-type": "text/plain; charset=utf-8"}, "21,5 °C".encode())
    )
    assert event.get_data() == "21,5 °C"
    assert event.get_datacontenttype() == "text/plain; charset=utf-8"


def test_binary_bytes_stay_bytes_even_when_they_are_utf8() -> None:
    event = only_event(parse_events({**BINARY_HEADERS, "content-type": "application/octet-stream"}, b"abc"))
    assert event.get_data() == b"abc"
    assert event_as_json(event)["data_base64"] == "YWJj"


def test_binary_non_utf8_text_stays_bytes() -> None:
    event = only_event(parse_events({**BINARY_HEADERS, "content-type": "text/plain"}, b"\xff\xfe"))
    assert event.get_data() == b"\xff\xfe"


def test_binary_without_content_type_or_body() -> None:
    event = only_event(parse_events(BINARY_HEADERS, b""))
    assert event.get_data() is None
    assert event.get_datacontenttype() is None
    assert only_event(parse_events(BINARY_HEADERS, b"\x00\x01")).get_data() == b"\x00\x01"


def test_header_names_are_case_insensitive() -> None:
    headers = {"CE-ID": "e-1", "Ce-Source": "mqgate/gw1", "ce-TYPE": "sensor.reading", "cE-SpecVersion": "1.0"}
    event = only_event(parse_events({**headers, "CONTENT-TYPE": "application/json"}, b"[1]"))
    assert event.get_attributes() == {**REQUIRED, "datacontenttype": "application/json"}
    assert event.get_data() == [1]
    structured_upper = parse_events({"CONTENT-TYPE": "Application/CloudEvents+JSON"}, json.dumps(REQUIRED).encode())
    assert only_event(structured_upper).get_id() == "e-1"


def test_missing_time_is_left_for_the_caller() -> None:
    event = only_event(parse_events(BINARY_HEADERS, b""))
    assert event.get_time() is None
    assert "time" not in event_as_json(event)
    assert only_event(structured(REQUIRED)).get_time() is None


def test_binary_bad_json_data_is_refused() -> None:
    error = only_error(parse_events({**BINARY_HEADERS, "content-type": "application/json"}, b"{'a': 1}"))
    assert error.code == "MalformedEvent"
    assert error.message == (
        "entry 0: data is not valid JSON (Expecting property name enclosed in double quotes at line 1 column 2) "
        "but Content-Type 'application/json' says it is; send JSON, or the data's real Content-Type"
    )


def test_binary_nan_is_not_json() -> None:
    error = only_error(parse_events({**BINARY_HEADERS, "content-type": "application/json"}, b"NaN"))
    assert error.code == "MalformedEvent"
    assert "NaN is not a JSON value" in error.message


def test_binary_datacontenttype_header_refused() -> None:
    error = only_error(parse_events({**BINARY_HEADERS, "ce-datacontenttype": "text/plain"}, b"x"))
    assert error.code == "InvalidAttribute"
    assert error.message == (
        "entry 0: attribute 'datacontenttype': in binary mode it is the Content-Type header; drop ce-datacontenttype"
    )


def test_binary_reserved_and_badly_named_extensions() -> None:
    error = only_error(parse_events({**BINARY_HEADERS, "ce-data": "x", "ce-my_ext": "y"}, b""))
    assert error.code == "InvalidAttribute"
    assert error.message == (
        "entry 0: attribute 'data': is reserved for the event's data; in binary mode the body is the data; "
        "attribute 'my_ext': is not a valid extension name; use lowercase letters a-z and digits 0-9 only, "
        "e.g. 'myext'"
    )


def test_binary_missing_attributes_all_reported() -> None:
    error = only_error(parse_events({"ce-type": "t", "ce-source": ""}, b""))
    assert error.code == "InvalidAttribute"
    assert error.message == (
        "entry 0: attribute 'id': is missing; give each event an id unique within its source; "
        "attribute 'specversion': is missing; use 1.0; attribute 'source': must not be empty"
    )


def test_binary_bad_time() -> None:
    error = only_error(parse_events({**BINARY_HEADERS, "ce-time": "2026-01-02"}, b""))
    assert error.code == "InvalidAttribute"
    assert error.message == (
        "entry 0: attribute 'time': '2026-01-02' is not an RFC 3339 timestamp; use RFC 3339 with an offset, e.g. "
        "2026-01-02T03:04:05Z, or leave it out to have the gateway stamp it"
    )


# --- structured mode ---------------------------------------------------------------------------------------------


def test_structured_json_data_and_extensions() -> None:
    event = only_event(
        structured(
            {
                **REQUIRED,
                "time": "2026-01-02T03:04:05Z",
                "datacontenttype": "application/vnd.reading+json",
                "line": 3,
                "ok": True,
                "site": "hall",
                "data": {"temp": 21.5},
            }
        )
    )
    assert event.get_attributes() == {
        **REQUIRED,
        "time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "datacontenttype": "application/vnd.reading+json",
        "line": 3,
        "ok": True,
        "site": "hall",
    }
    assert event.get_data() == {"temp": 21.5}


def test_structured_text_data() -> None:
    event = only_event(structured({**REQUIRED, "datacontenttype": "text/csv", "data": "a,b\n1,2\n"}))
    assert event.get_data() == "a,b\n1,2\n"


def test_structured_data_base64() -> None:
    payload = bytes(range(256))
    event = only_event(structured({**REQUIRED, "data_base64": base64.b64encode(payload).decode()}))
    assert event.get_data() == payload
    assert "data_base64" not in event.get_attributes()


def test_structured_null_attribute_is_absent() -> None:
    event = only_event(structured({**REQUIRED, "subject": None, "data": None}))
    assert event.get_attributes() == REQUIRED
    assert event.get_data() is None


def test_structured_charset_parameter_accepted() -> None:
    event = only_event(
        parse_events({"content-type": f"{STRUCTURED_CONTENT_TYPE}; charset=UTF-8"}, json.dumps(REQUIRED).encode())
    )
    assert event.get_id() == "e-1"


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"specversion": "0.9"}, "attribute 'specversion': '0.9' is not supported; use 1.0"),
        ({"specversion": "0.3"}, "attribute 'specversion': '0.3' is not supported; use 1.0"),
        ({"type": 5}, "attribute 'type': must be a string, not a JSON number"),
        ({"subject": ""}, "attribute 'subject': must not be empty"),
        ({"Region": "eu"}, "attribute 'Region': is not a valid extension name; use lowercase letters a-z and digits "
         "0-9 only, e.g. 'region'"),
        ({"tags": ["a"]}, "attribute 'tags': a JSON array is not a CloudEvents attribute value; use a string, "
         "integer or boolean"),
        ({"ratio": 0.5}, "attribute 'ratio': a JSON number is not a CloudEvents attribute value; use a string, "
         "integer or boolean"),
        ({"big": 2**31}, "attribute 'big': 2147483648 is outside the CloudEvents integer range (32-bit signed); "
         "send it as a string"),
        ({"Bad_Name": 1.5}, "attribute 'Bad_Name': is not a valid extension name; use lowercase letters a-z and "
         "digits 0-9 only, e.g. 'badname'; its value: a JSON number is not a CloudEvents attribute value; use a "
         "string, integer or boolean"),
        ({"time": "2026-01-02T03:04:05"}, "attribute 'time': '2026-01-02T03:04:05' is not an RFC 3339 timestamp; "
         "use RFC 3339 with an offset, e.g. 2026-01-02T03:04:05Z, or leave it out to have the gateway stamp it"),
        ({"time": "2026-W01-1T00:00:00Z"}, "attribute 'time': '2026-W01-1T00:00:00Z' is not an RFC 3339 "
         "timestamp; use RFC 3339 with an offset, e.g. 2026-01-02T03:04:05Z, or leave it out to have the gateway "
         "stamp it"),
        ({"time": "2026-13-02T03:04:05Z"}, "attribute 'time': '2026-13-02T03:04:05Z' is month must be in 1..12; "
         "use RFC 3339 with an offset, e.g. 2026-01-02T03:04:05Z, or leave it out to have the gateway stamp it"),
        ({"time": 1767322045}, "attribute 'time': 1767322045 is not an RFC 3339 timestamp; use RFC 3339 with an "
         "offset, e.g. 2026-01-02T03:04:05Z, or leave it out to have the gateway stamp it"),
    ],
)  # fmt: skip
def test_structured_invalid_attribute(attributes: dict[str, Any], message: str) -> None:
    error = structured_error(**attributes)
    assert error.code == "InvalidAttribute"
    assert error.message == f"entry 0: {message}"


def test_structured_missing_required_attributes() -> None:
    error = only_error(structured({"specversion": "1.0"}))
    assert error.code == "InvalidAttribute"
    assert error.message == (
        "entry 0: attribute 'id': is missing; give each event an id unique within its source; "
        "attribute 'source': is missing; every event needs id, source, type and specversion; "
        "attribute 'type': is missing; every event needs id, source, type and specversion"
    )


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"data": "x", "data_base64": "eA=="}, "has both 'data' and 'data_base64'; send text or JSON as data, bytes "
         "as data_base64, not both"),
        ({"data_base64": "not base64!"}, "'data_base64' is not base64; send the bytes as a "
         "base64 string (RFC 4648 standard alphabet, padded)"),
        ({"data_base64": 12}, "'data_base64' is a JSON number; send the bytes as a "
         "base64 string (RFC 4648 standard alphabet, padded)"),
        ({"datacontenttype": "text/plain", "data": {"a": 1}}, "'data' is a JSON object but datacontenttype "
         "'text/plain' is not JSON; send text as a string, bytes as data_base64, or set datacontenttype to "
         "application/json"),
    ],
)  # fmt: skip
def test_structured_malformed_data(attributes: dict[str, Any], message: str) -> None:
    error = structured_error(**attributes)
    assert error.code == "MalformedEvent"
    assert error.message == f"entry 0: {message}"


def test_structured_body_not_json_or_not_an_object() -> None:
    error = only_error(parse_events(STRUCTURED, b'{"id": '))
    assert (error.code, error.message) == (
        "MalformedEvent",
        "entry 0: body is not JSON (Expecting value at line 1 column 8); send one event as a JSON object",
    )
    error = only_error(parse_events(STRUCTURED, b"\xff"))
    assert error.message == "entry 0: body is not JSON (not UTF-8 at byte 0); send one event as a JSON object"
    error = only_error(parse_events(STRUCTURED, b"[]"))
    assert error.message == "entry 0: is a JSON array, not an object; send each event as an object of its attributes"


def test_structured_event_too_large() -> None:
    event = {**REQUIRED, "data": "x" * MAX_EVENT_BYTES}
    body = json.dumps(event).encode()
    error = only_error(parse_events(STRUCTURED, body))
    assert error.code == "EventTooLarge"
    assert error.message == (
        f"entry 0: event of {len(body)} bytes is over the 262144-byte limit; store large payloads elsewhere and "
        "send a reference"
    )
    fits = {**REQUIRED, "data": "x" * (MAX_EVENT_BYTES - len(json.dumps(REQUIRED)) - 20)}
    assert len(json.dumps(fits)) <= MAX_EVENT_BYTES
    assert only_event(structured(fits)).get_data() == fits["data"]


def test_binary_event_too_large_counts_headers() -> None:
    headers = {**BINARY_HEADERS, "content-type": "text/plain"}
    header_bytes = sum(len(name) + len(value) for name, value in headers.items())
    fits = b"x" * (MAX_EVENT_BYTES - header_bytes)
    assert only_event(parse_events(headers, fits)).get_data() == fits.decode()
    error = only_error(parse_events(headers, fits + b"x"))
    assert error.code == "EventTooLarge"
    assert error.message.startswith(f"entry 0: event of {MAX_EVENT_BYTES + 1} bytes is over")


# --- batch mode --------------------------------------------------------------------------------------------------


def test_batch_good_and_bad_entries_keep_their_slots() -> None:
    batch = [
        {**REQUIRED, "id": "a", "data": {"n": 1}},
        {**REQUIRED, "id": "b", "specversion": "0.9"},
        "not an event",
        {**REQUIRED, "id": "c", "data_base64": "AAE="},
        {**REQUIRED, "id": "d", "data": "x" * MAX_EVENT_BYTES},
    ]
    entries = parse_events(BATCH, json.dumps(batch).encode())
    assert len(entries) == 5
    first, second, third, fourth, fifth = entries
    assert isinstance(first, CloudEvent) and first.get_id() == "a" and first.get_data() == {"n": 1}
    assert second == EntryError("InvalidAttribute", "entry 1: attribute 'specversion': '0.9' is not supported; use 1.0")
    assert third == EntryError(
        "MalformedEvent", "entry 2: is a JSON string, not an object; send each event as an object of its attributes"
    )
    assert isinstance(fourth, CloudEvent) and fourth.get_id() == "c" and fourth.get_data() == b"\x00\x01"
    assert isinstance(fifth, EntryError) and fifth.code == "EventTooLarge"
    assert fifth.message.startswith("entry 4: event of ")


def test_empty_batch_is_empty() -> None:
    assert parse_events(BATCH, b"[]") == []


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b"{}", "MalformedRequest", "batch is a JSON object, not an array; send a JSON array of events, or one "
         "event as application/cloudevents+json"),
        (b"[", "MalformedRequest", "batch is not JSON (Expecting value at line 1 column 2); send a JSON array of "
         "events"),
        (b"[Infinity]", "MalformedRequest", "batch is not JSON (Infinity is not a JSON value); send a JSON array "
         "of events"),
        (b"\xc3", "MalformedRequest", "batch is not JSON (not UTF-8 at byte 0); send a JSON array of events"),
        (b"[" * 100_000, "MalformedRequest", "batch is not JSON (nested too deeply); send a JSON array of events"),
        (json.dumps([REQUIRED] * (MAX_BATCH_ENTRIES + 1)).encode(), "TooManyEntries",
         f"batch of {MAX_BATCH_ENTRIES + 1} events is over the limit of {MAX_BATCH_ENTRIES}; split it"),
    ],
)  # fmt: skip
def test_batch_refused_as_a_whole(body: bytes, code: str, message: str) -> None:
    with pytest.raises(IngressError) as caught:
        parse_events(BATCH, body)
    assert (caught.value.code, str(caught.value), caught.value.status) == (code, message, 400)


def test_full_batch_accepted() -> None:
    batch = [{**REQUIRED, "id": str(n)} for n in range(MAX_BATCH_ENTRIES)]
    entries = parse_events(BATCH, json.dumps(batch).encode())
    assert [entry.get_id() for entry in entries if isinstance(entry, CloudEvent)] == [str(n) for n in range(100)]


# --- the request as a whole --------------------------------------------------------------------------------------


def test_body_too_large() -> None:
    with pytest.raises(IngressError) as caught:
        parse_events(BATCH, b" " * (MAX_BODY_BYTES + 1))
    assert (caught.value.code, caught.value.status) == ("RequestTooLarge", 413)
    assert str(caught.value) == "request body of 1048577 bytes is over the 1048576-byte limit; split the batch"


def test_unsupported_content_types() -> None:
    with pytest.raises(IngressError) as caught:
        parse_events({"Content-Type": "application/cloudevents+avro"}, b"")
    assert caught.value.code == "UnsupportedContentType"
    assert str(caught.value) == (
        "Content-Type 'application/cloudevents+avro': only the JSON event format is supported; send "
        "application/cloudevents+json, application/cloudevents-batch+json or binary mode"
    )
    with pytest.raises(IngressError) as caught:
        parse_events({"Content-Type": "application/json"}, json.dumps(REQUIRED).encode())
    assert caught.value.code == "UnsupportedContentType"
    assert str(caught.value).startswith("Content-Type 'application/json' is not a CloudEvents format and there are")


def test_structured_content_type_wins_over_ce_headers() -> None:
    # The binding: a structured Content-Type means structured mode; ce-* headers are then ignored.
    event = only_event(
        parse_events({**STRUCTURED, **BINARY_HEADERS, "ce-id": "ignored"}, json.dumps(REQUIRED).encode())
    )
    assert event.get_id() == "e-1"


# --- the response ------------------------------------------------------------------------------------------------


def test_put_events_response_in_request_order() -> None:
    results: list[str | EntryError] = ["a", EntryError("InvalidAttribute", "entry 1: x"), "c", EntryError("E", "m")]
    assert put_events_response(results) == {
        "FailedEntryCount": 2,
        "Entries": [
            {"EventId": "a"},
            {"ErrorCode": "InvalidAttribute", "ErrorMessage": "entry 1: x"},
            {"EventId": "c"},
            {"ErrorCode": "E", "ErrorMessage": "m"},
        ],
    }
    assert put_events_response([]) == {"FailedEntryCount": 0, "Entries": []}


def test_response_of_a_parsed_batch_is_json() -> None:
    entries = parse_events(BATCH, json.dumps([REQUIRED, {}]).encode())
    results = [entry.get_id() if isinstance(entry, CloudEvent) else entry for entry in entries]
    decoded = json.loads(json.dumps(put_events_response(results)))
    assert decoded["FailedEntryCount"] == 1
    assert decoded["Entries"][0] == {"EventId": "e-1"}
    assert decoded["Entries"][1]["ErrorCode"] == "InvalidAttribute"


# --- properties --------------------------------------------------------------------------------------------------

_RESERVED = {"id", "source", "type", "specversion", "datacontenttype", "dataschema", "subject", "time", "data"}
_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20)
_extension_names = st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True).filter(lambda name: name not in _RESERVED)
_times = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))]),
)
_json_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text
_json = st.recursive(
    _json_leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12
)
# (datacontenttype, data): the SDK writes a top-level JSON value only when it is an object.
_data = st.one_of(
    st.tuples(st.just("application/json"), st.dictionaries(_text, _json, max_size=4)),
    st.tuples(st.just("text/plain"), _text),
    st.tuples(st.just("application/octet-stream"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.none(), st.none()),
)


@st.composite
def valid_events(draw: st.DrawFn, extension_values: st.SearchStrategy[Any]) -> CloudEvent:
    attributes: dict[str, Any] = {"id": draw(_text), "source": draw(_text), "type": draw(_text), "specversion": "1.0"}
    for name in ("subject", "dataschema"):
        if draw(st.booleans()):
            attributes[name] = draw(_text)
    time = draw(st.none() | _times)
    if time is not None:
        attributes["time"] = time
    attributes.update(draw(st.dictionaries(_extension_names, extension_values, max_size=3)))
    content_type, data = draw(_data)
    if content_type is not None:
        attributes["datacontenttype"] = content_type
    event = CloudEvent(attributes, data)
    if time is None:
        del event.get_attributes()["time"]  # as a client that sends none
    return event


def assert_same(parsed: Entry, original: CloudEvent) -> None:
    assert isinstance(parsed, CloudEvent), parsed
    assert parsed.get_attributes() == original.get_attributes()
    assert parsed.get_data() == original.get_data()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(valid_events(st.text(st.characters(exclude_categories=("Cs",)), max_size=10)))
def test_binary_round_trip(event: CloudEvent) -> None:
    message = to_binary(event, JSONFormat())
    assert_same(only_event(parse_events(message.headers, message.body)), event)


_extension_values = st.booleans() | st.integers(-(2**31), 2**31 - 1) | _text


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(valid_events(_extension_values))
def test_structured_round_trip(event: CloudEvent) -> None:
    message = to_structured(event, JSONFormat())
    assert_same(only_event(parse_events(message.headers, message.body)), event)


@settings(max_examples=75, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(valid_events(_extension_values), max_size=5))
def test_batch_round_trip(events: list[CloudEvent]) -> None:
    body = b"[" + b",".join(JSONFormat().write(event) for event in events) + b"]"
    entries = parse_events(BATCH, body)
    assert len(entries) == len(events)
    for parsed, original in zip(entries, events, strict=True):
        assert_same(parsed, original)


_content_types = st.sampled_from(
    [STRUCTURED_CONTENT_TYPE, BATCH_CONTENT_TYPE, "application/json", "text/plain", "application/octet-stream", ""]
)
_attribute_names = st.sampled_from(sorted(_RESERVED | {"data_base64", "Ext", "ext", ""}))
_event_like = st.dictionaries(_attribute_names, _json, max_size=8)
_bodies = st.one_of(
    st.binary(max_size=200),
    _json.map(lambda value: json.dumps(value).encode()),
    _event_like.map(lambda value: json.dumps(value).encode()),
    st.lists(_event_like, max_size=4).map(lambda value: json.dumps(value).encode()),
)
_headers = st.dictionaries(
    st.sampled_from(["ce-id", "CE-Source", "ce-type", "ce-specversion", "ce-time", "ce-data", "ce-x_y", "ce-"]),
    st.text(max_size=12),
    max_size=5,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_headers, _content_types, _bodies)
def test_any_request_gives_entries_or_ingress_error(headers: dict[str, str], content_type: str, body: bytes) -> None:
    try:
        entries = parse_events({**headers, "Content-Type": content_type}, body)
    except IngressError as error:
        assert error.code in {"UnsupportedContentType", "MalformedRequest", "TooManyEntries", "RequestTooLarge"}
        return
    assert entries or content_type == BATCH_CONTENT_TYPE
    for index, entry in enumerate(entries):
        if isinstance(entry, EntryError):
            assert entry.code in {"MalformedEvent", "InvalidAttribute", "EventTooLarge"}
            assert entry.message.startswith(f"entry {index}: ")
        else:
            assert isinstance(entry, CloudEvent)
            json.dumps(event_as_json(entry))  # what the rest of the gateway does with it must work


def test_a_lone_surrogate_escape_is_refused_naming_where_it_is() -> None:
    # Python's json takes "\ud800" and makes a string no UTF-8 can hold: the event could never be stored.
    body = b'{"specversion":"1.0","id":"s1","source":"s","type":"t","data":{"x":["ok","\\ud800"]}}'
    error = only_error(parse_events(STRUCTURED, body))
    assert error.code == "MalformedEvent" and "$.data.x[1]: a lone UTF-16 surrogate escape" in error.message
    data = only_error(parse_events({**BINARY_HEADERS, "content-type": "application/json"}, b'{"\\udc00": 1}'))
    assert data.code == "MalformedEvent" and "$ (a name): a lone UTF-16 surrogate escape" in data.message
    # A pair is a character; in a batch, only the element that holds a lone one is refused.
    pair = b'{"specversion":"1.0","id":"s2","source":"s","type":"t","data":"\\ud83d\\ude00"}'
    assert only_event(parse_events(STRUCTURED, pair)).get_data() == "\U0001f600"
    entries = parse_events(BATCH, b"[" + body + b"," + pair + b"]")
    assert isinstance(entries[0], EntryError) and not isinstance(entries[1], EntryError)
