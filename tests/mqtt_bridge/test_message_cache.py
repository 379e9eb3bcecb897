"""MessageCache: light queues read from decoded messages kept by commit-log offset, and QoS 0 bytes encoded once."""

from __future__ import annotations

import mqtt5
import pytest

from core.broker import Broker
from core.results import PullStatus
from core.store.message import PROPERTY_MULTI_DISPATCH, Message
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.wire.codec_v311 import V311Codec, encode_publish
from mqtt_bridge.wire.protocol import MqttConnection

QUEUE = "%LMQ%cache-test"
GROUP = "MQTT_SESSION_test"


async def store(broker: Broker, cache: MessageCache | None, message: MqttMessage) -> int:
    """Store as the gateway does; keep the message in `cache` if given. Returns the commit-log offset."""
    core = message.to_core("t", 0)
    core.properties[PROPERTY_MULTI_DISPATCH] = QUEUE
    sent = await broker.send(core)
    if cache is not None:
        cache.put(sent.commit_log_offset, message, "t")
    return sent.commit_log_offset


def mqtt(n: int, **fields: object) -> MqttMessage:
    return MqttMessage(f"t/{n}", f"payload {n}".encode(), 0, False, "publisher", **fields)  # type: ignore[arg-type]


def refuse_pull(broker: Broker) -> None:
    """Make every read of the broker's store fail (the broker is compiled: its own methods cannot be replaced)."""

    def get_messages(*args: object, **kwargs: object) -> object:
        raise AssertionError("the commit log was read")

    broker.store.get_messages = get_messages  # type: ignore[method-assign]


async def test_stored_messages_are_read_back_without_the_log(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker)
    sent = [mqtt(n) for n in range(5)]
    offsets = [await store(broker, cache, message) for message in sent]
    assert broker.store.wait_dispatched()
    refuse_pull(broker)
    got = await cache.pull(GROUP, QUEUE, 1, 3)
    assert got.status is PullStatus.FOUND
    assert [(offset, queue_offset) for offset, queue_offset, _ in got.messages] == [
        (offsets[1], 1),
        (offsets[2], 2),
        (offsets[3], 3),
    ]
    assert [cached.message for _, _, cached in got.messages if cached] == sent[1:4]
    assert got.next_begin_offset == 4
    assert cache.hits == 3 and cache.misses == 0


async def test_what_the_cache_lacks_is_pulled_and_kept(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker)
    await store(broker, cache, mqtt(0))
    await store(broker, None, mqtt(1))  # stored by someone else: not in the cache
    await store(broker, None, mqtt(2))
    assert broker.store.wait_dispatched()
    first = await cache.pull(GROUP, QUEUE, 0, 10)
    assert [cached.message.topic for _, _, cached in first.messages if cached] == ["t/0"]  # stops at the gap
    assert first.next_begin_offset == 1
    second = await cache.pull(GROUP, QUEUE, 1, 10)
    assert [cached.message for _, _, cached in second.messages if cached] == [mqtt(1), mqtt(2)]
    assert second.next_begin_offset == 3
    assert cache.misses == 2
    refuse_pull(broker)
    third = await cache.pull("another session", QUEUE, 0, 10)
    assert [cached.message.topic for _, _, cached in third.messages if cached] == ["t/0", "t/1", "t/2"]


async def test_a_core_message_without_an_mqtt_topic_comes_back_as_none(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker)
    await broker.send(Message(topic="t", body=b"plain", properties={PROPERTY_MULTI_DISPATCH: QUEUE}))
    assert broker.store.wait_dispatched()
    got = await cache.pull(GROUP, QUEUE, 0, 10)
    assert [(queue_offset, cached) for _, queue_offset, cached in got.messages] == [(0, None)]
    assert len(cache) == 0


async def test_an_offset_outside_the_queue_is_answered_by_the_broker(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker)
    await store(broker, cache, mqtt(0))
    assert broker.store.wait_dispatched()
    got = await cache.pull(GROUP, QUEUE, 5, 10)
    assert got.status is PullStatus.OFFSET_ILLEGAL
    assert got.next_begin_offset == 1


