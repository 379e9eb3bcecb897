"""Deliver one matched event to one HTTP target as a CloudEvent (CloudEvents HTTP binding, JSON format).

Two layers. `outgoing_event` and `outgoing_request` are pure: they turn the matched event (its structured JSON form,
as `event_form.event_as_json` gives it) into the CloudEvent and then the HTTP request the target receives.
`HttpTargetClient.deliver` sends that request with aiohttp and turns what happens into a `DeliveryOutcome`; it
never raises for an HTTP or network problem. Limiting concurrency is the caller's job (target_task runs
`concurrency` workers per target).

The outgoing CloudEvent keeps the matched event's id, source, type, subject, time and extension attributes; its
data is the transformed value and its datacontenttype says what that value is. It is always specversion 1.0.
dataschema is dropped: it described the matched event's data, which the transform replaced. An event without
`time` gets the time it is sent (the SDK's CloudEvent fills it in). `time` is sent with microsecond precision
(the SDK holds it as a `datetime`).

What the receiver gets, per transform kind:

    kind                     datacontenttype              data (structured: "data" member)  binary body
    ORIGINAL                 application/json             the whole matched event (object)  its JSON
    PART                     application/json             the matched JSON value            its JSON
    CONSTANT, a string       text/plain; charset=utf-8    the string                        its UTF-8 text
    CONSTANT, other JSON     application/json             the value                         its JSON
    TEMPLATE, output: json   application/json             the parsed output                 its JSON
    TEMPLATE, output: text   text/plain; charset=utf-8    the output string                 its UTF-8 text

- Binary mode: attributes travel as `ce-*` headers (percent-encoded by the SDK), datacontenttype as
  Content-Type, the data alone as the body. JSON data is JSON text, whatever its type: a string value is sent
  quoted (`"abc"`), not bare, so the body always parses as the Content-Type says. Extension values travel in
  their CloudEvents canonical string form (`true`/`false` for booleans, not Python's `True`).
- Structured mode: Content-Type `application/cloudevents+json`, the body is the whole CloudEvent in the JSON
  format; JSON data is the `data` member as a JSON value, text data is a JSON string.
- A JSON `null` (a PART path matching a null, a template rendering `null`) is sent as an event without data: an
  empty body in binary mode, no `data` member in structured mode (the SDK does not tell null from absent). The
  datacontenttype is still application/json.
- The target's headers (`target_headers`: static, event-derived, auth) are added after the CloudEvents ones;
  the rule file refuses names that would collide with them (`ce-*`, Content-Type, ...).

Delivery: a POST to the target's URL; 2xx is success. Redirects are not followed (aiohttp would turn a redirected
POST into a GET without the event); a 3xx is a failure like any other non-2xx. Retryability follows
`retry_policy.retryable`: no answer, 408, 429 and 5xx are retryable; other statuses and render errors are not.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from cloudevents.core.bindings.http import HTTPMessage, to_binary, to_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.spec import SPECVERSION_V1_0
from cloudevents.core.v1.event import OPTIONAL_ATTRIBUTES, REQUIRED_ATTRIBUTES, CloudEvent
from dateutil.parser import isoparse
from yarl import URL

from eventbridge.errors import TransformRenderError
from eventbridge.rules.model import HttpTarget, TargetMode
from eventbridge.targets.deadlines import Deadlines
from eventbridge.targets.delivery_outcome import DeliveryOutcome
from eventbridge.targets.headers import target_headers
from eventbridge.targets.retry_policy import retryable
from eventbridge.targets.transform import Transform

logger = logging.getLogger(__name__)

# The brief an operator reads in a log line or a dead-letter property: long enough for a typical JSON error
# message ({"error": "...", "message": "..."}), short enough to keep one line readable.
ERROR_TEXT_CHARS = 200

# Reading a short response body to its end lets aiohttp reuse the connection. Past this, closing the connection
# and opening another costs less than reading on, and a target answering a huge (or endless) body cannot make
# us hold more than this. Also ample for ERROR_TEXT_CHARS characters of UTF-8 (at most 4 bytes each) after
# collapsing leading whitespace.
MAX_DRAINED_BODY_BYTES = 64 * 1024

# Members of the structured JSON form that are not copied as attributes of the outgoing event: the data and how
# it was encoded (replaced by the transformed data), and the schema of the data that was replaced.
_NOT_COPIED = frozenset({"specversion", "data", "data_base64", "datacontenttype", "dataschema"})

# The attributes the CloudEvents 1.0 spec defines; every other attribute is an extension. Only extensions are
# given their canonical string form in binary mode: a defined attribute of the wrong type stays wrong, so that the
# SDK refuses it as before.
_SPEC_ATTRIBUTES = frozenset(REQUIRED_ATTRIBUTES) | frozenset(OPTIONAL_ATTRIBUTES)

# Distinct `time` strings parsed recently. The events of one PutEvents call share their stamp, and a producer's
# events often share a second; past that, a miss costs one isoparse, as without the cache.
TIME_CACHE_ENTRIES = 1024

# The target's timeout_ms is the one deadline of a delivery; a session's own defaults (aiohttp: 5 minutes total,
# 30 s to connect) must not cut it short or stretch it.
_NO_SESSION_TIMEOUT = aiohttp.ClientTimeout()
# Connections open at once to one host (scheme, host and port), all its targets together; kept alive and reused.
# Without a bound, thousands of targets on one host each opened a connection per event (10,000 rules to one
# service: 5,700 connects for 2,000 events). Per host, so a slow host holds up only its own targets.
MAX_CONNECTIONS_PER_HOST = 64
# Target URLs kept parsed (HttpTargetClient._urls).
MAX_PARSED_URLS = 100_000

# We read at most MAX_DRAINED_BODY_BYTES and show only a prefix; a compressed body would be unreadable as text
# and, decompressed, could be far larger than what arrived.
_IDENTITY_ENCODING = ("Accept-Encoding", "identity")


@dataclass(frozen=True, slots=True)
class OutgoingRequest:
    """The POST a target receives for one event, before any I/O."""

    url: str
    headers: tuple[tuple[str, str], ...]  # CloudEvents headers first, then the target's
    body: bytes


class _JsonDataFormat(JSONFormat):
    """The SDK's JSON format, writing any JSON value as JSON text in binary mode.

    cloudevents 2.2.0's `JSONFormat.write_data` writes a `str` as is and a list, number or boolean with `str()`
    (Python's repr, e.g. `[1, 'a']`, `True`): not JSON, although the Content-Type says so. The structured `write`
    is right and is not changed.
    """

    def write_data(self, data: dict[str, Any] | str | bytes | None, datacontenttype: str | None) -> bytes:
        is_json = self.JSON_CONTENT_TYPE_PATTERN.match(datacontenttype or self.DEFAULT_CONTENT_TYPE)
        if data is None or isinstance(data, bytes | bytearray) or not is_json:
            return super().write_data(data, datacontenttype)
        try:
            return orjson.dumps(data)  # a tenth of the stdlib's time
        except TypeError:  # an integer past 64 bits, which JSON allows and orjson does not write
            return _encode_json(data).encode("utf-8")


DATA_FORMAT = _FORMAT = _JsonDataFormat()  # also the other targets' (local_targets)
# json.dumps with options builds an encoder per call; this one is built once.
_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# The SDK holds `time` as a datetime (it refuses a string); datetimes are immutable, so events may share one.
_parse_time = functools.lru_cache(maxsize=TIME_CACHE_ENTRIES)(isoparse)


def outgoing_event(target: HttpTarget, event: Mapping[str, Any]) -> CloudEvent:
    """The CloudEvent a target receives for `event` (structured JSON form). Pure.

    Raises TransformRenderError when the target's transform fails on this event. A malformed matched event (no
    id, a time that is not RFC 3339) is the caller's bug and raises the SDK's or dateutil's error.
    """
    return cloud_event_of(target.transform, event, canonical_extensions=False)


def outgoing_request(target: HttpTarget, event: Mapping[str, Any]) -> OutgoingRequest:
    """The HTTP request for `event`, in the target's mode, with its headers. Pure; raises TransformRenderError."""
    binary = target.mode is TargetMode.BINARY
    cloud_event = cloud_event_of(target.transform, event, canonical_extensions=binary)
    extra = target_headers(target, event)
    message: HTTPMessage = to_binary(cloud_event, _FORMAT) if binary else to_structured(cloud_event, _FORMAT)
    headers = list(message.headers.items())
    if not any(name.lower() == "accept-encoding" for name, _ in extra):
        headers.append(_IDENTITY_ENCODING)
    headers.extend(extra)
    return OutgoingRequest(target.url, tuple(headers), message.body)


