"""HTTP target delivery: real aiohttp receivers on port 0 parse what arrives with the CloudEvents SDK.

Each mode x transform kind is checked both through the SDK (`from_http`) and on the raw body, since the SDK's
reader is lenient (it takes an unquoted string for JSON) and would hide a body that is not what its Content-Type
says.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.http import HTTPMessage, from_http
from cloudevents.core.formats.json import JSONFormat
from dateutil.parser import isoparse

from eventbridge.rules.model import HttpTarget
from eventbridge.rules.rule_file import parse_rule_file
from eventbridge.targets.http_target import (
    ERROR_TEXT_CHARS,
    MAX_CONNECTIONS_PER_HOST,
    MAX_DRAINED_BODY_BYTES,
    HttpTargetClient,
    outgoing_event,
    outgoing_request,
)
from eventbridge.targets.transform import JSON_CONTENT_TYPE, TEXT_CONTENT_TYPE

EVENT: dict[str, Any] = {
    "specversion": "1.0",
    "id": "evt-1",
    "source": "mqgate/plant-a",
    "type": "mqgate.mqtt.publish",
    "subject": "rooms/7",
    "time": "2024-05-01T12:00:00.123456Z",
    "datacontenttype": "application/json",
    "dataschema": "https://schemas.example/room.json",
    "data": {"temp": 3.5, "room": "7", "tags": ["cold", "eu"], "note": None},
    "region": "eu",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def cloud_event(self) -> BaseCloudEvent:
        return from_http(HTTPMessage(headers=self.headers, body=self.body), JSONFormat())


@dataclass
class Receiver:
    """A real HTTP server on 127.0.0.1, port 0, recording every request; `respond` decides the answer."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    respond: Handler | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(request.method, request.path, dict(request.headers), body))
        if self.respond is not None:
            return await self.respond(request)
        return web.Response(status=204)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    state = Receiver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    state.url = f"http://{host}:{port}/hook"
    try:
        yield state
    finally:
        await runner.cleanup()


@pytest.fixture
async def client() -> AsyncIterator[HttpTargetClient]:
    owned = HttpTargetClient()
    try:
        yield owned
    finally:
        await owned.close()


def target_from(url: str, settings: str = "") -> HttpTarget:
    text = (
        "rules:\n  - name: r\n    pattern: {type: [a]}\n    targets:\n"
        f"      - id: t\n        type: http\n        url: {url}\n" + textwrap.indent(textwrap.dedent(settings), " " * 8)
    )
    (rule,) = parse_rule_file("t.yaml", text)
    return rule.targets[0]