async def test_the_cache_is_bounded_by_count_and_by_bytes(make_broker):
    broker = await make_broker()
    by_count = MessageCache(broker, capacity=3)
    for n in range(5):
        by_count.put(n, mqtt(n), "t")
    assert len(by_count) == 3
    assert by_count.get(0) is None and by_count.get(1) is None
    assert by_count.get(4) is not None
    by_bytes = MessageCache(broker, max_bytes=10_000)
    for n in range(5):
        by_bytes.put(n, MqttMessage(f"t/{n}", bytes(3000), 0, False), "t")
    assert len(by_bytes) == 1 and by_bytes.get(4) is not None
    assert by_bytes.bytes <= 10_000 or len(by_bytes) == 1


async def test_put_many_keeps_what_puts_one_by_one_keep(make_broker):
    broker = await make_broker()
    one, many = MessageCache(broker, capacity=4, max_bytes=5_000), MessageCache(broker, capacity=4, max_bytes=5_000)
    entries = [(n % 6, MqttMessage(f"t/{n}", bytes(100 * n), 0, False)) for n in range(9)]  # offsets repeat
    for offset, message in entries:
        one.put(offset, message, "t")
    for part in (entries[:5], entries[5:]):
        many.put_many([offset for offset, _ in part], [(message, None, None) for _, message in part], "t")
    assert len(many) == len(one) and many.bytes == one.bytes
    for offset in range(6):
        kept, expected = many.get(offset), one.get(offset)
        assert (kept.message if kept else None) == (expected.message if expected else None)


async def test_the_received_bytes_of_a_plain_qos0_publish_are_sent_to_3_1_1_receivers_as_they_are(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker)
    message = mqtt(1)
    wire = encode_publish(message.topic, message.payload, 0, False, None)
    cache.put_many([42], [(message, wire, None)], "t")
    cached = cache.get(42)
    assert cached is not None
    conn = connection(4)
    assert conn.publish_cached(cached, 0, False, None, 0, [])
    assert conn.data_to_send() is wire
    v5 = connection(5)
    assert v5.publish_cached(cached, 0, False, None, 0, [])
    assert mqtt5.read(v5.data_to_send())[0].payload == message.payload


async def test_a_hit_keeps_an_entry_from_eviction(make_broker):
    broker = await make_broker()
    cache = MessageCache(broker, capacity=2)
    offsets = [await store(broker, cache, mqtt(n)) for n in range(2)]
    assert broker.store.wait_dispatched()
    await cache.pull(GROUP, QUEUE, 0, 1)  # reads the first: now the most recently used
    cache.put(10**9, mqtt(9), "t")
    assert cache.get(offsets[0]) is not None
    assert cache.get(offsets[1]) is None


def connection(version: int, max_packet_size: int | None = None) -> MqttConnection:
    conn = MqttConnection()
    if version == 5:
        connect = mqtt5.ConnectPacket("receiver", max_packet_size=max_packet_size).write()
    else:
        connect = V311Codec(client_side=True).encode(mqtt5.ConnectPacket("receiver"))
    conn.receive_data(connect)
    conn.accept(False)
    conn.data_to_send()
    return conn


@pytest.mark.parametrize("version", [4, 5])
async def test_qos0_bytes_are_encoded_once_and_equal_a_fresh_encoding(make_broker, version):
    cache = MessageCache(await make_broker())
    cached = cache.put(0, mqtt(0, user_properties=[("k", "v")], content_type="text/plain"), "t")
    first, second, fresh = connection(version), connection(version), connection(version)
    assert first.publish_cached(cached, 0, False, None, 0, [])
    assert second.publish_cached(cached, 0, False, None, 0, [])
    fresh.publish(cached.message.to_publish(0, False, None, 0))
    sent = first.data_to_send()
    assert sent == second.data_to_send() == fresh.data_to_send()
    if version == 4:  # the common encoding, in a field of its own
        assert cached.qos0 is None
        assert cached.v311 is sent  # the very same bytes object, not an equal copy
    else:
        assert list(cached.qos0) == [(version, False)]
        assert cached.qos0[(version, False)] is sent


