"""`GET /metrics` of a real `mqgate serve`, after known traffic from real clients: paho (MQTT 3.1.1 and 5), an
EventBridge rule with two HTTP targets served by aiohttp (one answers 204, one 500), PutEvents, and a file-sink
connector reading a topic. The text is parsed with prometheus-client's own parser and every family is checked,
with exact values where the traffic makes them known."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from prometheus_client.parser import text_string_to_metric_families

from mqgate.http.metrics import TopicRates
from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

CONFIG = """
[mqtt]
max_packet_size = 8192
[store]
max_message_size = "4KiB"
"""
RULES = """
rules:
  - name: orders-rule
    pattern: {{source: [shop]}}
    targets:
      - id: good
        type: http
        url: {good}
      - id: broken
        type: http
        url: {broken}
        retry_policy: {{strategy: BACKOFF_RETRY, retries: 2, min_delay_s: 0, max_delay_s: 0.05}}
"""
WAIT_S = 30.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> tuple[Samples, dict[str, tuple[str, str]]]:
    """Every sample by (name, labels), and every family's (type, help) by name."""
    samples: Samples = {}
    families = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = (family.type, family.documentation)
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples, families


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def matching(samples: Samples, name: str, check: Callable[[dict[str, str]], bool]) -> dict[frozenset, float]:
    return {labels: v for (n, labels), v in samples.items() if n == name and check(dict(labels))}