TRANSFORMS = {
    "original": ("transform: {kind: ORIGINAL}", JSON_CONTENT_TYPE, EVENT),
    "part-object": ("transform: {kind: PART, path: $.data}", JSON_CONTENT_TYPE, EVENT["data"]),
    "part-number": ("transform: {kind: PART, path: $.data.temp}", JSON_CONTENT_TYPE, 3.5),
    "part-string": ("transform: {kind: PART, path: $.subject}", JSON_CONTENT_TYPE, "rooms/7"),
    "part-list": ("transform: {kind: PART, path: $.data.tags}", JSON_CONTENT_TYPE, ["cold", "eu"]),
    "constant-string": ("transform: {kind: CONSTANT, value: all clear}", TEXT_CONTENT_TYPE, "all clear"),
    "constant-json": (
        "transform: {kind: CONSTANT, value: {level: 2, codes: [1, 2]}}",
        JSON_CONTENT_TYPE,
        {"level": 2, "codes": [1, 2]},
    ),
    "template-json": (
        """\
        transform:
          kind: TEMPLATE
          variables: {t: $.data.temp, room: $.subject}
          template: '{"room": {{ room | json }}, "t": {{ t }}}'
          output: json
        """,
        JSON_CONTENT_TYPE,
        {"room": "rooms/7", "t": 3.5},
    ),
    "template-text": (
        """\
        transform:
          kind: TEMPLATE
          variables: {t: $.data.temp, room: $.subject}
          template: '{{ room }} is at {{ t }} C'
          output: text
        """,
        TEXT_CONTENT_TYPE,
        "rooms/7 is at 3.5 C",
    ),
}


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize("kind", list(TRANSFORMS))
async def test_receiver_gets_the_transformed_cloud_event(
    receiver: Receiver, client: HttpTargetClient, mode: str, kind: str
) -> None:
    settings, content_type, expected = TRANSFORMS[kind]
    target = target_from(receiver.url, f"mode: {mode}\n" + textwrap.dedent(settings))

    outcome = await client.deliver(target, EVENT)

    assert (outcome.ok, outcome.status, outcome.error, outcome.retryable) == (True, 204, "", False)
    (request,) = receiver.received
    assert (request.method, request.path) == ("POST", "/hook")
    event = request.cloud_event()
    assert event.get_attributes() == {
        "specversion": "1.0",
        "id": "evt-1",
        "source": "mqgate/plant-a",
        "type": "mqgate.mqtt.publish",
        "subject": "rooms/7",
        "time": isoparse("2024-05-01T12:00:00.123456Z"),
        "datacontenttype": content_type,
        "region": "eu",
    }
    assert event.get_data() == expected
    if mode == "binary":
        assert request.headers["Content-Type"] == content_type
        raw = json.loads(request.body) if content_type == JSON_CONTENT_TYPE else request.body.decode("utf-8")
        assert raw == expected
    else:
        assert request.headers["Content-Type"] == "application/cloudevents+json"
        assert json.loads(request.body)["data"] == expected


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_null_data_is_sent_as_no_data(receiver: Receiver, client: HttpTargetClient, mode: str) -> None:
    target = target_from(receiver.url, f"mode: {mode}\ntransform: {{kind: PART, path: $.data.note}}\n")
    assert (await client.deliver(target, EVENT)).ok
    (request,) = receiver.received
    event = request.cloud_event()
    assert event.get_data() is None
    assert event.get_datacontenttype() == JSON_CONTENT_TYPE
    if mode == "binary":
        assert request.body == b""
    else:
        assert "data" not in json.loads(request.body)


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_extensions_preserved(receiver: Receiver, client: HttpTargetClient, mode: str) -> None:
    event = {**EVENT, "region": "eu west/ü", "seq": 42, "urgent": True, "traceparent": "00-abc-def-01"}
    target = target_from(receiver.url, f"mode: {mode}\n")
    assert (await client.deliver(target, event)).ok
    received = receiver.received[0].cloud_event()
    extensions = {name: received.get_extension(name) for name in ("region", "seq", "urgent", "traceparent")}
    if mode == "binary":  # headers carry the CloudEvents canonical string forms
        assert extensions == {"region": "eu west/ü", "seq": "42", "urgent": "true", "traceparent": "00-abc-def-01"}
        assert receiver.received[0].headers["ce-urgent"] == "true"
    else:
        assert extensions == {"region": "eu west/ü", "seq": 42, "urgent": True, "traceparent": "00-abc-def-01"}


async def test_static_derived_and_basic_auth_headers_arrive(receiver: Receiver, client: HttpTargetClient) -> None:
    target = target_from(
        receiver.url,
        """\
        headers:
          X-Team: ops
          X-Room: {path: $.data.room}
          X-Tags: {path: $.data.tags}
        auth: {type: basic, username: ali baba, password: open sesame}
        """,
    )
    assert (await client.deliver(target, EVENT)).ok
    headers = receiver.received[0].headers
    assert headers["X-Team"] == "ops"
    assert headers["X-Room"] == "7"
    assert headers["X-Tags"] == '["cold","eu"]'
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ali baba:open sesame").decode()
    assert headers["Accept-Encoding"] == "identity"
    assert headers["ce-id"] == "evt-1"  # the CloudEvents headers are still there


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_api_key_header_arrives(receiver: Receiver, client: HttpTargetClient, mode: str) -> None:
    target = target_from(receiver.url, f"mode: {mode}\nauth: {{type: api-key, header: X-Key, value: s3cret}}\n")
    assert (await client.deliver(target, EVENT)).ok
    assert receiver.received[0].headers["X-Key"] == "s3cret"


