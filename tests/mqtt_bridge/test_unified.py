"""One message model: core producers reach MQTT subscribers, MQTT publishes reach core consumer groups."""

from __future__ import annotations

import asyncio

from core.client import ConsumeFromWhere, Producer, PullConsumer
from core.message_queue import MessageQueue
from core.results import PullStatus
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.gateway import MqttGateway
from mqtt_bridge.listener import start_tcp
from mqtt_bridge.message_mapping import PROPERTY_CLIENT, PROPERTY_TOPIC

from .conftest import Client


class _Address:
    def __init__(self, port: int) -> None:
        self.host, self.port = "127.0.0.1", port


async def test_core_and_mqtt_see_each_other(make_broker, tmp_path):
    broker = await make_broker()
    gateway = MqttGateway(broker, MqttConfig(port=0), tmp_path / "mqtt")
    await gateway.start()
    server = await start_tcp(gateway, "127.0.0.1", 0)
    address = _Address(server.sockets[0].getsockname()[1])
    try:
        sub = await asyncio.to_thread(Client, address, "sub")
        await asyncio.to_thread(sub.subscribe, "sensors/#", 1)
        # A core producer with the MQTT topic property reaches the MQTT subscriber.
        await Producer(broker).send("sensors", b"from-core", properties={PROPERTY_TOPIC: "sensors/core/1"})
        [got] = await asyncio.to_thread(sub.receive, 1)
        assert (got.topic, got.payload, got.qos) == ("sensors/core/1", b"from-core", 1)
        # An MQTT publish is a core message in topic `sensors`, consumable by a core group.
        pub = await asyncio.to_thread(Client, address, "pub")
        await asyncio.to_thread(pub.publish, "sensors/dev9/temp", b"21.5", 1)
        consumer = PullConsumer(broker, "analytics", consume_from=ConsumeFromWhere.FIRST_OFFSET)
        # The PUBACK says stored; the dispatcher makes it visible to consumers a moment later
        # (docs/store.md: Visibility).
        for _ in range(100):
            found = []
            for queue_id in range(broker.topic_config("sensors").read_queue_nums):
                queue = MessageQueue("sensors", broker.config.broker_name, queue_id)
                result = await consumer.pull(queue, 0, long_poll_ms=0)
                if result.status is PullStatus.FOUND:
                    found += result.messages
            mqtt_messages = [m for m in found if m.properties.get(PROPERTY_CLIENT) == "pub"]
            if mqtt_messages:
                break
            await asyncio.sleep(0.05)
        assert [(m.body, m.properties[PROPERTY_TOPIC]) for m in mqtt_messages] == [(b"21.5", "sensors/dev9/temp")]
        await asyncio.to_thread(sub.disconnect)
        await asyncio.to_thread(pub.disconnect)
    finally:
        server.close()
        await gateway.close()
