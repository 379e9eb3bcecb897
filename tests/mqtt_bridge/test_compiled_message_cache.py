"""The compiled `MessageCache` (mqtt_bridge/message_cache.py) against its pure twin, the same .py interpreted
(tests/compiled_modules.py), on one real broker: the same generated run of puts, batch puts, pulls and publishes
keeps the same entries and byte count, reads the same entries (from the cache or the log), and queues the same
PUBLISH bytes on the receivers' connections."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import mqtt5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mqtt_bridge.message_cache as compiled_cache
import mqtt_bridge.wire.protocol as compiled_protocol
from core.broker import Broker
from core.store.message import PROPERTY_MULTI_DISPATCH
from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish
from tests.compiled_modules import pure_twin
from tests.core.conftest import open_broker_store

pure_cache = pure_twin("mqtt_bridge.message_cache")
pure_protocol = pure_twin("mqtt_bridge.wire.protocol")
PROTOCOL_OF = {compiled_cache: compiled_protocol, pure_cache: pure_protocol}

QUEUE = "%LMQ%twin-cache"
GROUP = "MQTT_SESSION_twin"
# Messages in the light queue; the generated runs put, pull and publish among them.
STORED = 12


def test_the_twins_are_apart():
    assert pure_cache.MessageCache is not compiled_cache.MessageCache
    assert pure_protocol.MqttConnection is not compiled_protocol.MqttConnection  # protocol.py is compiled too
    assert pure_cache.CachedMessage is pure_protocol.CachedMessage is not compiled_cache.CachedMessage


message_fields = st.fixed_dictionaries(
    {
        "topic": st.sampled_from(["a/b", "s/1", "t/é"]),
        "payload": st.binary(max_size=40),
        "qos": st.integers(0, 2),
        "retain": st.booleans(),
        "client_id": st.sampled_from([None, "publisher"]),
        "expires_at_ms": st.sampled_from([None, 5_000, 20_000]),
        "user_properties": st.sampled_from([None, [("k", "v")]]),
    }
)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[asyncio.AbstractEventLoop, Broker, list[int]]]:
    """A started broker on its own event loop, with STORED MQTT messages in QUEUE (and their commit-log offsets)."""
    loop = asyncio.new_event_loop()
    directory: Path = tmp_path_factory.mktemp("twin-cache")
    store = open_broker_store(directory)
    broker = Broker(store, directory / "config")
    loop.run_until_complete(broker.start())
    offsets = []
    for n in range(STORED):
        message = compiled_cache.MqttMessage(f"t/{n % 3}", bytes([n]) * (n * 7), n % 2, False, "publisher")
        core = message.to_core("t", 0)
        core.properties[PROPERTY_MULTI_DISPATCH] = QUEUE
        offsets.append(loop.run_until_complete(broker.send(core)).commit_log_offset)
    assert store.wait_dispatched()
    yield loop, broker, offsets
    loop.run_until_complete(broker.close())
    store.close()
    loop.close()


def connection(module: ModuleType, version: int, aliases: bool) -> Any:
    conn = PROTOCOL_OF[module].MqttConnection()
    if version == 5:
        connect = mqtt5.ConnectPacket("receiver", topic_alias_max=2 if aliases else 0).write()
    else:
        connect = V311Codec(client_side=True).encode(mqtt5.ConnectPacket("receiver"))
    conn.receive_data(connect)
    conn.accept(False)
    conn.data_to_send()
    return conn


def entry(cached: Any) -> Any:
    return None if cached is None else (repr(cached.message), cached.size, cached.topic)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, STORED - 1), message_fields),
        st.tuples(
            st.just("put_many"),
            st.lists(st.tuples(st.integers(0, STORED - 1), message_fields, st.booleans()), max_size=5),
        ),
        st.tuples(st.just("pull"), st.integers(0, STORED + 1), st.integers(1, 5)),
        st.tuples(
            st.just("publish"),
            st.integers(0, STORED - 1),
            st.sampled_from([4, 5]),
            st.integers(0, 2),
            st.booleans(),
            st.sampled_from([[], [3]]),
        ),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations, st.integers(1, 8), st.sampled_from([2_000, 100_000]), st.booleans())
def test_a_run_of_operations_gives_the_same_entries_reads_and_bytes(stored, ops, capacity, max_bytes, aliases):
    loop, broker, offsets = stored
    twins = [(module, module.MessageCache(broker, capacity, max_bytes)) for module in (compiled_cache, pure_cache)]
    conns = [{version: connection(module, version, aliases) for version in (4, 5)} for module, _ in twins]
    for op in ops:
        seen = []
        for (module, cache), conn in zip(twins, conns, strict=True):
            if op[0] == "put":
                _, index, fields = op
                got: Any = entry(cache.put(offsets[index], module.MqttMessage(**fields), "t"))
            elif op[0] == "put_many":
                batch = []
                for index, fields, with_wire in op[1]:
                    message = module.MqttMessage(**fields)
                    plain = with_wire and not message.qos and not message.retain
                    wire = encode_publish(message.topic, message.payload, 0, False, None) if plain else None
                    batch.append((offsets[index], (message, wire, None)))
                got = cache.put_many([offset for offset, _ in batch], [item for _, item in batch], "t")
            elif op[0] == "pull":
                _, start, count = op
                pulled = loop.run_until_complete(cache.pull(GROUP, QUEUE, start, count))
                got = (
                    pulled.status,
                    pulled.next_begin_offset,
                    [(offset, queue_offset, entry(cached)) for offset, queue_offset, cached in pulled.messages],
                )
            else:
                _, index, version, qos, retain, ids = op
                cached = cache.get(offsets[index])
                got = None
                if cached is not None:
                    target = conn[version]
                    packet_id = target.next_packet_id() if qos else None
                    sent = target.publish_cached(cached, qos, retain, packet_id, 10_000, ids)
                    got = (
                        sent,
                        target.data_to_send(),
                        None if cached.qos0 is None else sorted(cached.qos0),
                        cached.v311,
                    )
            seen.append((got, len(cache), cache.bytes, cache.hits, cache.misses))
            seen.append([entry(cache.get(offset)) for offset in offsets])
        assert seen[0] == seen[2] and seen[1] == seen[3]