def cloud_event_of(transform: Transform, event: Mapping[str, Any], canonical_extensions: bool) -> CloudEvent:
    """The one CloudEvent built (and validated by the SDK) for a request or another target's message.

    With `canonical_extensions` (binary mode), boolean extensions are given as "true"/"false": headers carry
    strings, and the SDK would write str(value), Python's spelling. Set before construction, so the SDK builds
    and validates the event once.
    """
    transformed = transform.apply(event)
    attributes: dict[str, Any] = {}
    for name, value in event.items():
        if name in _NOT_COPIED:
            continue
        if canonical_extensions and isinstance(value, bool) and name not in _SPEC_ATTRIBUTES:
            value = "true" if value else "false"
        attributes[name] = value
    attributes["specversion"] = SPECVERSION_V1_0
    time = attributes.get("time")
    if isinstance(time, str):
        attributes["time"] = _parse_time(time)
    # Set even for null data: without it, aiohttp would label an empty binary body application/octet-stream.
    attributes["datacontenttype"] = transformed.content_type
    return CloudEvent(attributes, transformed.value)


def outcome_for_status(status: int, reason: str | None, body_head: bytes) -> DeliveryOutcome:
    """The outcome of a response with `status`, whose body starts with `body_head`. Pure."""
    if 200 <= status < 300:
        return DeliveryOutcome(ok=True, status=status, error="", retryable=False)
    text = " ".join(body_head.decode("utf-8", errors="replace").split())[:ERROR_TEXT_CHARS]
    return DeliveryOutcome(
        ok=False, status=status, error=f"HTTP {status}: {text or reason or '(empty body)'}", retryable=retryable(status)
    )