async def scrape(server: ServeProcess) -> tuple[Samples, dict[str, tuple[str, str]]]:
    async with aiohttp.ClientSession() as http, http.get(f"{server.http_url}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return parse(await response.text())


async def until(server: ServeProcess, check: Callable[[Samples], bool], what: str) -> Samples:
    deadline = time.monotonic() + WAIT_S
    while True:
        samples, _ = await scrape(server)
        try:
            if check(samples):
                return samples
        except KeyError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {WAIT_S} s: {sorted(samples.items(), key=str)[:400]}")
        await asyncio.sleep(0.2)


class Mqtt:
    """A paho client on its network thread; received messages counted."""

    def __init__(self, server: ServeProcess, client_id: str, version: int = paho.MQTTv311, clean: bool = True):
        kwargs: dict[str, Any] = {"client_id": client_id, "protocol": version}
        if version != paho.MQTTv5:
            kwargs["clean_session"] = clean
        self.paho = paho.Client(CallbackAPIVersion.VERSION2, **kwargs)
        self.received = 0
        self.disconnected = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.paho.on_message = lambda c, u, m: setattr(self, "received", self.received + 1)
        self.paho.on_disconnect = lambda *args: loop.call_soon_threadsafe(self.disconnected.set)
        host, port = server.ready["mqtt"].rsplit(":", 1)
        self.paho.connect(host, int(port))
        self.paho.loop_start()

    async def subscribe(self, topic: str, qos: int) -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.paho.on_subscribe = lambda *args: loop.call_soon_threadsafe(done.set)
        self.paho.subscribe(topic, qos)
        await asyncio.wait_for(done.wait(), WAIT_S)

    async def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        info = self.paho.publish(topic, payload, qos=qos, retain=retain)
        await asyncio.to_thread(info.wait_for_publish, WAIT_S)

    def close(self) -> None:
        self.paho.disconnect()
        self.paho.loop_stop()


@pytest.fixture
async def targets() -> Iterator[tuple[TargetServer, TargetServer]]:
    good = await TargetServer().start()
    broken = await TargetServer(status=500).start()
    yield good, broken
    await good.stop()
    await broken.stop()


async def test_every_family_after_known_traffic(tmp_path: Path, targets: tuple[TargetServer, TargetServer]):
    good, broken = targets
    data = tmp_path / "data"
    (data / "rules").mkdir(parents=True)
    (data / "rules" / "shop.yaml").write_text(RULES.format(good=good.url, broken=broken.url))
    config = tmp_path / "mqgate.toml"
    config.write_text(CONFIG)
    server = ServeProcess(data, "--config", config)
    try:
        await _drive_and_check(server, tmp_path, good, broken)
    finally:
        assert server.stop() == 0


async def _drive_and_check(server: ServeProcess, tmp_path: Path, good: TargetServer, broken: TargetServer) -> None:
    # A file-sink connector reads core topic "orders" (group connect-archive), pulling what MQTT stores there.
    async with aiohttp.ClientSession() as http:
        sink = {"connector.class": "file-sink", "topics": "orders", "file": str(tmp_path / "orders.txt")}
        async with http.post(f"{server.http_url}/connectors", json={"name": "archive", "config": sink}) as response:
            assert response.status == 201, await response.text()

    # MQTT: a persistent session subscribes and goes away (its backlog is its lag); a subscriber gets 100 messages.
    lagger = Mqtt(server, "lagger", clean=False)
    await lagger.subscribe("late/#", 1)
    lagger.close()
    subscriber = Mqtt(server, "reader")
    await subscriber.subscribe("T/#", 0)
    publisher = Mqtt(server, "writer")
    for _ in range(100):
        await publisher.publish("T/x", b"0123456789")  # 100 messages of 10 bytes into core topic T
    for _ in range(50):
        await publisher.publish("late/y", b"abc")
    for number in range(20):
        await publisher.publish("orders/new", b"order %02d" % number)  # 8 bytes each
    await publisher.publish("T/retained", b"kept", retain=True)

    # Refusals: $SYS is the server's (0x87), a message over the store's max_message_size (0x97 and a store
    # refusal), a packet over max_packet_size (0x95, the connection ends).
    v5 = Mqtt(server, "v5", version=paho.MQTTv5)
    await v5.publish("$SYS/broker/uptime", b"0 seconds")
    await v5.publish("big/x", b"x" * 5000)
    huge = Mqtt(server, "huge")
    huge.paho.publish("huge/x", b"x" * 9000, qos=1)
    await asyncio.wait_for(huge.disconnected.wait(), WAIT_S)
    huge.paho.loop_stop()

    # EventBridge: 3 events matched by the rule, one malformed entry refused.
    events = [
        {"specversion": "1.0", "id": f"e{n}", "source": "shop", "type": "order", "data": {"n": n}} for n in range(3)
    ]
    async with aiohttp.ClientSession() as http:
        url = f"{server.http_url}/buses/default/events"
        headers = {"Content-Type": "application/cloudevents-batch+json"}
        async with http.post(url, json=[*events, {"specversion": "1.0"}], headers=headers) as response:
            assert response.status == 200, await response.text()
            assert (await response.json())["FailedEntryCount"] == 1
    await good.wait_for(3)

    samples = await until(
        server,
        lambda s: (
            value(s, "mqgate_topic_messages_out_total", topic="T") == 101
            and value(s, "mqgate_eventbridge_dead_lettered_total", bus="default", rule="orders-rule", target="broken")
            == 3
            and value(s, "mqgate_consumer_lag", group="connect-archive", topic="orders", queue="0") == 0
            and sum(matching(s, "mqgate_consumer_offset", lambda labels: labels["group"] == "connect-archive").values())
            == 20
            # The flush thread writes every flush_interval_ms: on a loaded machine the first flush with data can
            # come after the rest.
            and value(s, "mqgate_store_flush_seconds_count") >= 1
        ),
        "deliveries, dead letters, the sink's offsets and a flush",
    )
    assert subscriber.received == 101

    # Per topic: in = stored by sends, out = delivered (MQTT deliveries of T; the sink's pulls of orders).
    assert value(samples, "mqgate_topic_messages_in_total", topic="T") == 101
    assert value(samples, "mqgate_topic_bytes_in_total", topic="T") == 100 * 10 + 4
    assert value(samples, "mqgate_topic_bytes_out_total", topic="T") == 100 * 10 + 4
    assert value(samples, "mqgate_topic_messages_in_total", topic="late") == 50
    assert value(samples, "mqgate_topic_messages_out_total", topic="late") == 0
    assert value(samples, "mqgate_topic_messages_in_total", topic="orders") == 20
    assert value(samples, "mqgate_topic_messages_out_total", topic="orders") == 20
    assert value(samples, "mqgate_topic_bytes_out_total", topic="orders") == 20 * 8
    assert value(samples, "mqgate_topic_produce_rate", topic="T") > 0
    assert value(samples, "mqgate_topic_consume_rate", topic="T") > 0
    assert value(samples, "mqgate_topic_consume_rate", topic="late") == 0

    # Consumer lag: the offline session committed its start (0) and 50 messages arrived since.
    lagging = matching(samples, "mqgate_consumer_lag", lambda labels: "lagger" in labels["group"])
    assert list(lagging.values()) == [50]
    (labels,) = lagging
    queue = dict(labels)
    assert value(samples, "mqgate_consumer_offset", **queue) == 0
    assert value(samples, "mqgate_queue_max_offset", topic=queue["topic"], queue=queue["queue"]) == 50
    orders_max = matching(samples, "mqgate_queue_max_offset", lambda labels: labels["topic"] == "orders")
    assert sum(orders_max.values()) == 20

    # MQTT: reader, writer and v5 connected; lagger's session kept; retained, subscriptions.
    assert value(samples, "mqgate_mqtt_clients_connected") == 3
    assert value(samples, "mqgate_mqtt_connections") == 3
    assert value(samples, "mqgate_mqtt_sessions") == 4
    assert value(samples, "mqgate_mqtt_subscriptions") == 2
    assert value(samples, "mqgate_mqtt_retained_messages") == 1
    assert value(samples, "mqgate_mqtt_inflight_messages") == 0
    # PUBLISHes decoded: 171 of writer, 2 of v5 (the 9,000-byte one is refused before it is read).
    assert value(samples, "mqgate_mqtt_messages_received_total") == 173
    assert value(samples, "mqgate_mqtt_messages_sent_total") == 101
    assert value(samples, "mqgate_mqtt_packets_received_total") > 173
    assert value(samples, "mqgate_mqtt_received_bytes_total") > 100 * 10 + 9000
    assert value(samples, "mqgate_mqtt_sent_bytes_total") > 101 * 10

    # Refused and dropped, by reason.
    assert value(samples, "mqgate_refused_messages_total", part="mqtt", reason="not_authorized") == 1
    assert value(samples, "mqgate_refused_messages_total", part="mqtt", reason="quota_exceeded") == 1
    assert value(samples, "mqgate_refused_messages_total", part="mqtt", reason="packet_too_large") == 1
    assert value(samples, "mqgate_refused_messages_total", part="store", reason="message_too_large") == 1
    assert value(samples, "mqgate_refused_messages_total", part="eventbridge", reason="InvalidAttribute") == 1
    assert value(samples, "mqgate_dropped_messages_total", part="mqtt", reason="max_queued_messages") == 0

    # Store: files on disk, the disk's ratio, flush times (a histogram whose +Inf bucket is its count).
    assert value(samples, "mqgate_store_size_bytes", part="commitlog") >= 100 * 10
    assert value(samples, "mqgate_store_size_bytes", part="consumequeue") > 0
    assert 0 < value(samples, "mqgate_store_disk_usage_ratio") < 1
    flushes = value(samples, "mqgate_store_flush_seconds_count")
    assert flushes >= 1 and value(samples, "mqgate_store_flush_seconds_bucket", le="+Inf") == flushes
    assert value(samples, "mqgate_store_flush_seconds_sum") > 0

    # EventBridge per rule target.
    target = {"bus": "default", "rule": "orders-rule"}
    assert value(samples, "mqgate_eventbridge_matched_total", **target, target="good") == 3
    assert value(samples, "mqgate_eventbridge_delivered_total", **target, target="good") == 3
    assert value(samples, "mqgate_eventbridge_retried_total", **target, target="good") == 0
    assert value(samples, "mqgate_eventbridge_matched_total", **target, target="broken") == 3
    assert value(samples, "mqgate_eventbridge_delivered_total", **target, target="broken") == 0
    assert value(samples, "mqgate_eventbridge_retried_total", **target, target="broken") == 6
    assert broken.requests == 9

    # Connectors: the sink and its one task RUNNING, nothing else.
    assert value(samples, "mqgate_connector_state", connector="archive", state="RUNNING") == 1
    assert value(samples, "mqgate_connector_state", connector="archive", state="FAILED") == 0
    assert value(samples, "mqgate_connector_task_state", connector="archive", task="0", state="RUNNING") == 1
    assert value(samples, "mqgate_connector_task_state", connector="archive", task="0", state="PAUSED") == 0

    _, families = await scrape(server)
    assert families["mqgate_topic_produce_rate"][0] == "gauge" and "60 s" in families["mqgate_topic_produce_rate"][1]
    assert families["mqgate_store_flush_seconds"][0] == "histogram"
    assert families["mqgate_consumer_lag"][0] == "gauge"
    assert families["mqgate_topic_messages_in"][0] == "counter"
    for client in (subscriber, publisher, v5):
        client.close()


async def test_metrics_needs_the_bearer_token_when_one_is_set(tmp_path: Path):
    config = tmp_path / "mqgate.toml"
    config.write_text('[http]\ntoken = "s3cret"\n')
    server = ServeProcess(tmp_path / "data", "--config", config)
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{server.http_url}/metrics") as response:
                assert response.status == 401
            headers = {"Authorization": "Bearer s3cret"}
            async with http.get(f"{server.http_url}/metrics", headers=headers) as response:
                assert response.status == 200
                samples, _ = parse(await response.text())
        assert value(samples, "mqgate_mqtt_clients_connected") == 0
    finally:
        assert server.stop() == 0


def test_rates_cover_the_last_window_from_samples():
    from core import TopicCounts

    rates = TopicRates(start_s=0.0, window_s=60.0)
    # 10 messages/s in, 4 out, for two minutes, sampled every 5 s; then nothing for 30 s.
    for second in range(5, 125, 5):
        rates.sample(float(second), {"t": TopicCounts(second * 10, 0, second * 4, 0)})
    now = {"t": TopicCounts(1200, 0, 480, 0)}
    assert rates.rates(120.0, now)["t"] == pytest.approx((10.0, 4.0))
    for second in range(125, 155, 5):
        rates.sample(float(second), now)
    # From the sample at 90 s (the newest at least 60 s old) to 150 s: 300 of the 60 s window's messages.
    assert rates.rates(150.0, now)["t"] == pytest.approx(((1200 - 900) / 60, (480 - 360) / 60))
    # Just after the start: over the seconds there are; a topic first seen now counts from 0.
    fresh = TopicRates(start_s=100.0)
    assert fresh.rates(102.0, {"new": TopicCounts(6, 0, 0, 0)})["new"] == pytest.approx((3.0, 0.0))
