"""The MQTT gateway's coordinator and parts without a socket: a real broker, a real `MqttConnection`, and a link
that keeps what would be written (`BufferLink`, the transport side of listener.py reduced to a buffer). MQTT 5
packets go in as bytes through `MqttGateway.handle`; what comes out is decoded with mqtt5."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mqtt5
import pytest

from core import Broker
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.gateway import MqttGateway
from mqtt_bridge.listener import DequeOnDemand, Wakeup
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sessions.session import Session
from mqtt_bridge.wire.protocol import Limits, MqttConnection, State


class BufferLink:
    """One client connection whose transport is a buffer: what a TCP link would write is kept in `written`."""

    def __init__(self, gateway: MqttGateway) -> None:
        self.gateway = gateway
        self.conn = MqttConnection(Limits(), gateway.traffic)
        self.peer = "test:0"
        self.client_id = ""
        self.username: str | None = None
        self.session: Session | None = None
        self.taken_over = False
        self.writable = True
        self.retained: DequeOnDemand[tuple[MqttMessage, int, int | None]] = DequeOnDemand()
        self.woken = Wakeup()
        self.written = bytearray()
        self.closed = False
        self.ended_with_will: bool | None = None
        self._delivery: asyncio.Task[None] | None = None

    async def send(self, *packets: mqtt5.Packet) -> None:
        events = self.conn.receive_data(b"".join(packet.write() for packet in packets))
        await self.gateway.handle(self, events)
        self.flush()

    def packets(self) -> list[Any]:
        data = bytes(self.written)
        self.written.clear()
        found = []
        while data:
            packet, size = mqtt5.read(data)
            found.append(packet)
            data = data[size:]
        return found

    def wake(self) -> None:
        self.woken.set()

    def flush(self) -> None:
        self.written += self.conn.data_to_send()

    def close(self, reason: mqtt5.DisconnectReasonCode) -> None:
        if self.conn.state is State.CONNECTED:
            self.conn.disconnect(reason)
            self.flush()
        self._end(publish_will=reason != mqtt5.DisconnectReasonCode.SESSION_TAKEN_OVER)

    def connect_answered(self) -> None:
        if self.conn.state is State.CLOSED:
            self.flush()
            self._end(publish_will=False)

    def client_disconnected(self, publish_will: bool) -> None:
        self._end(publish_will)

    def _end(self, publish_will: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.ended_with_will = publish_will
        if self.session is not None and not self.taken_over:
            self.gateway.disconnected(self, publish_will)
        self.stop_delivery()

    def start_delivery(self) -> None:
        self._delivery = asyncio.get_running_loop().create_task(self.gateway.deliver(self))

    def stop_delivery(self) -> None:
        if self._delivery is not None and self._delivery is not asyncio.current_task():
            self._delivery.cancel()
        self._delivery = None


@pytest.fixture
async def gateway(make_broker, tmp_path: Path):
    broker: Broker = await make_broker()
    gateway = MqttGateway(broker, MqttConfig(port=0, sys_interval=0), tmp_path / "mqtt")
    await gateway.start()
    yield gateway
    await gateway.close()


async def connected(gateway: MqttGateway, client_id: str, **connect: Any) -> BufferLink:
    link = BufferLink(gateway)
    await link.send(mqtt5.ConnectPacket(client_id, **connect))
    [connack] = link.packets()
    assert isinstance(connack, mqtt5.ConnAckPacket) and connack.reason_code == mqtt5.ConnAckReasonCode.SUCCESS
    return link


async def received(link: BufferLink, count: int) -> list[Any]:
    """Wait until `count` PUBLISHes reached the link's buffer (the delivery loop runs as a task)."""
    found: list[Any] = []
    for _ in range(200):
        found += [packet for packet in link.packets() if isinstance(packet, mqtt5.PublishPacket)]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(found)} of {count} PUBLISHes arrived")