def _os_reason(error: OSError) -> str:
    if isinstance(error, socket.gaierror) and error.strerror:
        return error.strerror  # "Name or service not known"; os.strerror does not know getaddrinfo's codes
    if error.errno is not None and error.errno > 0:
        return os.strerror(error.errno)  # "Connection refused", not asyncio's "Connect call failed (...)"
    return " ".join(str(error).split()) or type(error).__name__


class HttpTargetClient:
    """Sends events to HTTP targets over one aiohttp session.

    Given a session, the client uses it and leaves closing it to its owner. Without one, it creates its own on
    first use (aiohttp wants a running loop), with no limit over all hosts (a connector-wide one would make targets
    wait for each other) and MAX_CONNECTIONS_PER_HOST to each host, its targets together.
    """

    def __init__(self, session: aiohttp.ClientSession | None = None) -> None:
        self._session = session
        self._owns_session = session is None
        # Each target's URL parsed once (aiohttp parses a string URL on every request; yarl's own cache holds a
        # few hundred, and thousands of targets each have their own).
        self._urls: dict[str, URL] = {}
        # A request slot per host (scheme, host, port), as many as the connections kept to it. A delivery waits
        # for a slot before its request is built: with thousands of targets on one host, hundreds of deliveries
        # at once otherwise each built a request and waited in aiohttp's connection pool, where waiting costs
        # more, and their objects kept the garbage collector busy. The target's timeout runs from the slot.
        self._slots: dict[tuple[str, str | None, int | None], asyncio.Semaphore] = {}
        # Each request's timeout_ms, kept without a loop timer per request (eventbridge.targets.deadlines: a request is
        # cut
        # off at its deadline or up to 10 ms after it).
        self._deadlines = Deadlines()

    async def deliver(self, target: HttpTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        """POST `event` to `target` within target.timeout_ms, counted from when a request slot to its host is
        free; never raises for an HTTP or network problem."""
        url = self._urls.get(target.url)
        if url is None:
            if len(self._urls) >= MAX_PARSED_URLS:
                self._urls.clear()  # targets come and go with reloads; start again rather than grow
            url = self._urls[target.url] = URL(target.url)
        host = (url.scheme, url.host, url.port)
        slots = self._slots.get(host)
        if slots is None:
            slots = self._slots[host] = asyncio.Semaphore(MAX_CONNECTIONS_PER_HOST)
        async with slots:
            return await self._post(target, url, event)

    async def _post(self, target: HttpTarget, url: URL, event: Mapping[str, Any]) -> DeliveryOutcome:
        try:
            request = outgoing_request(target, event)
        except TransformRenderError as exc:
            return self._failed(target, DeliveryOutcome(ok=False, status=None, error=str(exc), retryable=False))
        session = self._get_session()
        deadline = self._deadlines.after(target.timeout_ms / 1000)
        try:
            async with deadline:
                response = await session.post(
                    url,
                    data=request.body,
                    headers=request.headers,
                    allow_redirects=False,
                    auto_decompress=False,
                    timeout=_NO_SESSION_TIMEOUT,
                )
        except TimeoutError:  # before aiohttp.ClientError: aiohttp's own timeouts are both
            error = f"timed out after {target.timeout_ms} ms"
            return self._failed(target, DeliveryOutcome(ok=False, status=None, error=error, retryable=True))
        except aiohttp.ClientConnectorError as exc:
            error = f"cannot connect to {target.url}: {_os_reason(exc.os_error)}"
            return self._failed(target, DeliveryOutcome(ok=False, status=None, error=error, retryable=True))
        except aiohttp.ClientError as exc:
            detail = " ".join(str(exc).split()) or "no detail"
            error = f"no response from {target.url}: {type(exc).__name__}: {detail}"
            return self._failed(target, DeliveryOutcome(ok=False, status=None, error=error, retryable=True))
        async with response:
            head = await _drain(response, deadline.when)
        outcome = outcome_for_status(response.status, response.reason, head)
        return outcome if outcome.ok else self._failed(target, outcome)

    async def close(self) -> None:
        """Close the session if this client created it; a session given to it stays open."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=MAX_CONNECTIONS_PER_HOST)
            )
        return self._session

    @staticmethod
    def _failed(target: HttpTarget, outcome: DeliveryOutcome) -> DeliveryOutcome:
        logger.debug("target %r: delivery failed (retryable=%s): %s", target.id, outcome.retryable, outcome.error)
        return outcome


async def _drain(response: aiohttp.ClientResponse, deadline: float) -> bytes:
    """Read the body up to MAX_DRAINED_BODY_BYTES, by the deadline; return its first bytes.

    The status is already known and decides the outcome: a body that is too long, too slow or cut off only
    costs the connection (closed instead of reused), never the answer. A target that said 200 has the event;
    reporting a timeout would make us send it again.
    """
    content = response.content
    if content.is_eof() and content.exception() is None:
        # The whole body has arrived already (a 204, a short answer in the same packets): reading it cannot wait,
        # so no deadline is armed. What follows is the loop below without its awaits.
        head = content.read_nowait(MAX_DRAINED_BODY_BYTES)
        if len(head) < MAX_DRAINED_BODY_BYTES and content.at_eof():
            return head
        response.close()
        return head
    received = bytearray()
    try:
        async with asyncio.timeout_at(deadline):
            while len(received) < MAX_DRAINED_BODY_BYTES:
                chunk = await response.content.read(MAX_DRAINED_BODY_BYTES - len(received))
                if not chunk:
                    return bytes(received)
                received += chunk
    except (TimeoutError, aiohttp.ClientError):
        pass
    response.close()  # the rest of the body is unread: the connection cannot be reused
    return bytes(received)
