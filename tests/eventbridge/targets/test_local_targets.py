"""Rule targets inside mqgate, through a real `mqgate serve`: an MQTT topic (a paho subscriber gets the command with
its QoS, CloudEvents attributes as MQTT 5 user properties, and a later subscriber gets it retained), another bus
(whose rule delivers the event unchanged), and an event that cannot be published (dead-lettered with the reason).
The core-topic target is tested with the official RocketMQ client in tests/proxy/test_every_door.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

WAIT_S = 60.0

RULES = """
rules:
  - name: device-commands
    pattern: {{type: [device.alert]}}
    targets:
      - id: to-device
        type: mqtt
        topic: "devices/${{$.data.device}}/cmd"
        qos: 1
        retain: true
        transform:
          kind: TEMPLATE
          variables: {{c: $.data.command}}
          template: '{{"cmd": "{{{{ c }}}}"}}'
  - name: page-ops
    pattern: {{type: [ops.page]}}
    targets:
      - {{id: forward, type: bus, bus: ops}}
  - name: ops-pager
    bus: ops
    pattern: {{source: [monitor]}}
    targets:
      - {{id: pager, type: http, url: '{url}', mode: structured}}
"""


@pytest.fixture
def serve(tmp_path: Path, target: TargetServer) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "targets.yaml").write_text(RULES.format(url=target.url))
    process = ServeProcess(tmp_path / "data", "--log-level", "WARNING")
    yield process
    assert process.stop() == 0


def event(event_id: str, event_type: str, data: dict[str, Any], source: str = "monitor") -> dict[str, Any]:
    return {"specversion": "1.0", "id": event_id, "source": source, "type": event_type, "data": data}


async def put(serve: ServeProcess, events: list[dict[str, Any]], bus: str = "default") -> None:
    headers = {"Content-Type": "application/cloudevents-batch+json"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{serve.http_url}/buses/{bus}/events", data=json.dumps(events), headers=headers) as response,
    ):
        answer = await response.json()
        assert response.status == 200 and answer["FailedEntryCount"] == 0, answer


class Subscriber:
    """A paho MQTT 5 client subscribed to one filter, collecting what arrives."""

    def __init__(self, serve: ServeProcess, client_id: str, topic_filter: str) -> None:
        host, port = serve.ready["mqtt"].rsplit(":", 1)
        self.messages: list[paho.MQTTMessage] = []
        self.arrived = threading.Event()
        subscribed = threading.Event()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect(host, int(port))
        self.client.loop_start()
        self.client.subscribe(topic_filter, qos=2)
        assert subscribed.wait(WAIT_S)

    def _on_message(self, _client: paho.Client, _userdata: object, message: paho.MQTTMessage) -> None:
        self.messages.append(message)
        self.arrived.set()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


async def test_an_mqtt_target_sends_a_command_with_its_qos_attributes_and_retain_flag(serve: ServeProcess) -> None:
    device = await asyncio.to_thread(Subscriber, serve, "device-d7", "devices/+/cmd")
    try:
        await put(serve, [event("alert-1", "device.alert", {"device": "d7", "command": "reboot"})])
        assert await asyncio.to_thread(device.arrived.wait, WAIT_S)
    finally:
        device.close()
    (message,) = device.messages
    assert message.topic == "devices/d7/cmd"
    assert json.loads(message.payload) == {"cmd": "reboot"}
    assert message.qos == 1  # the target's QoS; the subscription allowed 2
    assert not message.retain  # a live subscriber gets it as a new message ([MQTT-3.3.1-9])
    attributes = dict(message.properties.UserProperty)
    assert attributes["id"] == "alert-1"
    assert attributes["type"] == "device.alert"
    assert attributes["source"] == "monitor"
    assert attributes["specversion"] == "1.0"
    assert message.properties.ContentType == "application/json"

    later = await asyncio.to_thread(Subscriber, serve, "device-d7-again", "devices/d7/cmd")
    try:
        assert await asyncio.to_thread(later.arrived.wait, WAIT_S)
    finally:
        later.close()
    (retained,) = later.messages
    assert retained.retain
    assert json.loads(retained.payload) == {"cmd": "reboot"}


async def test_a_bus_target_puts_the_event_unchanged_where_the_other_bus_s_rules_deliver_it(
    serve: ServeProcess, target: TargetServer
) -> None:
    await put(serve, [event("page-1", "ops.page", {"text": "disk full on db-2"})])
    await asyncio.wait_for(target.wait_for(1), WAIT_S)
    (delivery,) = target.received
    attributes = delivery.attributes
    assert (attributes["id"], attributes["type"], attributes["source"]) == ("page-1", "ops.page", "monitor")
    forwarded = delivery.data  # the CloudEvent's data: the whole event the ops bus matched (no transform)
    assert (forwarded["id"], forwarded["data"]) == ("page-1", {"text": "disk full on db-2"})


async def test_an_event_whose_topic_cannot_be_rendered_is_dead_lettered_with_the_reason(serve: ServeProcess) -> None:
    await put(serve, [event("alert-2", "device.alert", {"command": "reboot"})])  # no device: no topic
    async with aiohttp.ClientSession() as http:
        for _ in range(int(WAIT_S * 10)):
            async with http.get(f"{serve.http_url}/dead-letters/%25EVENTBUS-DLQ%25default") as response:
                page = await response.json()
            if response.status == 200 and page["entries"]:
                break
            await asyncio.sleep(0.1)
    (letter,) = page["entries"]
    assert letter["id"] == "alert-2"
    assert (letter["rule"], letter["target"]) == ("device-commands", "to-device")
    assert letter["attempts"] == 1  # a render error is not retried
    assert "$.data.device" in letter["error"] and "matched nothing" in letter["error"]