async def test_a_target_accept_encoding_replaces_ours(receiver: Receiver, client: HttpTargetClient) -> None:
    target = target_from(receiver.url, "headers: {Accept-Encoding: br}\n")
    assert (await client.deliver(target, EVENT)).ok
    assert receiver.received[0].headers["Accept-Encoding"] == "br"


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (404, False), (400, False), (429, True), (408, True)]
)
async def test_error_status(receiver: Receiver, client: HttpTargetClient, status: int, retryable: bool) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text='{"error":\n  "no room\tfor this"}\n')

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url), EVENT)
    assert outcome.ok is False
    assert outcome.status == status
    assert outcome.error == f'HTTP {status}: {{"error": "no room for this"}}'
    assert outcome.retryable is retryable


async def test_error_text_is_one_line_of_at_most_200_characters(receiver: Receiver, client: HttpTargetClient) -> None:
    text = "line one\r\n" + "x" * 500

    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=502, text=text)

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url), EVENT)
    assert outcome.error == "HTTP 502: " + ("line one " + "x" * 500)[:ERROR_TEXT_CHARS]
    assert ERROR_TEXT_CHARS == 200


async def test_empty_error_body_gives_the_reason(receiver: Receiver, client: HttpTargetClient) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=503)

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url), EVENT)
    assert (outcome.status, outcome.error, outcome.retryable) == (503, "HTTP 503: Service Unavailable", True)


async def test_redirect_is_not_followed(receiver: Receiver, client: HttpTargetClient) -> None:
    async def answer(request: web.Request) -> web.Response:
        if request.path == "/hook":
            raise web.HTTPFound("/elsewhere")
        return web.Response(status=200)

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url), EVENT)
    assert (outcome.ok, outcome.status, outcome.retryable) == (False, 302, False)
    assert [(r.method, r.path) for r in receiver.received] == [("POST", "/hook")]


async def test_timeout(receiver: Receiver, client: HttpTargetClient) -> None:
    async def answer(request: web.Request) -> web.Response:
        await asyncio.sleep(1.0)
        return web.Response(status=200)

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url, "timeout_ms: 200\n"), EVENT)
    assert outcome == outcome.__class__(ok=False, status=None, error="timed out after 200 ms", retryable=True)


async def test_a_body_stalled_after_a_2xx_status_is_still_a_delivery(
    receiver: Receiver, client: HttpTargetClient
) -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b"partial")
        await asyncio.sleep(1.0)  # past the 200 ms timeout: the target has the event, the body never ends
        return response

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url, "timeout_ms: 200\n"), EVENT)
    assert (outcome.ok, outcome.status, outcome.error) == (True, 200, "")


async def test_refused_connection(client: HttpTargetClient) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    outcome = await client.deliver(target_from(url), EVENT)
    assert outcome == outcome.__class__(
        ok=False, status=None, error=f"cannot connect to {url}: Connection refused", retryable=True
    )


async def test_server_closing_without_an_answer(receiver: Receiver, client: HttpTargetClient) -> None:
    async def answer(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        await asyncio.sleep(0.1)
        return web.Response(status=200)

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url), EVENT)
    assert (outcome.ok, outcome.status, outcome.retryable) == (False, None, True)
    assert outcome.error.startswith(f"no response from {receiver.url}: ServerDisconnectedError")
    assert "\n" not in outcome.error


async def test_render_error_is_not_retryable_and_sends_nothing(receiver: Receiver, client: HttpTargetClient) -> None:
    target = target_from(receiver.url, "transform: {kind: PART, path: $.data.absent}\n")
    outcome = await client.deliver(target, EVENT)
    assert (outcome.ok, outcome.status, outcome.retryable) == (False, None, False)
    assert outcome.error == "PART transform: JSONPath '$.data.absent' matched nothing in the event"
    assert receiver.received == []


async def test_header_render_error_is_not_retryable(receiver: Receiver, client: HttpTargetClient) -> None:
    target = target_from(receiver.url, "headers: {X-Room: {path: $.subject}}\n")
    outcome = await client.deliver(target, {**EVENT, "subject": "a\r\nX-Injected: 1"})
    assert (outcome.ok, outcome.status, outcome.retryable) == (False, None, False)
    assert "X-Room" in outcome.error
    assert receiver.received == []


# Far more than the client drains (MAX_DRAINED_BODY_BYTES) plus what localhost socket buffers hold (a few MiB).
HUGE_BODY_BYTES = 64 * 1024 * 1024


