"""How a run of inbound PUBLISHes becomes store calls (mqtt_bridge/inbound.py), without I/O: a topic's route
builds the same core message as `MqttMessage.to_core` whatever it cached from the messages before, and the runs cut
where a store call must end (another core topic or queue, a retained message, PUBLISH_BATCH, PUBLISH_BATCH_BYTES)."""

from __future__ import annotations

import itertools

import mqtt5
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.inbound import PUBLISH_BATCH, PUBLISH_BATCH_BYTES, StoreRun, TopicRoute
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish
from mqtt_bridge.wire.protocol import MqttConnection, Published

NOW = 1_700_000_000_000

publishes = st.lists(
    st.tuples(
        st.sampled_from(["a/1", "a/2", "b"]),
        st.binary(max_size=40),
        st.integers(0, 1),
        st.booleans(),
        st.sampled_from([None, "text/plain"]),  # a content type: MQTT 5 only, not a plain message
    ),
    max_size=30,
)


def events(version: int, items: list[tuple[str, bytes, int, bool, str | None]]) -> list[Published]:
    """PUBLISHes read by a real protocol object, as the gateway gets them."""
    conn = MqttConnection()
    connect = mqtt5.ConnectPacket("pub")
    conn.receive_data(connect.write() if version == 5 else V311Codec(client_side=True).encode(connect))
    conn.accept(False)
    data = b""
    for packet_id, (topic, payload, qos, retain, content_type) in enumerate(items, 1):
        if version == 4:
            data += encode_publish(topic, payload, qos, retain, packet_id if qos else None)
            continue
        packet = mqtt5.PublishPacket(
            topic,
            payload,
            qos=mqtt5.QoS(qos),
            retain=retain,
            packet_id=packet_id if qos else None,
            content_type=content_type,
        )
        data += packet.write()
    found = conn.receive_data(data)
    assert all(isinstance(event, Published) for event in found)
    return found  # type: ignore[return-value]


@given(publishes, st.sampled_from([4, 5]))
def test_a_route_builds_what_to_core_builds(items, version):
    route: TopicRoute | None = None
    for event in events(version, items):
        if route is None or route.topic != event.topic:
            route = TopicRoute(event.topic, None, "core-" + event.topic[0], len(event.topic))
        message, core = route.messages(event, "pub", NOW)
        reference = (
            MqttMessage.from_publish(event.packet, event.topic, "pub", NOW)
            if not event.plain
            else MqttMessage(event.topic, event.payload, event.qos, event.retain, "pub")
        )
        assert message == reference
        expected = reference.to_core(route.core_topic, route.queue_id)
        assert (core.topic, core.queue_id, bytes(core.body), core.properties) == (
            expected.topic,
            expected.queue_id,
            bytes(expected.body),
            expected.properties,
        )
        assert core.born_timestamp == NOW


@given(st.lists(st.tuples(st.sampled_from([("t", 0), ("t", 1), ("u", 0)]), st.booleans(), st.integers(0, 300_000))))
def test_runs_cut_where_a_store_call_must_end(items):
    runs: list[StoreRun] = []
    run = StoreRun()
    for key, retained, size in items:
        message = MqttMessage("x", b"\0" * size, 0, retained)
        run_key = None if retained else key
        if not run.takes(run_key, size):
            runs.append(run)
            run = StoreRun()
        run.add(run_key, None, (message, None, None))  # type: ignore[arg-type]
    if run:
        runs.append(run)
    assert sum(len(run.entries) for run in runs) == len(items)
    for run in runs:
        assert len(run.entries) <= PUBLISH_BATCH
        assert run.size <= PUBLISH_BATCH_BYTES or len(run.entries) == 1
        retained = [message.retain for message, _, _ in run.entries]
        assert not any(retained) or len(run.entries) == 1  # a retained message goes alone
    # Runs are as long as they may be: the next run's first message could not have joined.
    for before, after in itertools.pairwise(runs):
        first = after.entries[0][0]
        assert not before.takes(None if first.retain else after.key, len(first.payload))
