"""EventBridge ingress: the CloudEvents of a PutEvents-like HTTP request (`POST /buses/{bus}/events`), per entry.

Pure: `parse_events(headers, body)` takes what the HTTP layer received and returns one entry per event, each a
CloudEvent or an `EntryError`, so that one bad event does not refuse the others; `put_events_response` builds the
answer once the caller has stored the accepted ones. Sockets, routing and storage live elsewhere.

Modes, after the CloudEvents HTTP protocol binding 1.0 (the Content-Type decides, as the binding says):

- structured: Content-Type `application/cloudevents+json`, the body is one event in the JSON format;
- batch: Content-Type `application/cloudevents-batch+json`, the body is a JSON array of such events, each read on
  its own (a bad element gives an EntryError in its slot);
- binary: any other Content-Type with `ce-*` headers; the headers are the attributes, the body is the data and
  Content-Type its `datacontenttype`.

Header names are case-insensitive. A request that cannot be read as a whole (unknown content type, a batch that is
not a JSON array, too many entries, a body too large) raises `IngressError`; nothing in it is accepted.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from cloudevents.core.v1.event import CloudEvent

from eventbridge.errors import IngressError
from eventbridge.ingress_event import (
    EntryErrorCode,
    EventRefused,
    event_from_binary,
    event_from_structured,
    json_error_text,
    json_type_name,
    loads_strict,
)

__all__ = [
    "BATCH_CONTENT_TYPE",
    "MAX_BATCH_ENTRIES",
    "MAX_BODY_BYTES",
    "MAX_EVENT_BYTES",
    "STRUCTURED_CONTENT_TYPE",
    "Entry",
    "EntryError",
    "EntryErrorCode",
    "IngressError",
    "RequestErrorCode",
    "parse_events",
    "put_events_response",
]

# AWS EventBridge (PutEvents entry size) and rocketmq-eventbridge both cap an event at 256 KiB; so do our transforms
# (transform.MAX_RENDERED_CHARS). Measured on the wire: a structured event's JSON (in a batch, its compact JSON);
# in binary mode the body plus the ce-* and Content-Type header names and values.
MAX_EVENT_BYTES = 256 * 1024

# AWS PutEvents takes 10 entries a call. We take 100: an IoT gateway flushing a buffer of readings sends many small
# events at once, and 10 would multiply its requests tenfold. An AWS client sends 10 at most and is unaffected.
MAX_BATCH_ENTRIES = 100

# The whole request body. Parsed JSON takes several times its text in memory, so this bounds what one request costs
# before any per-event limit applies. 1 MiB holds four maximal events, or a full batch of 10 KiB events; a client
# with more splits its batch. (AWS caps a whole PutEvents request at 256 KiB; Kafka's default max.request.size is
# 1 MiB.) The HTTP layer should refuse a larger body before reading it (aiohttp's client_max_size).
MAX_BODY_BYTES = 1024 * 1024

STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json"
# Any structured format (+avro, +protobuf ...) starts so; we read JSON only.
_CLOUDEVENTS_MEDIA_PREFIX = "application/cloudevents"
_CE_HEADER_PREFIX = "ce-"
_HTTP_BAD_REQUEST = 400
_HTTP_CONTENT_TOO_LARGE = 413


class RequestErrorCode(enum.StrEnum):
    """`IngressError.code` values: why a whole request was refused."""

    UNSUPPORTED_CONTENT_TYPE = "UnsupportedContentType"
    MALFORMED_REQUEST = "MalformedRequest"
    TOO_MANY_ENTRIES = "TooManyEntries"
    REQUEST_TOO_LARGE = "RequestTooLarge"


@dataclass(frozen=True, slots=True)
class EntryError:
    """One entry refused. `code` is an `EntryErrorCode` value (AWS PutEvents style); `message` starts with the
    entry's 0-based position ("entry 3: attribute 'specversion': '0.9' is not supported; use 1.0")."""

    code: str
    message: str


Entry: TypeAlias = CloudEvent | EntryError