@pytest.mark.parametrize("status", [200, 500])
async def test_a_huge_response_body_is_not_read_whole(
    receiver: Receiver, client: HttpTargetClient, status: int
) -> None:
    """A client that read the whole body would let the receiver finish sending it; ours closes the connection."""
    sent: list[int] = []
    done = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=status)
        response.content_length = HUGE_BODY_BYTES
        await response.prepare(request)
        chunk = b"e" * (64 * 1024)
        total = 0
        try:
            while total < HUGE_BODY_BYTES:
                await response.write(chunk)  # waits while the client does not read
                total += len(chunk)
        except ConnectionError:
            pass
        finally:
            sent.append(total)
            done.set()
        return response

    receiver.respond = answer
    outcome = await client.deliver(target_from(receiver.url, "timeout_ms: 30000\n"), EVENT)
    assert outcome.status == status
    if status == 200:
        assert outcome.ok
    else:
        assert outcome.error == "HTTP 500: " + "e" * ERROR_TEXT_CHARS
    await asyncio.wait_for(done.wait(), 10)  # a hang guard, not a timing assertion
    assert MAX_DRAINED_BODY_BYTES <= sent[0] < HUGE_BODY_BYTES


async def test_a_given_session_is_used_and_left_open(receiver: Receiver) -> None:
    async with aiohttp.ClientSession(headers={"X-Session": "mine"}) as session:
        given = HttpTargetClient(session)
        assert (await given.deliver(target_from(receiver.url), EVENT)).ok
        await given.close()
        assert not session.closed
        assert receiver.received[0].headers["X-Session"] == "mine"


async def test_an_owned_session_is_closed_and_reopened_on_next_use(receiver: Receiver) -> None:
    owned = HttpTargetClient()
    assert (await owned.deliver(target_from(receiver.url), EVENT)).ok
    await owned.close()
    assert (await owned.deliver(target_from(receiver.url), EVENT)).ok
    await owned.close()
    assert len(receiver.received) == 2


# Pure: no socket.


def test_outgoing_event_keeps_attributes_and_drops_the_data_schema() -> None:
    event = outgoing_event(target_from("http://x/", "transform: {kind: PART, path: $.data.room}\n"), EVENT)
    assert event.get_attributes() == {
        "specversion": "1.0",
        "id": "evt-1",
        "source": "mqgate/plant-a",
        "type": "mqgate.mqtt.publish",
        "subject": "rooms/7",
        "time": isoparse("2024-05-01T12:00:00.123456Z"),
        "datacontenttype": JSON_CONTENT_TYPE,
        "region": "eu",
    }
    assert event.get_data() == "7"


def test_outgoing_request_binary_json_string_is_quoted() -> None:
    request = outgoing_request(target_from("http://x/h", "transform: {kind: PART, path: $.subject}\n"), EVENT)
    assert request.url == "http://x/h"
    assert request.body == b'"rooms/7"'
    headers = dict(request.headers)
    assert headers["content-type"] == JSON_CONTENT_TYPE
    assert headers["ce-subject"] == "rooms/7"
    assert headers["ce-time"] == "2024-05-01T12:00:00.123456Z"


