"""One store for every door, RocketMQ 4 clients among them: what paho-mqtt publishes, the C++ client's push consumer
receives with its MQTT topic; what the C++ producer sends, an MQTT subscriber, the official RocketMQ 5 client (over
gRPC) and an EventBridge rule's HTTP target get. One `mqgate serve`, real clients on each side."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from rocketmq import FilterExpression, SimpleConsumer

from tests.broker_remoting import cpp_clients
from tests.eventbridge.target_server import TargetServer, target  # noqa: F401 (the fixture)
from tests.proxy.serving import WAIT_S, client_config, receive_all, start
from tests.serve_process import ServeProcess, mqtt_client

pytestmark = pytest.mark.slow

RULES = """
sources:
  - name: payments-in
    topic: payments
rules:
  - name: every-payment
    pattern: {{subject: [{{prefix: payments/}}]}}
    targets:
      - id: ledger
        type: http
        url: {url}
        mode: binary
"""


@pytest.fixture
def serve(tmp_path: Path, target: TargetServer) -> Iterator[ServeProcess]:  # noqa: F811
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "payments.yaml").write_text(RULES.format(url=target.url))
    process = start(tmp_path / "data")
    yield process
    assert process.stop() == 0


def namesrv_of(serve: ServeProcess) -> str:
    return f"127.0.0.1:{serve.ready['namesrv'].rpartition(':')[2]}"


def test_an_mqtt_publish_reaches_a_remoting_push_consumer(serve: ServeProcess) -> None:
    publisher = mqtt_client(serve, "meter-9")
    try:
        publisher.publish("meters/hall/kwh", b"17.25", qos=1).wait_for_publish(WAIT_S)
    finally:
        publisher.disconnect()
        publisher.loop_stop()
    # A new group reads a young queue from its start (docs/remoting.md): the message stored before it joined arrives.
    got = cpp_clients.run(
        namesrv_of(serve), "consume", "meters", "cg_meters", "--expect", 1, "--seconds", 60, "--property", "MQTT_TOPIC"
    )
    assert [(line["body"], line["topic"], line["properties"]) for line in got] == [
        ("17.25", "meters", {"MQTT_TOPIC": "meters/hall/kwh"})
    ]


async def test_a_remoting_producers_message_reaches_mqtt_grpc_and_an_eventbridge_target(
    serve: ServeProcess,
    target: TargetServer,  # noqa: F811
) -> None:
    arrived: list[paho.MQTTMessage] = []
    subscribed, got_it = threading.Event(), threading.Event()
    subscriber = mqtt_client(serve, "till")
    subscriber.on_subscribe = lambda *_: subscribed.set()

    def on_message(_client: paho.Client, _userdata: object, message: paho.MQTTMessage) -> None:
        arrived.append(message)
        got_it.set()

    subscriber.on_message = on_message
    subscriber.subscribe("payments/#", qos=1)
    assert await asyncio.to_thread(subscribed.wait, WAIT_S)
    grpc_consumer = SimpleConsumer(client_config(serve), "auditors", {"payments": FilterExpression()}, 5)
    await asyncio.to_thread(grpc_consumer.startup)
    try:
        sent = await asyncio.to_thread(
            cpp_clients.run, namesrv_of(serve), "send", "payments", "--body", '{"amount": 5}', "--set",
            "MQTT_TOPIC=payments/shop/1", "--keys", "pay",
        )  # fmt: skip
        assert sent[0]["status"] == 0
        assert await asyncio.to_thread(got_it.wait, WAIT_S)
        await asyncio.wait_for(target.wait_for(1), WAIT_S)
        got = await asyncio.to_thread(receive_all, grpc_consumer, 1)
    finally:
        subscriber.disconnect()
        subscriber.loop_stop()
        await asyncio.to_thread(grpc_consumer.shutdown)
    body = b'{"amount": 5}-0'
    assert [(m.topic, m.payload) for m in arrived] == [("payments/shop/1", body)]
    assert [(m.topic, m.body, list(m.keys)) for m in got] == [("payments", body, ["pay-0"])]
    (delivery,) = target.received
    assert delivery.data["subject"] == "payments/shop/1"  # read as the MQTT message its MQTT_TOPIC makes it