def parse_events(headers: Mapping[str, str], body: bytes) -> list[Entry]:
    """The entries of a PutEvents request, in request order; raises only IngressError.

    An accepted event without `time` has none: the caller stamps the time it accepted the event.
    """
    if len(body) > MAX_BODY_BYTES:
        raise IngressError(
            RequestErrorCode.REQUEST_TOO_LARGE,
            f"request body of {len(body)} bytes is over the {MAX_BODY_BYTES}-byte limit; split the batch",
            status=_HTTP_CONTENT_TOO_LARGE,
        )
    lowered = {name.lower(): value for name, value in headers.items()}
    content_type = lowered.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == BATCH_CONTENT_TYPE:
        return _parse_batch(body)
    if media_type == STRUCTURED_CONTENT_TYPE:
        return [_parse_structured(body)]
    if media_type.startswith(_CLOUDEVENTS_MEDIA_PREFIX):
        raise IngressError(
            RequestErrorCode.UNSUPPORTED_CONTENT_TYPE,
            f"Content-Type {content_type!r}: only the JSON event format is supported; send "
            f"{STRUCTURED_CONTENT_TYPE}, {BATCH_CONTENT_TYPE} or binary mode",
        )
    if any(name.startswith(_CE_HEADER_PREFIX) for name in lowered):
        return [_parse_binary(lowered, body)]
    raise IngressError(
        RequestErrorCode.UNSUPPORTED_CONTENT_TYPE,
        f"Content-Type {content_type!r} is not a CloudEvents format and there are no ce-* headers; send "
        f"{STRUCTURED_CONTENT_TYPE}, {BATCH_CONTENT_TYPE}, or binary mode (ce-id, ce-source, ce-type and "
        "ce-specversion headers, the data as the body)",
    )


def put_events_response(results: Sequence[str | EntryError]) -> dict[str, Any]:
    """The PutEvents answer: per entry, in request order, the id of an accepted event or the error of a refused
    one (from parse_events, or from storing it), and how many failed."""
    entries: list[dict[str, str]] = [
        {"ErrorCode": result.code, "ErrorMessage": result.message}
        if isinstance(result, EntryError)
        else {"EventId": result}
        for result in results
    ]
    failed = sum(1 for result in results if isinstance(result, EntryError))
    return {"FailedEntryCount": failed, "Entries": entries}


def _refused(index: int, refusal: EventRefused) -> EntryError:
    return EntryError(refusal.code, f"entry {index}: {refusal.detail}")


def _too_large(index: int, size: int) -> EntryError:
    return EntryError(
        EntryErrorCode.EVENT_TOO_LARGE,
        f"entry {index}: event of {size} bytes is over the {MAX_EVENT_BYTES}-byte limit; store large payloads "
        "elsewhere and send a reference",
    )


def _parse_binary(headers: Mapping[str, str], body: bytes) -> Entry:
    size = len(body) + sum(
        len(name) + len(value)
        for name, value in headers.items()
        if name.startswith(_CE_HEADER_PREFIX) or name == "content-type"
    )
    if size > MAX_EVENT_BYTES:
        return _too_large(0, size)
    try:
        return event_from_binary(headers, body)
    except EventRefused as refusal:
        return _refused(0, refusal)


def _parse_structured(body: bytes) -> Entry:
    if len(body) > MAX_EVENT_BYTES:
        return _too_large(0, len(body))
    try:
        element = loads_strict(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return EntryError(
            EntryErrorCode.MALFORMED_EVENT,
            f"entry 0: body is not JSON ({json_error_text(exc)}); send one event as a JSON object",
        )
    try:
        return event_from_structured(element)
    except EventRefused as refusal:
        return _refused(0, refusal)


def _parse_batch(body: bytes) -> list[Entry]:
    try:
        elements = loads_strict(body.decode("utf-8"), whole=False)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise IngressError(
            RequestErrorCode.MALFORMED_REQUEST,
            f"batch is not JSON ({json_error_text(exc)}); send a JSON array of events",
        ) from None
    if not isinstance(elements, list):
        raise IngressError(
            RequestErrorCode.MALFORMED_REQUEST,
            f"batch is a JSON {json_type_name(elements)}, not an array; send a JSON array of events, or one event "
            f"as {STRUCTURED_CONTENT_TYPE}",
        )
    if len(elements) > MAX_BATCH_ENTRIES:
        raise IngressError(
            RequestErrorCode.TOO_MANY_ENTRIES,
            f"batch of {len(elements)} events is over the limit of {MAX_BATCH_ENTRIES}; split it",
        )
    return [_parse_batch_element(index, element) for index, element in enumerate(elements)]


def _parse_batch_element(index: int, element: Any) -> Entry:
    # An element's size is that of its compact JSON (MAX_EVENT_BYTES): it is written once, to be measured.
    try:
        encoded = json.dumps(element, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, RecursionError) as exc:
        return EntryError(EntryErrorCode.MALFORMED_EVENT, f"entry {index}: cannot be read ({exc})")
    if len(encoded) > MAX_EVENT_BYTES:
        return _too_large(index, len(encoded))
    try:
        return event_from_structured(element)
    except EventRefused as refusal:
        return _refused(index, refusal)