# The request as the SDK gives it when used plainly: the event built with a parsed `time`, built again with
# boolean extensions as "true"/"false" for binary mode, then written by the HTTP binding. outgoing_request builds
# the event once and caches parsed times; what it sends must not differ by a byte.
def reference_request(target: HttpTarget, event: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    import cloudevents.core.bindings.http as sdk_http
    from cloudevents.core.v1.event import CloudEvent

    from eventbridge.targets.http_target import _FORMAT

    skipped = {"specversion", "data", "data_base64", "datacontenttype", "dataschema"}
    transformed = target.transform.apply(event)
    attributes = {name: value for name, value in event.items() if name not in skipped}
    attributes["specversion"] = "1.0"
    attributes["time"] = isoparse(attributes["time"])
    attributes["datacontenttype"] = transformed.content_type
    built = CloudEvent(attributes, transformed.value)
    if target.mode.value == "structured":
        message = sdk_http.to_structured(built, _FORMAT)
    else:
        canonical = {
            name: ("true" if value else "false") if isinstance(value, bool) else value
            for name, value in built.get_attributes().items()
        }
        message = sdk_http.to_binary(CloudEvent(canonical, built.get_data()), _FORMAT)
    return message.headers, message.body


REFERENCE_EVENTS = {
    "plain": EVENT,
    "extensions": {**EVENT, "region": 'eu west/ü %"', "seq": 42, "urgent": True, "quiet": False, "ratio": 0.5},
    "millisecond-time": {**EVENT, "time": "2024-05-01T12:00:00.123Z"},
    "offset-time": {**EVENT, "time": "2024-05-01T14:00:00+02:00"},
    "second-time": {**EVENT, "time": "2024-05-01T12:00:00Z"},
    "no-subject": {name: value for name, value in EVENT.items() if name != "subject"},
}


@pytest.mark.parametrize("mode", ["binary", "structured"])
@pytest.mark.parametrize("kind", ["original", "part-number", "constant-string", "template-json"])
@pytest.mark.parametrize("name", list(REFERENCE_EVENTS))
def test_outgoing_request_is_what_the_sdk_gives_plainly(mode: str, kind: str, name: str) -> None:
    target = target_from("http://x/h", f"mode: {mode}\n" + textwrap.dedent(TRANSFORMS[kind][0]))
    event = REFERENCE_EVENTS[name]
    for _ in range(2):  # the second time with `time` from the cache
        request = outgoing_request(target, event)
        headers, body = reference_request(target, event)
        assert request.headers[: len(headers)] == tuple(headers.items())
        assert request.body == body


def test_events_with_different_times_keep_their_own_time() -> None:
    target = target_from("http://x/h")
    first = dict(outgoing_request(target, {**EVENT, "time": "2024-05-01T12:00:00Z"}).headers)
    second = dict(outgoing_request(target, {**EVENT, "time": "2024-05-01T12:00:01Z"}).headers)
    assert (first["ce-time"], second["ce-time"]) == ("2024-05-01T12:00:00Z", "2024-05-01T12:00:01Z")


def test_an_event_without_time_is_sent_with_one() -> None:
    event = {name: value for name, value in EVENT.items() if name != "time"}
    headers = dict(outgoing_request(target_from("http://x/h"), event).headers)
    assert isoparse(headers["ce-time"]).tzinfo is not None


@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_a_spec_attribute_of_the_wrong_type_is_still_refused_by_the_sdk(mode: str) -> None:
    from cloudevents.core.exceptions import CloudEventValidationError

    # Only extensions get the canonical string form: a boolean subject is not turned into "true".
    with pytest.raises(CloudEventValidationError):
        outgoing_request(target_from("http://x/h", f"mode: {mode}\n"), {**EVENT, "subject": True})


@pytest.mark.parametrize(("status", "text"), [(204, None), (200, '{"ok": true}'), (500, "busy")])
async def test_a_short_answer_read_whole_leaves_the_connection_for_the_next_event(
    receiver: Receiver, client: HttpTargetClient, status: int, text: str | None
) -> None:
    peers: list[Any] = []

    async def answer(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.append(request.transport.get_extra_info("peername"))
        return web.Response(status=status, text=text)

    receiver.respond = answer
    outcomes = [await client.deliver(target_from(receiver.url), EVENT) for _ in range(3)]
    assert [outcome.status for outcome in outcomes] == [status] * 3
    assert len(set(peers)) == 1  # one connection for the three


async def test_a_delivery_s_timeout_counts_from_its_request_slot_not_from_the_queue_before_it(
    receiver: Receiver, client: HttpTargetClient
) -> None:
    # Ten rounds of requests to one host, each answered in 0.25 s: the last round waits 2.25 s for a slot, longer
    # than the timeout, and still has the whole timeout for its own request. (The timeout is 8 times an answer's
    # time: a loaded CI machine once took over a second for one with 4 times.)
    async def slowly(_request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.25)
        return web.Response(status=204)

    receiver.respond = slowly
    target = target_from(receiver.url, "timeout_ms: 2000\n")
    events = [{**EVENT, "id": f"evt-{n}"} for n in range(10 * MAX_CONNECTIONS_PER_HOST)]
    outcomes = await asyncio.gather(*(client.deliver(target, event) for event in events))
    assert [outcome.error for outcome in outcomes if not outcome.ok] == []
    assert len(receiver.received) == len(events)