async def test_a_publish_reaches_a_subscriber_through_handle(gateway: MqttGateway):
    sub = await connected(gateway, "sub")
    await sub.send(mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("a/+", max_qos=mqtt5.QoS.AT_LEAST_ONCE)]))
    [suback] = sub.packets()
    assert suback.reason_codes == [mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE]
    pub = await connected(gateway, "pub")
    await pub.send(
        mqtt5.PublishPacket("a/1", b"one", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=7),
        mqtt5.PublishPacket("a/2", b"two", qos=mqtt5.QoS.AT_MOST_ONCE),
        mqtt5.PublishPacket("b/1", b"elsewhere", qos=mqtt5.QoS.AT_MOST_ONCE),
    )
    [puback] = pub.packets()  # one run stored, then acknowledged
    assert isinstance(puback, mqtt5.PubAckPacket) and puback.packet_id == 7
    got = await received(sub, 2)
    assert [(p.topic, p.payload, int(p.qos)) for p in got] == [("a/1", b"one", 1), ("a/2", b"two", 0)]
    assert gateway.counters.published == 3 and gateway.counters.delivered == 2
    # The PUBACK moves the subscriber's position: nothing stays in flight.
    await sub.send(mqtt5.PubAckPacket(got[0].packet_id))
    assert not sub.session.inflight


async def test_a_refused_connect_ends_the_link(make_broker, tmp_path: Path):
    broker = await make_broker()
    gateway = MqttGateway(broker, MqttConfig(port=0, sys_interval=0, allow_anonymous=False), tmp_path / "mqtt")
    await gateway.start()
    try:
        link = BufferLink(gateway)
        await link.send(mqtt5.ConnectPacket("nobody"))
        [connack] = link.packets()
        assert connack.reason_code == mqtt5.ConnAckReasonCode.NOT_AUTHORIZED
        assert link.closed and link.ended_with_will is False and not gateway.sessions.links
    finally:
        await gateway.close()


async def test_a_retained_message_goes_to_a_new_subscription(gateway: MqttGateway):
    pub = await connected(gateway, "pub")
    await pub.send(mqtt5.PublishPacket("r/1", b"kept", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=1, retain=True))
    assert isinstance(pub.packets()[0], mqtt5.PubAckPacket)
    assert gateway.retained.entries["r/1"].payload == b"kept"
    sub = await connected(gateway, "sub")
    await sub.send(mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("r/#", max_qos=mqtt5.QoS.AT_MOST_ONCE)]))
    [message] = await received(sub, 1)
    assert (message.topic, message.payload, message.retain) == ("r/1", b"kept", True)


async def test_shared_subscribers_take_turns_and_a_gone_member_gives_back(gateway: MqttGateway):
    members = [await connected(gateway, f"m{n}") for n in range(2)]
    for member in members:
        shared = mqtt5.TopicFilter("$share/g/s/#", max_qos=mqtt5.QoS.AT_LEAST_ONCE)
        await member.send(mqtt5.SubscribePacket(1, [shared]))
        member.packets()
    [group] = gateway.shared.groups.values()
    assert group.members == {"m0", "m1"} and gateway.shared.connected_members(group) == 2
    pub = await connected(gateway, "pub")
    await pub.send(*(mqtt5.PublishPacket(f"s/{n}", b"x", qos=mqtt5.QoS.AT_MOST_ONCE) for n in range(10)))
    await asyncio.sleep(0.3)
    got = [len([p for p in member.packets() if isinstance(p, mqtt5.PublishPacket)]) for member in members]
    assert sum(got) == 10  # each message to one member
    members[0].close(mqtt5.DisconnectReasonCode.NORMAL_DISCONNECTION)
    assert gateway.shared.connected_members(group) == 1


async def test_a_clean_session_ends_with_its_subscriptions_and_light_queues(gateway: MqttGateway):
    link = await connected(gateway, "short", clean_start=True)
    await link.send(mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("gone/#", max_qos=mqtt5.QoS.AT_MOST_ONCE)]))
    link.packets()
    assert gateway.subscriptions.queues_for("gone/1")
    await link.send(mqtt5.DisconnectPacket())
    assert link.closed and link.ended_with_will is False
    assert "short" not in gateway.sessions.sessions and not gateway.subscriptions.queues_for("gone/1")
