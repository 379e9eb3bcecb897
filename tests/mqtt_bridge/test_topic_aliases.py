"""Topic aliases set by the server toward MQTT 5 clients, against `mqgate serve` (the bytes are checked in
test_protocol_limits.py and test_codec.py)."""

from __future__ import annotations

import itertools
import time

import mqtt5
import paho.mqtt.client as paho

from .conftest import Client, RawV5, Server, configured, connect_properties


class AliasResolver:
    """What a client does with the aliases of the PUBLISHes it gets (MQTT 5 section 3.3.2.3.4): a PUBLISH with a
    topic name and an alias sets the alias, one with an empty topic name uses it. paho 2.2 leaves this to us."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.aliases: dict[int, str] = {}
        self.reused = 0

    def topic(self, topic: str, alias: int | None) -> str:
        if alias is None:
            assert topic, "an empty topic name without an alias"
            return topic
        assert 1 <= alias <= self.maximum, f"alias {alias} past the Topic Alias Maximum {self.maximum}"
        if topic:
            self.aliases[alias] = topic
            return topic
        assert alias in self.aliases, f"alias {alias} used before it was set"
        self.reused += 1
        return self.aliases[alias]


def alias_of(message: paho.MQTTMessage) -> int | None:
    return getattr(message.properties, "TopicAlias", None)


def test_paho_gets_every_topic_right_across_more_topics_than_aliases(server: Server) -> None:
    sub = Client(server, "aliased", paho.MQTTv5, properties=connect_properties(TopicAliasMaximum=3))
    sub.subscribe("ta/#", 1)
    plain = Client(server, "plain", paho.MQTTv5)  # announces no Topic Alias Maximum: never gets an alias
    plain.subscribe("ta/#", 1)
    pub = Client(server, "pub", paho.MQTTv5)
    topics = [f"ta/building/{n}/temperature" for n in range(7)]
    sent = [(topic, b"%d" % index) for index, topic in zip(range(210), itertools.cycle(topics), strict=False)]
    for index, (topic, payload) in enumerate(sent):
        pub.paho.publish(topic, payload, qos=index % 2)  # QoS 0 from the shared encoding, QoS 1 encoded per client
    pub.publish("ta/end", b"end", qos=1)
    got = sub.receive(len(sent) + 1, timeout=30)
    resolver = AliasResolver(3)  # in the order received, as the client must
    resolved = [(resolver.topic(m.topic, alias_of(m)), m.payload) for m in got]
    # paho holds QoS 1 publishes past its window of 20 and sends QoS 0 ones at once, so the order across QoS
    # levels is paho's; each message must have its own topic.
    assert sorted(resolved) == sorted([*sent, ("ta/end", b"end")])
    aliased_topics = {m.topic for m in got if alias_of(m) is not None and m.topic}
    assert aliased_topics == set(topics[:3])  # the first three topics got the three aliases, the others never
    # Every PUBLISH on those after its first left the topic name out.
    assert resolver.reused == sum(1 for topic, _ in sent if topic in aliased_topics) - 3
    plain_got = plain.receive(len(sent) + 1, timeout=30)
    assert sorted((m.topic, m.payload) for m in plain_got) == sorted([*sent, ("ta/end", b"end")])
    assert all(alias_of(m) is None for m in plain_got)
    assert sub.disconnects.empty()


def test_server_topic_alias_maximum_0_sends_no_aliases(server_factory, tmp_path) -> None:
    server = configured(server_factory, tmp_path, "[mqtt]\nserver_topic_alias_maximum = 0\n")
    sub = Client(server, "sub", paho.MQTTv5, properties=connect_properties(TopicAliasMaximum=10))
    sub.subscribe("ta/#", 0)
    pub = Client(server, "pub", paho.MQTTv5)
    for n in range(5):
        pub.publish("ta/some/long/topic", b"%d" % n, qos=1)
    got = sub.receive(5)
    assert [(m.topic, alias_of(m)) for m in got] == [("ta/some/long/topic", None)] * 5


def test_a_resend_after_reconnect_names_its_topic_and_the_new_connection_sets_aliases_afresh(server: Server) -> None:
    topic = "ta/resent/topic"
    sock = RawV5(server, "resend", topic_alias_max=5, clean_start=False, session_expiry_interval=60)
    subscribe = mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("ta/#", max_qos=mqtt5.QoS.AT_LEAST_ONCE)])
    sock.sendall(subscribe.write())
    assert isinstance(sock.read(count=1)[0][0], mqtt5.SubAckPacket)
    pub = Client(server, "pub", paho.MQTTv5)
    pub.publish(topic, b"1", qos=1)
    pub.publish(topic, b"2", qos=1)
    first, second = sock.read(count=2)[0]
    assert (first.topic, first.topic_alias, second.topic, second.topic_alias) == (topic, 1, "", 1)
    sock.sendall(mqtt5.PubAckPacket(first.packet_id).write())
    time.sleep(0.3)  # the PUBACK is handled before the connection goes
    sock.close()  # the second is not acknowledged: it is sent again on the next connection

    again = RawV5(server, "resend", topic_alias_max=5, clean_start=False, session_expiry_interval=60)
    assert again.connack.session_present
    [resent] = again.read(count=1)[0]
    assert (resent.topic, resent.topic_alias, resent.duplicate, resent.payload) == (topic, None, True, b"2")
    again.sendall(mqtt5.PubAckPacket(resent.packet_id).write())
    pub.publish(topic, b"3", qos=1)
    pub.publish(topic, b"4", qos=1)
    third, fourth = again.read(count=2)[0]
    # Aliases are the connection's: the first new PUBLISH names its topic again.
    assert (third.topic, third.topic_alias, fourth.topic, fourth.topic_alias) == (topic, 1, "", 1)
    again.close()


def test_retained_messages_get_aliases_too(server: Server) -> None:
    pub = Client(server, "pub", paho.MQTTv5)
    for n in range(3):
        pub.publish(f"ta/kept/{n}/value", b"%d" % n, qos=1, retain=True)
    sock = RawV5(server, "retained", topic_alias_max=2)
    sock.sendall(mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("ta/kept/#", max_qos=mqtt5.QoS.AT_MOST_ONCE)]).write())
    got, _ = sock.read(count=4)
    publishes = [packet for packet in got if isinstance(packet, mqtt5.PublishPacket)]
    resolver = AliasResolver(2)
    resolved = sorted((resolver.topic(p.topic, p.topic_alias), p.payload, p.retain) for p in publishes)
    assert resolved == [(f"ta/kept/{n}/value", b"%d" % n, True) for n in range(3)]
    assert sorted(p.topic_alias for p in publishes if p.topic_alias is not None) == [1, 2]
    sock.close()
