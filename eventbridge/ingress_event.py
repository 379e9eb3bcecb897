"""One CloudEvent 1.0 read from its wire form (binary-mode headers and body, or one structured JSON object), checked.

The cloudevents SDK (`cloudevents.core`) parses and validates; this module only adds what a gateway taking events
from untrusted clients needs and the SDK does otherwise:

- The SDK fills in a missing `id` (a UUID) and `specversion` ("1.0"), and reads 0.3 events: here a missing `id` or
  `specversion` is refused and only 1.0 is accepted, since inventing an id hides a client bug and defeats
  deduplication by id.
- The SDK stamps a missing `time` with the clock; here it stays absent, so that parsing is pure and the caller
  stamps the time the event was accepted.
- `time` must be RFC 3339 (the SDK's ISO 8601 parser also takes week dates and compact forms).
- Extension values must be CloudEvents types (string, 32-bit integer, boolean); the SDK checks only their names.
- Binary-mode data: JSON must parse when Content-Type says JSON (the SDK silently keeps bad JSON as text), text/* is
  text, anything else stays bytes (the SDK turns any UTF-8 body into text, losing what the structured form writes
  as `data_base64`).
- Structured mode: `data` and `data_base64` are exclusive, `data_base64` must be strict base64, and with a non-JSON
  `datacontenttype` the `data` must be a string (the SDK would write a Python repr of an object). The object is
  parsed once, by the request layer, and read from there as the SDK's JSON format reads its text
  (`structured_attributes_and_data`): the SDK would parse the text a second time.

Every refusal is an `EventRefused` with an AWS PutEvents-style code and a message naming the attribute and what to
do; the request layer (`ingress.py`) prefixes it with the entry's position.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.exceptions import (
    BaseCloudEventException,
    CloudEventValidationError,
    CustomExtensionAttributeError,
    InvalidAttributeTypeError,
    MissingRequiredAttributeError,
)
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.spec import SPECVERSION_V1_0
from cloudevents.core.v1.event import OPTIONAL_ATTRIBUTES, REQUIRED_ATTRIBUTES, CloudEvent
from dateutil.parser import isoparse

from eventbridge.errors import EventBridgeError

# CloudEvents 1.0 "Integer" is a 32-bit signed integer; a larger number must travel as a string.
_INTEGER_MIN = -(2**31)
_INTEGER_MAX = 2**31 - 1

# RFC 3339 section 5.6 date-time (letters in either case, as its section 5.6 note allows). re.ASCII: `\d` would
# otherwise match any Unicode digit.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)

_CORE_ATTRIBUTES = frozenset(REQUIRED_ATTRIBUTES) | frozenset(OPTIONAL_ATTRIBUTES)
_CE_HEADER_PREFIX = "ce-"
_CONTENT_TYPE_HEADER = "content-type"
_TIME_EXAMPLE = "2026-01-02T03:04:05Z"


class EntryErrorCode(enum.StrEnum):
    """Why one entry of a PutEvents request was refused (AWS PutEvents reports per-entry ErrorCode likewise)."""

    MALFORMED_EVENT = "MalformedEvent"  # not readable as an event: not a JSON object, bad JSON data, bad base64
    INVALID_ATTRIBUTE = "InvalidAttribute"  # readable, but an attribute is missing or has a wrong value
    EVENT_TOO_LARGE = "EventTooLarge"


class EventRefused(EventBridgeError):
    """One event cannot be accepted; `detail` says which attribute and what to do, without the entry's position."""

    def __init__(self, code: EntryErrorCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def loads_strict(text: str, whole: bool = True) -> Any:
    """JSON as RFC 8259 defines it: Python's `json` also takes NaN and Infinity, which no other JSON reader does, and
    a lone UTF-16 surrogate escape (`"\\ud800"`), which is no character: it could not be stored (every event is
    stored as UTF-8) and is refused here, naming where it is, rather than failing the request later. With `whole`
    False (a batch, whose elements are measured as UTF-8 one by one and refused one by one), surrogates are left to
    the caller."""
    value = json.loads(text, parse_constant=_refuse_constant)
    if whole and ("\\ud" in text or "\\uD" in text):  # only an escape makes a surrogate: walk only then
        _refuse_lone_surrogates(value, "$")
    return value


def _refuse_lone_surrogates(value: Any, path: str) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{path}: a lone UTF-16 surrogate escape is not a character") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_lone_surrogates(key, f"{path} (a name)")
            _refuse_lone_surrogates(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_lone_surrogates(item, f"{path}[{index}]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def is_json_content_type(content_type: str) -> bool:
    """The SDK's own rule (application/json, text/json, any +json), so that reading and writing data agree."""
    return JSONFormat.JSON_CONTENT_TYPE_PATTERN.match(content_type) is not None


def json_type_name(value: Any) -> str:
    """A value's JSON type, for messages addressed to a client who sent JSON, not Python."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


# --- binary mode -------------------------------------------------------------------------------------------------


class _BinaryModeData(JSONFormat):
    """The SDK's JSON format with a stricter reading of a binary-mode body (see the module docstring)."""

    def read_data(self, body: bytes, datacontenttype: str | None) -> Any:
        if not body:
            return None
        if datacontenttype is not None and is_json_content_type(datacontenttype):
            try:
                return loads_strict(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise EventRefused(
                    EntryErrorCode.MALFORMED_EVENT,
                    f"data is not valid JSON ({json_error_text(exc)}) but Content-Type {datacontenttype!r} says "
                    "it is; send JSON, or the data's real Content-Type",
                ) from None
        if datacontenttype is not None and datacontenttype.strip().lower().startswith("text/"):
            try:
                return body.decode("utf-8")
            except UnicodeDecodeError:
                return body  # kept exactly; the structured form carries it as data_base64
        return body


_BINARY_MODE_DATA = _BinaryModeData()


def event_from_binary(headers: Mapping[str, str], body: bytes) -> CloudEvent:
    """The event of a binary-mode request: attributes from `ce-*` headers, Content-Type as `datacontenttype`, the
    body as data. `headers` have lowercase names."""
    if f"{_CE_HEADER_PREFIX}datacontenttype" in headers:
        raise EventRefused(
            EntryErrorCode.INVALID_ATTRIBUTE,
            "attribute 'datacontenttype': in binary mode it is the Content-Type header; drop ce-datacontenttype",
        )
    time_header = headers.get(f"{_CE_HEADER_PREFIX}time")
    if time_header is not None:
        _check_time(unquote(time_header))
    message = HTTPMessage(
        headers={
            name: value
            for name, value in headers.items()
            if name.startswith(_CE_HEADER_PREFIX) or name == _CONTENT_TYPE_HEADER
        },
        body=body,
    )
    try:
        event = from_binary(message, _BINARY_MODE_DATA, _new_event)
    except (ValueError, TypeError, OverflowError) as exc:  # a safety net: the checks above should leave none
        raise EventRefused(EntryErrorCode.MALFORMED_EVENT, f"cannot be read: {exc}") from None
    assert isinstance(event, CloudEvent)
    return event


# --- structured mode ---------------------------------------------------------------------------------------------


def event_from_structured(element: Any) -> CloudEvent:
    """The event of one structured-mode JSON object, parsed (the caller's one decode of it) and checked here."""
    if not isinstance(element, dict):
        raise EventRefused(
            EntryErrorCode.MALFORMED_EVENT,
            f"is a JSON {json_type_name(element)}, not an object; send each event as an object of its attributes",
        )
    # The JSON format treats a null attribute as absent; the SDK would refuse it as a wrong type.
    if any(value is None for name, value in element.items() if name != "data"):
        element = {name: value for name, value in element.items() if value is not None or name == "data"}
    _check_specversion_early(element)
    if "time" in element:
        _check_time(element["time"])
    _check_structured_data(element)
    try:
        return _new_event(*structured_attributes_and_data(element))
    except (ValueError, TypeError, OverflowError) as exc:  # a safety net: the checks above should leave none
        raise EventRefused(EntryErrorCode.MALFORMED_EVENT, f"cannot be read: {exc}") from None


def structured_attributes_and_data(element: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """What the SDK's JSON format (`JSONFormat.read`, cloudevents 2.2) gives its event factory for a 1.0 event,
    taken from the object already parsed: the SDK would parse its text again. `time` as a datetime; `data`, or the
    bytes of `data_base64` when `data` is absent or null."""
    attributes = dict(element)
    if "time" in attributes:
        attributes["time"] = isoparse(attributes["time"])
    data = attributes.pop("data", None)
    if data is None:
        encoded = attributes.pop("data_base64", None)
        if encoded is not None:
            data = base64.b64decode(encoded)
    return attributes, data


def _check_specversion_early(element: Mapping[str, Any]) -> None:
    # The SDK reads a 0.3 event's data by 0.3 rules before any validation; refuse other versions first.
    problem = _specversion_problem(element)
    if problem is not None:
        raise EventRefused(EntryErrorCode.INVALID_ATTRIBUTE, f"attribute 'specversion': {problem}")


def _check_structured_data(element: Mapping[str, Any]) -> None:
    has_data = element.get("data") is not None
    if has_data and "data_base64" in element:
        raise EventRefused(
            EntryErrorCode.MALFORMED_EVENT,
            "has both 'data' and 'data_base64'; send text or JSON as data, bytes as data_base64, not both",
        )
    if "data_base64" in element:
        encoded = element["data_base64"]
        if not isinstance(encoded, str):
            found = f"a JSON {json_type_name(encoded)}"
        elif _is_base64(encoded):
            found = None
        else:
            found = "not base64"
        if found is not None:
            raise EventRefused(
                EntryErrorCode.MALFORMED_EVENT,
                f"'data_base64' is {found}; send the bytes as a base64 string (RFC 4648 standard alphabet, padded)",
            )
    content_type = element.get("datacontenttype")
    data = element.get("data")
    textual = isinstance(content_type, str) and not is_json_content_type(content_type)
    if has_data and textual and not isinstance(data, str):
        raise EventRefused(
            EntryErrorCode.MALFORMED_EVENT,
            f"'data' is a JSON {json_type_name(data)} but datacontenttype {content_type!r} is not JSON; send "
            "text as a string, bytes as data_base64, or set datacontenttype to application/json",
        )


def _is_base64(text: str) -> bool:
    # Strict: the SDK's decoder skips any character outside the alphabet, which would corrupt data silently.
    try:
        base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return False
    return True


# --- attributes --------------------------------------------------------------------------------------------------


def _check_time(value: Any) -> None:
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        try:
            isoparse(value)  # what the SDK will call; catches a 13th month or a leap second it cannot hold
            return
        except (ValueError, OverflowError) as exc:
            reason = str(exc)
    else:
        reason = "not an RFC 3339 timestamp"
    raise EventRefused(
        EntryErrorCode.INVALID_ATTRIBUTE,
        f"attribute 'time': {value!r} is {reason}; use RFC 3339 with an offset, e.g. {_TIME_EXAMPLE}, or leave it "
        "out to have the gateway stamp it",
    )


def _specversion_problem(attributes: Mapping[str, Any]) -> str | None:
    if "specversion" not in attributes:
        return f"is missing; use {SPECVERSION_V1_0}"
    value = attributes["specversion"]
    if value != SPECVERSION_V1_0:
        return f"{value!r} is not supported; use {SPECVERSION_V1_0}"
    return None


def _extension_value_problem(value: Any) -> str | None:
    if isinstance(value, bool | str):
        return None
    if isinstance(value, int):
        if _INTEGER_MIN <= value <= _INTEGER_MAX:
            return None
        return f"{value} is outside the CloudEvents integer range (32-bit signed); send it as a string"
    return f"a JSON {json_type_name(value)} is not a CloudEvents attribute value; use a string, integer or boolean"


def _sdk_problem(name: str, errors: list[BaseCloudEventException], attributes: Mapping[str, Any]) -> str:
    """Our wording for the SDK's validation errors on one attribute (it may report several; one says enough)."""
    if any(isinstance(error, CustomExtensionAttributeError) for error in errors):
        if name == "data":
            return "is reserved for the event's data; in binary mode the body is the data"
        suggestion = re.sub(r"[^a-z0-9]", "", name.lower())
        hint = f", e.g. {suggestion!r}" if suggestion and suggestion not in _CORE_ATTRIBUTES else ""
        return f"is not a valid extension name; use lowercase letters a-z and digits 0-9 only{hint}"
    if any(isinstance(error, MissingRequiredAttributeError) for error in errors):
        return "is missing; every event needs id, source, type and specversion"
    if any(isinstance(error, InvalidAttributeTypeError) for error in errors):
        return f"must be a string, not a JSON {json_type_name(attributes.get(name))}"
    return "must not be empty"


def _new_event(attributes: dict[str, Any], data: Any) -> CloudEvent:
    """The event factory given to the SDK: its validation, plus ours, reported together in one message."""
    problems: dict[str, str] = {}
    if "id" not in attributes:
        problems["id"] = "is missing; give each event an id unique within its source"
    specversion_problem = _specversion_problem(attributes)
    if specversion_problem is not None:
        problems["specversion"] = specversion_problem
    for name, value in attributes.items():
        if name not in _CORE_ATTRIBUTES:
            extension_problem = _extension_value_problem(value)
            if extension_problem is not None:
                problems[name] = extension_problem
    time_given = "time" in attributes
    try:
        event = CloudEvent(attributes, data)
    except CloudEventValidationError as exc:
        for name, errors in exc.errors.items():
            sdk_problem = _sdk_problem(name, errors, attributes)
            if name not in problems:
                problems[name] = sdk_problem
            elif name not in _CORE_ATTRIBUTES:  # the SDK checked the extension's name, we checked its value
                problems[name] = f"{sdk_problem}; its value: {problems[name]}"
    if problems:
        raise EventRefused(
            EntryErrorCode.INVALID_ATTRIBUTE,
            "; ".join(f"attribute {name!r}: {problem}" for name, problem in problems.items()),
        )
    if not time_given:
        del event.get_attributes()["time"]  # the SDK stamped the clock; the caller stamps acceptance time
    return event


def json_error_text(exc: BaseException) -> str:
    """Where and why JSON (or its UTF-8) could not be read, for a client's eyes."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)
