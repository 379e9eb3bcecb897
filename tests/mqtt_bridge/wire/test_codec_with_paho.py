"""The codecs against paho-mqtt's own encoder and decoder: a whole paho client session, 3.1.1 and 5.0."""

import queue
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mqtt5
import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from mqtt_bridge.wire.codec import (
    protocol_level,
)
from mqtt_bridge.wire.codec_v5 import V5Codec
from mqtt_bridge.wire.codec_v311 import V311Codec
from mqtt_bridge.wire.framing import FrameBuffer
from tests.mqtt_bridge.wire.frames import QoS

# --- against paho-mqtt's own encoder and decoder -----------------------------------------------------------------


class OneClientServer:
    """A listening socket on port 0 that speaks to one client through a codec, packet by packet."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.connection: socket.socket | None = None
        self.frames = FrameBuffer()
        self.codec: V311Codec | V5Codec | None = None
        self.pings = 0

    def accept(self) -> mqtt5.ConnectPacket:
        self.connection, _ = self.listener.accept()
        self.connection.settimeout(10)
        first = self._next_frame()
        self.codec = V5Codec() if protocol_level(first) == 5 else V311Codec()
        packet = self.codec.decode(first)
        assert isinstance(packet, mqtt5.ConnectPacket)
        return packet

    def expect(self, kind: type) -> Any:
        """The next packet, which must be a `kind`; PINGREQs in between are answered and counted."""
        assert self.codec is not None
        while True:
            packet = self.codec.decode(self._next_frame())
            if isinstance(packet, mqtt5.PingReqPacket) and kind is not mqtt5.PingReqPacket:
                self.pings += 1
                self.send(mqtt5.PingRespPacket())
                continue
            assert isinstance(packet, kind), packet
            return packet

    def send(self, packet: mqtt5.Packet) -> None:
        assert self.codec is not None and self.connection is not None
        self.connection.sendall(self.codec.encode(packet))

    def _next_frame(self) -> memoryview:
        assert self.connection is not None
        while (received := self.frames.next_frame()) is None:
            data = self.connection.recv(65_536)
            assert data, "the client closed the connection"
            self.frames.feed(data)
        return received

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.listener.close()


@contextmanager
def paho_session(protocol: int, **connect: Any) -> Iterator[tuple[paho.Client, OneClientServer, Callable[[], Any]]]:
    server = OneClientServer()
    events: queue.Queue[Any] = queue.Queue()
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="dev-1", protocol=protocol)
    client.on_connect = lambda c, u, flags, rc, props: events.put(("connect", flags.session_present, rc.value))
    client.on_subscribe = lambda c, u, mid, codes, props: events.put(("subscribe", mid, [code.value for code in codes]))
    client.on_unsubscribe = lambda c, u, mid, codes, props: events.put(("unsubscribe", mid))
    client.on_publish = lambda c, u, mid, rc, props: events.put(("publish", mid))
    client.on_message = lambda c, u, message: events.put(
        ("message", message.topic, message.payload, message.qos, message.retain)
    )
    client.username_pw_set("alice", "s3cret")
    client.will_set("dev/1/status", b"offline", qos=1, retain=True)
    try:
        # The listener's backlog completes the TCP handshake, so connect() returns before the server accepts.
        client.connect("127.0.0.1", server.port, **connect)
        yield client, server, lambda: events.get(timeout=10)
    finally:
        client.loop_stop()
        server.close()


@pytest.mark.parametrize("protocol", [paho.MQTTv311, paho.MQTTv5], ids=["v311", "v5"])
def test_a_paho_client_session(protocol):
    v5 = protocol == paho.MQTTv5
    with paho_session(protocol, keepalive=1) as (client, server, event):
        connect = server.accept()
        assert server.codec is not None and server.codec.protocol_level == (5 if v5 else 4)
        assert (connect.client_id, connect.username, connect.password, connect.keep_alive) == (
            "dev-1",
            "alice",
            b"s3cret",
            1,
        )
        assert connect.will == mqtt5.Will("dev/1/status", payload=b"offline", qos=QoS.AT_LEAST_ONCE, retain=True)
        client.loop_start()
        server.send(mqtt5.ConnAckPacket())
        assert event() == ("connect", False, 0)

        refused = mqtt5.SubAckReasonCode.NOT_AUTHORIZED
        _, mid = client.subscribe([("a/+", 1), ("b/#", 2)])
        subscribe = server.expect(mqtt5.SubscribePacket)
        assert [(f.pattern, int(f.max_qos)) for f in subscribe.topic_filters] == [("a/+", 1), ("b/#", 2)]
        server.send(
            mqtt5.SubAckPacket(subscribe.packet_id, [mqtt5.SubAckReasonCode.GRANTED_QOS_AT_LEAST_ONCE, refused])
        )
        assert event() == ("subscribe", mid, [1, 0x87 if v5 else 0x80])

        properties = None
        if v5:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = [("unit", "C")]
            properties.ContentType = "text/plain"
        client.publish("a/b", b"21.5", qos=1, properties=properties)
        publish = server.expect(mqtt5.PublishPacket)
        assert (publish.topic, publish.payload, int(publish.qos), publish.packet_id is not None) == (
            "a/b",
            b"21.5",
            1,
            True,
        )
        if v5:
            assert (publish.user_properties, publish.content_type) == ([("unit", "C")], "text/plain")
        server.send(mqtt5.PubAckPacket(publish.packet_id))
        assert event()[0] == "publish"

        client.publish("a/c", b"", qos=2, retain=True)
        publish = server.expect(mqtt5.PublishPacket)
        assert (int(publish.qos), publish.retain, publish.payload) == (2, True, b"")
        server.send(mqtt5.PubRecPacket(publish.packet_id))
        assert server.expect(mqtt5.PubRelPacket).packet_id == publish.packet_id
        server.send(mqtt5.PubCompPacket(publish.packet_id))
        assert event()[0] == "publish"

        server.send(mqtt5.PublishPacket("a/x", b"to you", qos=QoS.AT_LEAST_ONCE, packet_id=5))
        assert event() == ("message", "a/x", b"to you", 1, False)
        assert server.expect(mqtt5.PubAckPacket).packet_id == 5
        server.send(mqtt5.PublishPacket("b/y", b"twice", qos=QoS.EXACTLY_ONCE, packet_id=6, retain=True))
        assert server.expect(mqtt5.PubRecPacket).packet_id == 6
        server.send(mqtt5.PubRelPacket(6))
        assert server.expect(mqtt5.PubCompPacket).packet_id == 6
        assert event() == ("message", "b/y", b"twice", 2, True)

        _, mid = client.unsubscribe("a/+")
        unsubscribe = server.expect(mqtt5.UnsubscribePacket)
        assert unsubscribe.patterns == ["a/+"]
        server.send(mqtt5.UnsubAckPacket(unsubscribe.packet_id, [mqtt5.UnsubAckReasonCode.SUCCESS]))
        assert event() == ("unsubscribe", mid)

        if not server.pings:  # keep alive 1 s: paho pings when idle
            server.expect(mqtt5.PingReqPacket)
            server.send(mqtt5.PingRespPacket())
        client.disconnect()
        assert isinstance(server.expect(mqtt5.DisconnectPacket), mqtt5.DisconnectPacket)
