"""EventBridge end to end in `mqgate serve`: MQTT -> source -> bus -> rule -> HTTP target (paho publishes, a real
aiohttp target parses with the cloudevents SDK), PutEvents on the HTTP port, the pattern test endpoint."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

RULES = """
sources:
  - name: plant-temps
    mqtt: plant/+/temp
schemas:
  - source: mqgate/mqtt/*
    type: mqgate.mqtt.message
    schema: {{type: object, required: [temp], properties: {{temp: {{type: number}}}}}}
  - source: mqgate/http
    type: order
    schema: {{type: object, required: [amount]}}
rules:
  - name: cold
    pattern:
      type: [mqgate.mqtt.message]
      data: {{temp: [{{numeric: ["<", 5]}}]}}
    targets:
      - id: pager
        type: http
        url: {url}
        mode: structured
        transform: {{kind: TEMPLATE, variables: {{room: $.subject, t: $.data.temp}},
                     template: '{{"room": {{{{ room | json }}}}, "t": {{{{ t }}}}}}', output: json}}
  - name: all-http
    pattern: {{source: [mqgate/http]}}
    targets:
      - id: archive
        type: http
        url: {url}
"""


@pytest.fixture
def serve(tmp_path: Path, target: TargetServer) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "plant.yaml").write_text(RULES.format(url=target.url))
    process = ServeProcess(tmp_path / "data")
    yield process
    assert process.stop() == 0


def publish(serve: ServeProcess, messages: list[tuple[str, bytes]]) -> None:
    host, port = serve.ready["mqtt"].rsplit(":", 1)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="sensor-7", protocol=paho.MQTTv311)
    client.connect(host, int(port))
    client.loop_start()
    try:
        for topic, payload in messages:
            client.publish(topic, payload, qos=1).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


async def test_mqtt_to_rule_to_http(serve: ServeProcess, target: TargetServer) -> None:
    await asyncio.to_thread(
        publish,
        serve,
        [
            ("plant/r1/temp", b'{"temp": 3}'),
            ("plant/r2/temp", b'{"temp": 12}'),
            ("plant/r3/humidity", b'{"temp": 1}'),  # not the source's filter
            ("plant/r4/temp", b"not json"),
            ("plant/r5/temp", b'{"temp": -2.5}'),
            ("plant/r6/temp", b'{"temp": "freezing"}'),  # breaks the schema
        ],
    )
    await target.wait_for(2)
    await asyncio.sleep(0.5)
    assert [r.data for r in target.received] == [
        {"room": "plant/r1/temp", "t": 3},
        {"room": "plant/r5/temp", "t": -2.5},
    ]
    first = target.received[0]
    assert first.attributes["source"] == "mqgate/mqtt/sensor-7"
    assert first.attributes["type"] == "mqgate.mqtt.message"
    assert first.attributes["subject"] == "plant/r1/temp"
    assert first.attributes["mqttqos"] == 1
    assert abs(first.attributes["time"].timestamp() - time.time()) < 120  # when the gateway got it, not 1970
    assert first.headers["Content-Type"].startswith("application/cloudevents+json")
    async with aiohttp.ClientSession() as http, http.get(f"{serve.http_url}/rules/default/cold") as response:
        rule = await response.json()
        async with http.get(f"{serve.http_url}/sources") as response:
            (source,) = await response.json()
    assert rule["targets"][0]["delivered"] == 2
    assert rule["targets"][0]["state"] == "RUNNING"
    # "not json" goes through as data_base64 (the schema sees a string and refuses it), so does "freezing".
    assert (source["name"], source["mqtt"], source["forwarded"], source["refused"]) == (
        "plant-temps",
        "plant/+/temp",
        3,
        2,
    )


async def test_put_events_in_every_mode_answers_per_entry(serve: ServeProcess, target: TargetServer) -> None:
    url = f"{serve.http_url}/buses/default/events"
    good = {"specversion": "1.0", "id": "b1", "source": "mqgate/http", "type": "t", "data": {"k": 1}}
    async with aiohttp.ClientSession() as http:
        binary = {"ce-specversion": "1.0", "ce-id": "a1", "ce-source": "mqgate/http", "ce-type": "t",
                  "Content-Type": "application/json"}  # fmt: skip
        async with http.post(url, data=b'{"x": 1}', headers=binary) as response:
            assert response.status == 200
            assert await response.json() == {"FailedEntryCount": 0, "Entries": [{"EventId": "a1"}]}
        structured = {"Content-Type": "application/cloudevents+json"}
        async with http.post(url, data=json.dumps(good), headers=structured) as response:
            assert (await response.json())["Entries"] == [{"EventId": "b1"}]
        batch: list[Any] = [{**good, "id": "c1"}, {"id": "c2", "source": "s"}, {**good, "id": "c3"}]
        headers = {"Content-Type": "application/cloudevents-batch+json"}
        async with http.post(url, data=json.dumps(batch), headers=headers) as response:
            answer = await response.json()
        assert answer["FailedEntryCount"] == 1
        assert answer["Entries"][0] == {"EventId": "c1"} and answer["Entries"][2] == {"EventId": "c3"}
        assert answer["Entries"][1]["ErrorCode"] and "entry 1" in answer["Entries"][1]["ErrorMessage"]
        order = {**good, "id": "o1", "type": "order", "data": {"total": 3}}
        async with http.post(url, data=json.dumps([order, {**order, "id": "o2", "data": {"amount": 3}}]),
                             headers=headers) as response:  # fmt: skip
            answer = await response.json()
        assert answer["FailedEntryCount"] == 1
        assert answer["Entries"][0]["ErrorCode"] == "SchemaValidationFailed"
        assert "'amount' is a required property" in answer["Entries"][0]["ErrorMessage"]
        assert answer["Entries"][1] == {"EventId": "o2"}
        # A lone surrogate escape cannot be stored: refused as that entry's error, and the server goes on.
        lone = b'{"specversion":"1.0","id":"u1","source":"mqgate/http","type":"t","data":"\\ud800"}'
        async with http.post(url, data=lone, headers=structured) as response:
            answer = await response.json()
        assert answer["FailedEntryCount"] == 1 and answer["Entries"][0]["ErrorCode"] == "MalformedEvent"
        assert "lone UTF-16 surrogate" in answer["Entries"][0]["ErrorMessage"]
        async with http.post(url, data=b"[", headers=headers) as response:
            assert response.status == 400
            assert "message" in await response.json()
        async with http.post(f"{serve.http_url}/buses/nope/events", data=json.dumps(good), headers=structured) as r:
            assert r.status == 404
    await target.wait_for(5)
    await asyncio.sleep(0.3)
    assert sorted(target.ids()) == ["a1", "b1", "c1", "c3", "o2"]
    by_id = {r.attributes["id"]: r for r in target.received}
    assert by_id["a1"].data["data"] == {"x": 1}  # ORIGINAL: the stored event is the data


async def test_test_event_pattern_endpoint(serve: ServeProcess) -> None:
    url = f"{serve.http_url}/test-event-pattern"
    event = {"source": "x", "detail": {"ip": "10.1.2.3"}}
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={"pattern": {"detail": {"ip": [{"cidr": "10.0.0.0/8"}]}}, "event": event}) as r:
            assert await r.json() == {"result": True}
        async with http.post(url, json={"pattern": {"detail": {"ip": [{"cidr": "11.0.0.0/8"}]}}, "event": event}) as r:
            assert await r.json() == {"result": False}
        async with http.post(url, json={"pattern": {"detail": {"ip": [{"cidr": "300.0.0.0/8"}]}}, "event": event}) as r:
            assert r.status == 400
            assert "detail.ip" in (await r.json())["message"]