async def test_each_protocol_level_and_retain_flag_gets_its_own_bytes(make_broker):
    cache = MessageCache(await make_broker())
    cached = cache.put(0, mqtt(0, user_properties=[("k", "v")]), "t")
    v4, v5 = connection(4), connection(5)
    v4.publish_cached(cached, 0, False, None, 0, [])
    v5.publish_cached(cached, 0, True, None, 0, [])
    assert cached.v311 is not None and set(cached.qos0) == {(5, True)}
    packet, _ = mqtt5.read(v5.data_to_send())
    assert packet.retain and packet.user_properties == [("k", "v")]
    assert v4.data_to_send()[0] == 0x30  # PUBLISH, QoS 0, no retain


async def test_qos1_expiry_and_subscription_ids_are_encoded_per_receiver(make_broker):
    cache = MessageCache(await make_broker())
    expiring = cache.put(0, mqtt(0, expires_at_ms=10_000), "t")
    conn = connection(5)
    conn.publish_cached(expiring, 0, False, None, 4_000, [])
    conn.publish_cached(expiring, 0, False, None, 7_500, [])
    data = conn.data_to_send()
    first, size = mqtt5.read(data)
    second, _ = mqtt5.read(data[size:])
    assert (first.message_expiry_interval, second.message_expiry_interval) == (6, 3)
    plain = cache.put(1, mqtt(1), "t")
    conn.publish_cached(plain, 0, False, None, 0, [7])
    conn.publish_cached(plain, 1, False, conn.next_packet_id(), 0, [])
    assert not expiring.qos0 and not plain.qos0
    data = conn.data_to_send()
    with_id, size = mqtt5.read(data)
    qos1, _ = mqtt5.read(data[size:])
    assert with_id.subscription_ids == [7]
    assert int(qos1.qos) == 1 and qos1.packet_id == 1 and conn.outbound == {1: False}


async def test_an_oversize_qos0_publish_is_dropped_for_a_client_with_a_small_maximum(make_broker):
    cache = MessageCache(await make_broker())
    cached = cache.put(0, MqttMessage("t/big", bytes(500), 0, False), "t")
    small, large = connection(5, max_packet_size=100), connection(5)
    assert not small.publish_cached(cached, 0, False, None, 0, [])
    assert large.publish_cached(cached, 0, False, None, 0, [])
    assert small.data_to_send() == b""
    assert len(large.data_to_send()) > 500


async def test_mqtt_3_1_1_receivers_share_qos0_bytes_whatever_the_properties(make_broker):
    # 3.1.1 carries no expiry and no subscription ids, so a message that has them is still encoded once.
    cache = MessageCache(await make_broker())
    cached = cache.put(0, mqtt(0, expires_at_ms=10_000, user_properties=[("k", "v")]), "t")
    first, second = connection(4), connection(4)
    first.publish_cached(cached, 0, False, None, 4_000, [3])
    second.publish_cached(cached, 0, False, None, 9_000, [])
    sent = first.data_to_send()
    assert sent == second.data_to_send() == V311Codec().encode(cached.message.to_publish(0, False, None, 0))
    assert cached.v311 == sent and cached.qos0 is None


@pytest.mark.parametrize("qos", [1, 2])
async def test_mqtt_3_1_1_qos1_and_2_are_encoded_per_receiver_and_tracked(make_broker, qos):
    cache = MessageCache(await make_broker())
    cached = cache.put(0, mqtt(0), "t")
    conn = connection(4)
    packet_id = conn.next_packet_id()
    assert conn.publish_cached(cached, qos, True, packet_id, 0, [])
    expected = V311Codec().encode(cached.message.to_publish(qos, True, packet_id, 0))
    assert conn.data_to_send() == expected
    assert conn.outbound == {packet_id: False}
    assert not cached.qos0 and cached.v311 is None
