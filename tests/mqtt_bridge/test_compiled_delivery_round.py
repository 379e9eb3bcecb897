"""The compiled delivery round (mqtt_bridge/delivery_round.py, with session.py, message_cache.py and protocol.py
compiled) against its pure twin, the same .py files interpreted (tests/compiled_modules.py): a generated round
(subscriptions with QoS, no_local, retain-as-published and ids; messages in one or more of their queues, expired,
gone or unreadable; a horizon; a small window; a full transport) sends the same bytes, moves the same positions,
leaves the same publishes in flight and counts the same traffic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import mqtt5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqtt_bridge.delivery_round as compiled_round
import mqtt_bridge.message_cache as compiled_cache
import mqtt_bridge.sessions.session as compiled_session
import mqtt_bridge.wire.protocol as compiled_protocol
from core.broker import Broker
from mqtt_bridge.wire.codec_v311 import V311Codec
from tests.compiled_modules import pure_twin
from tests.core.conftest import open_broker_store

pure_round = pure_twin("mqtt_bridge.delivery_round")
pure_cache = pure_twin("mqtt_bridge.message_cache")
pure_protocol = pure_twin("mqtt_bridge.wire.protocol")
pure_session = pure_twin("mqtt_bridge.sessions.session")
TWINS = (
    (compiled_round, compiled_cache, compiled_protocol, compiled_session),
    (pure_round, pure_cache, pure_protocol, pure_session),
)
QUEUES = ("q0", "q1", "q2")
NOW = 10_000


def test_the_twins_are_apart():
    assert pure_round.send_batch is not compiled_round.send_batch
    assert pure_round.Session is pure_session.Session is not compiled_session.Session


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker for the caches to hold (a round reads nothing from it: its messages are given)."""
    directory: Path = tmp_path_factory.mktemp("twin-round")
    store = open_broker_store(directory)
    yield Broker(store, directory / "config")
    store.close()


subscriptions = st.lists(
    st.tuples(st.sampled_from(QUEUES), st.integers(0, 2), st.booleans(), st.booleans(), st.sampled_from([None, 7])),
    min_size=1,
    max_size=3,
    unique_by=lambda sub: sub[0],
)
messages = st.lists(
    st.tuples(
        st.integers(1, 3),  # gap to the previous commit-log offset
        st.sampled_from(["a/b", "a/c", "deny/x"]),
        st.integers(0, 2),  # QoS
        st.booleans(),  # retain
        st.sampled_from([None, "me", "other"]),  # publisher
        st.sampled_from([None, NOW - 1, NOW + 5_000]),  # expiry
        st.sets(st.sampled_from(QUEUES), min_size=1),  # the queues that hold it
        st.booleans().map(lambda kept: kept or None),  # None: gone from the log
    ),
    max_size=12,
)


def connection(protocol: ModuleType, version: int, inflight: int) -> Any:
    conn = protocol.MqttConnection(protocol.Limits(max_inflight=inflight))
    if version == 5:
        conn.receive_data(mqtt5.ConnectPacket("me", topic_alias_max=1).write())
    else:
        conn.receive_data(V311Codec(client_side=True).encode(mqtt5.ConnectPacket("me")))
    conn.accept(False)
    conn.data_to_send()
    return conn


class Link:
    def __init__(self, writable: bool) -> None:
        self.writable = writable


def run_round(twin: tuple[ModuleType, ...], broker: Broker, case: tuple[Any, ...]) -> tuple[Any, ...]:
    round_module, cache_module, protocol, session_module = twin
    subs, entries, horizon_index, version, inflight, writable, acl = case
    session = session_module.Session("me")
    for queue, qos, no_local, rap, sub_id in subs:
        sub = session_module.Subscription(f"f/{queue}", qos, None, no_local, rap, 0, sub_id, queue)
        session.subscriptions[sub.key] = sub
        session.read_offsets[queue] = 0
    cache = cache_module.MessageCache(broker)
    conn = connection(protocol, version, inflight)
    pulled: dict[str, list[tuple[int, int, Any]]] = {queue: [] for queue in QUEUES}
    offset = 0
    offsets = []
    for gap, topic, qos, retain, publisher, expiry, queues, kept in entries:
        offset += gap
        offsets.append(offset)
        message = cache_module.MqttMessage(topic, topic.encode() * 3, qos, retain, publisher, expiry)
        cached = cache.put(offset, message, topic.split("/")[0]) if kept else None
        for queue in sorted(queues):
            pulled[queue].append((offset, len(pulled[queue]), cached))
    batch: dict[int, Any] = {}
    for queue in QUEUES:
        round_module.merge_pulled(batch, queue, pulled[queue])
    horizon = offsets[horizon_index % len(offsets)] if horizon_index is not None and offsets else None
    readable = (lambda topic: not topic.startswith("deny/")) if acl else None
    done = round_module.send_batch(batch, horizon, session, conn, Link(writable), NOW, readable)
    inflight_now = {
        packet_id: (repr(out.message), out.qos, out.retain, out.subscription_ids, out.positions)
        for packet_id, out in session.inflight.items()
    }
    return (
        (done.progressed, done.stopped, done.delivered, done.traffic),
        conn.data_to_send(),
        dict(conn.outbound),
        dict(session.read_offsets),
        {queue: sorted(offsets) for queue, offsets in session.unacked.items()},
        inflight_now,
        {offset: [sorted(entry[1])] for offset, entry in batch.items()},
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    subscriptions,
    messages,
    st.sampled_from([None, 0, 3, 7]),
    st.sampled_from([4, 5]),
    st.integers(1, 4),
    st.sampled_from([True, True, True, False]),
    st.booleans(),
)
def test_a_round_sends_the_same_bytes_and_moves_the_same_positions(
    broker, subs, entries, horizon_index, version, inflight, writable, acl
):
    case = (subs, entries, horizon_index, version, inflight, writable, acl)
    assert run_round(TWINS[0], broker, case) == run_round(TWINS[1], broker, case)
