"""One store for every door: what paho-mqtt publishes, the official RocketMQ client receives (with its MQTT topic and
user properties); what the official RocketMQ producer sends, an MQTT subscriber and an EventBridge rule's HTTP
target get; what an EventBridge rule sends to a core topic, the official client receives. One `mqgate serve`, real
clients on each side."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer

from tests.eventbridge.target_server import TargetServer
from tests.proxy.serving import WAIT_S, client_config, receive_all, start
from tests.serve_process import ServeProcess, mqtt_client

pytestmark = pytest.mark.slow

RULES = """
sources:
  - name: orders-in
    topic: orders
rules:
  - name: big-orders
    pattern: {{data: {{amount: [{{numeric: [">", 100]}}]}}}}
    targets:
      - id: books
        type: http
        url: {url}
        mode: binary
  - name: audit-orders
    pattern: {{type: [order.placed]}}
    targets:
      - {{id: audit, type: topic, topic: audit-log, tag: orders}}
"""


@pytest.fixture
def serve(tmp_path: Path, target: TargetServer) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "orders.yaml").write_text(RULES.format(url=target.url))
    process = start(tmp_path / "data")
    yield process
    assert process.stop() == 0


def test_an_mqtt_publish_reaches_a_rocketmq_simple_consumer(serve: ServeProcess) -> None:
    config = client_config(serve)
    consumer = SimpleConsumer(config, "from-mqtt", {"sensors": FilterExpression()}, await_duration=5)
    consumer.startup()
    publisher = mqtt_client(serve, "thermo-1", v5=True)
    try:
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = [("unit", "C"), ("site", "north")]
        publisher.publish("sensors/room1/temp", b"21.5", qos=1, properties=properties).wait_for_publish(WAIT_S)
        got = receive_all(consumer, 1)
    finally:
        publisher.disconnect()
        publisher.loop_stop()
        consumer.shutdown()
    assert [m.body for m in got] == [b"21.5"]
    (m,) = got
    assert m.topic == "sensors"
    assert m.properties["MQTT_TOPIC"] == "sensors/room1/temp"
    assert json.loads(m.properties["MQTT_USER"]) == [["unit", "C"], ["site", "north"]]
    assert m.properties["MQTT_CLIENT_ID"] == "thermo-1"


async def test_a_rocketmq_message_reaches_an_mqtt_subscriber_and_an_eventbridge_target(
    serve: ServeProcess, target: TargetServer
) -> None:
    arrived: list[paho.MQTTMessage] = []
    subscribed = threading.Event()
    got_it = threading.Event()
    subscriber = mqtt_client(serve, "dashboard", v5=True)
    subscriber.on_subscribe = lambda *_: subscribed.set()

    def on_message(_client: paho.Client, _userdata: object, message: paho.MQTTMessage) -> None:
        arrived.append(message)
        got_it.set()

    subscriber.on_message = on_message
    subscriber.subscribe("orders/#", qos=1)
    assert await asyncio.to_thread(subscribed.wait, WAIT_S)

    def send() -> str:
        producer = Producer(client_config(serve), ("orders",))
        producer.startup()
        try:
            m = Message()
            m.topic = "orders"
            m.body = b'{"amount": 250, "item": "lamp"}'
            m.keys = "order-42"
            m.tag = "EU"
            m.add_property("MQTT_TOPIC", "orders/eu/42")
            return producer.send(m).message_id
        finally:
            producer.shutdown()

    message_id = await asyncio.to_thread(send)
    try:
        assert await asyncio.to_thread(got_it.wait, WAIT_S)
        await asyncio.wait_for(target.wait_for(1), WAIT_S)
    finally:
        subscriber.disconnect()
        subscriber.loop_stop()
    assert [(m.topic, m.payload) for m in arrived] == [("orders/eu/42", b'{"amount": 250, "item": "lamp"}')]
    (delivery,) = target.received
    event = delivery.data  # an HTTP target gets the whole event unless a transform says otherwise
    assert event["data"] == {"amount": 250, "item": "lamp"}
    assert event["id"] == message_id
    # It carries an MQTT topic, so the source reads it as an MQTT message (eventbridge/source_task.py).
    assert event["source"] == "mqgate/mqtt"
    assert event["subject"] == "orders/eu/42"


async def test_an_eventbridge_topic_target_reaches_a_rocketmq_simple_consumer(serve: ServeProcess) -> None:
    consumer = SimpleConsumer(client_config(serve), "auditors", {"audit-log": FilterExpression("orders")}, 5)
    await asyncio.to_thread(consumer.startup)
    try:
        event = {"specversion": "1.0", "id": "ord-7", "source": "shop", "type": "order.placed", "data": {"n": 7}}
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{serve.http_url}/buses/default/events",
                data=json.dumps(event),
                headers={"Content-Type": "application/cloudevents+json"},
            ) as response,
        ):
            assert response.status == 200 and (await response.json())["FailedEntryCount"] == 0
        got = await asyncio.to_thread(receive_all, consumer, 1)
    finally:
        await asyncio.to_thread(consumer.shutdown)
    (m,) = got
    # CloudEvents' Kafka binding, binary mode: the data (here the whole event, no transform) as the body, the
    # attributes as ce_* properties; keyed by the event id, tagged as the target says.
    body = json.loads(m.body)
    assert (body["id"], body["type"], body["data"]) == ("ord-7", "order.placed", {"n": 7})
    assert (m.topic, m.tag, list(m.keys)) == ("audit-log", "orders", ["ord-7"])
    assert m.properties["ce_id"] == "ord-7"
    assert m.properties["ce_type"] == "order.placed"
    assert m.properties["ce_source"] == "shop"
    assert m.properties["ce_specversion"] == "1.0"
    assert m.properties["content-type"] == "application/json"
