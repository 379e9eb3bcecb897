"""The compiled `MqttConnection` (mqtt_bridge/wire/protocol.py) against its pure twin, the same .py interpreted
(tests/compiled_modules.py): a generated client byte stream, cut at generated places and with bytes changed, gives
the same events, the same errors and the same bytes back out of both, and so do the gateway's answers (CONNACK,
PUBACK/PUBREC, outbound PUBLISHes with packet ids, window and topic aliases)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mqtt5
from hypothesis import given, settings
from hypothesis import strategies as st

import mqtt_bridge.wire.protocol as compiled_protocol
from mqtt_bridge.wire.codec_v5 import V5Codec
from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish
from tests.compiled_modules import pure_twin
from tests.mqtt_bridge.wire.packet_strategies import (
    payloads,
    topic_names,
    v5_connects,
    v5_packets,
    v5_publishes,
    v311_connects,
    v311_packets,
    v311_publishes,
)

pure_protocol = pure_twin("mqtt_bridge.wire.protocol")

CLIENT_V311 = V311Codec(client_side=True)
CLIENT_V5 = V5Codec()
# Small limits, so that generated streams reach them: Receive Maximum, aliases and the in-flight window.
LIMITS = {"receive_maximum": 3, "topic_alias_maximum": 2, "server_topic_alias_maximum": 2, "max_inflight": 3}


def test_the_twins_are_apart():
    assert pure_protocol.MqttConnection is not compiled_protocol.MqttConnection
    assert pure_protocol.__file__.endswith("protocol.py")


def event_summary(event: Any) -> tuple[Any, ...]:
    """An event as plain values: its class name and fields (the twins' event classes are different classes)."""
    fields = ("packet", "version", "topic", "wire", "packet_id", "qos", "payload", "retain", "plain")
    return (type(event).__name__, *(repr(getattr(event, name, None)) for name in fields))


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """What `call(*args)` gives: its result as plain values, or its error (class, message, reason code); the twins
    share mqtt_bridge/errors.py, so the error classes are the same."""
    try:
        result = call(*args)
    except Exception as exc:
        return ("error", type(exc), str(exc), getattr(exc, "reason_code", None))
    if isinstance(result, list):
        return ("result", [event_summary(event) for event in result])
    return ("result", result)


def state_of(conn: Any) -> tuple[Any, ...]:
    return (
        conn.state.value,
        conn.version,
        conn.inbound_unacked,
        dict(conn.outbound),
        conn.send_window if conn.state.value == "CONNECTED" else None,
        conn.keep_alive,
        None if conn.pending_error is None else str(conn.pending_error),
        conn.traffic.bytes_received,
        conn.traffic.bytes_sent,
        conn.traffic.packets_received,
        conn.traffic.packets_sent,
        conn.traffic.publishes_received,
        conn.traffic.publishes_sent,
    )


@st.composite
def plain_publishes(draw: st.DrawFn, v5: bool) -> mqtt5.PublishPacket:
    """A PUBLISH as devices send them, mostly well-formed (packet_strategies' have every property, and most end the
    stream at once): a few topics, so that a topic repeats; on MQTT 5 maybe a topic alias (within and past the
    limit) or a Message Expiry."""
    qos = draw(st.integers(0, 2))
    alias = draw(st.sampled_from([None, None, 1, 2, 3])) if v5 else None
    topic = draw(st.sampled_from(["a/b", "s/1/t", "x"]) | topic_names)
    return mqtt5.PublishPacket(
        "" if alias is not None and draw(st.booleans()) else topic,
        draw(payloads),
        qos=mqtt5.QoS(qos),
        retain=draw(st.booleans()),
        packet_id=draw(st.integers(1, 4)) if qos else None,
        topic_alias=alias,
        message_expiry_interval=draw(st.sampled_from([None, 10])) if v5 else None,
    )


@st.composite
def client_streams(draw: st.DrawFn) -> tuple[int, bytes, list[int]]:
    """(protocol level, a client's bytes: CONNECT then packets, a few bytes maybe changed, cut points)."""
    v5 = draw(st.booleans())
    codec = CLIENT_V5 if v5 else CLIENT_V311
    connect = draw(v5_connects() if v5 else v311_connects())
    # Mostly PUBLISHes, the per-message path; any other packet now and then (it may end the stream).
    publishes = st.one_of(plain_publishes(v5), plain_publishes(v5), v5_publishes() if v5 else v311_publishes())
    others = v5_packets if v5 else v311_packets
    packets = draw(st.lists(st.one_of(publishes, publishes, publishes, others), max_size=16))
    data = bytearray(codec.encode(connect))
    for packet in packets:
        data += codec.encode(packet)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return (5 if v5 else 4), bytes(data), cuts


# Outbound messages: (topic, payload, QoS, retain flag).
outgoing_messages = st.lists(st.tuples(topic_names, payloads, st.integers(0, 2), st.booleans()), max_size=4)


def answer(conn: Any, events: list[Any], outgoing: list[tuple[str, bytes, int, bool]], step: int) -> list[Any]:
    """What a gateway does with the events (accept, acknowledge, send), the same for either twin; returns what
    each call gave."""
    results: list[Any] = []
    for event in events:
        name = type(event).__name__
        if name == "Connected":
            results.append(outcome(conn.accept, step % 2 == 0))
        elif name == "Published" and int(event.packet.qos):
            reason = 0x80 if step % 5 == 4 else 0
            results.append(outcome(conn.acknowledge_publish, event.packet.packet_id, int(event.packet.qos), reason))
        elif name == "Released":
            results.append(outcome(conn.complete, event.packet_id, step % 3 != 0))
    if conn.state.value == "CONNECTED":
        for topic, payload, qos, retain in outgoing:
            if qos and conn.send_window <= 0:
                results.append("window closed")
                break
            packet_id = conn.next_packet_id() if qos else None
            sent = mqtt5.PublishPacket(topic, payload, qos=mqtt5.QoS(qos), retain=retain, packet_id=packet_id)
            results.append(outcome(conn.publish, sent))
            if conn.version == 4:
                results.append(outcome(conn.publish_encoded, encode_publish(topic, payload, 0, retain, None)))
    results.append(conn.data_to_send())
    return results


def receive(conn: Any, chunk: bytes) -> tuple[tuple[Any, ...], list[Any]]:
    """`conn.receive_data(chunk)` as an outcome, and its events (none after an error)."""
    events: list[Any] = []

    def call() -> list[Any]:
        events.extend(conn.receive_data(chunk))
        return events

    return outcome(call), events


@settings(max_examples=300, deadline=None)
@given(client_streams(), outgoing_messages)
def test_a_client_stream_gives_the_same_events_and_bytes(stream, outgoing):
    _, data, cuts = stream
    compiled = compiled_protocol.MqttConnection(compiled_protocol.Limits(**LIMITS))
    pure = pure_protocol.MqttConnection(pure_protocol.Limits(**LIMITS))
    chunks = [data[start:end] for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    for step, chunk in enumerate(chunks):
        got, compiled_events = receive(compiled, chunk)
        expected, pure_events = receive(pure, chunk)
        assert got == expected
        assert state_of(compiled) == state_of(pure)
        assert answer(compiled, compiled_events, outgoing, step) == answer(pure, pure_events, outgoing, step)
        assert state_of(compiled) == state_of(pure)
        if compiled.pending_error is not None:
            compiled.fail(compiled.pending_error)
            pure.fail(pure.pending_error)
            assert compiled.data_to_send() == pure.data_to_send()
