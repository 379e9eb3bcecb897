"""$SYS/broker/... against a real `mqgate serve` with `[mqtt] sys_interval = 1`, read by mosquitto_sub and paho: the
values, who gets them (`$SYS/#` does, `#` and `+/...` do not) and that clients cannot publish there."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import mqtt5
import paho.mqtt.client as paho

from .conftest import Client, RawV5, Server, configured

WAIT_S = 15.0


def sys_server(server_factory, tmp_path: Path, interval: int = 1) -> Server:
    return configured(server_factory, tmp_path, f"[mqtt]\nsys_interval = {interval}\n")


def mosquitto_sub(server: Server, topic: str, wait_s: int = 10) -> subprocess.CompletedProcess[str]:
    """The first message on `topic`, as `mosquitto_sub -C 1` prints it (giving up after `wait_s`)."""
    return subprocess.run(
        ["mosquitto_sub", "-h", server.host, "-p", str(server.port), "-t", topic, "-C", "1", "-W", str(wait_s)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def wait_for_payload(client: Client, topic: str, payload: bytes) -> list[tuple[str, bytes, bool]]:
    """Messages `client` received until one on `topic` carries `payload` (fails after WAIT_S)."""
    seen = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        [message] = client.receive(1, timeout=max(deadline - time.monotonic(), 0.1))
        seen.append((message.topic, message.payload, message.retain))
        if message.topic == topic and message.payload == payload:
            return seen
    raise AssertionError(f"no {payload!r} on {topic} within {WAIT_S} s: {seen}")


def drain(client: Client) -> list:
    received = []
    while not client.messages.empty():
        received.append(client.messages.get())
    return received


def test_sys_values_reach_mosquitto_sub_and_paho(server_factory, tmp_path):
    server = sys_server(server_factory, tmp_path)
    version = mosquitto_sub(server, "$SYS/broker/version")
    assert (version.returncode, version.stdout) == (0, "mqgate version 0.1.0\n")
    uptime = mosquitto_sub(server, "$SYS/broker/uptime")
    number, unit = uptime.stdout.split()
    assert int(number) >= 0 and unit == "seconds"
    load = mosquitto_sub(server, "$SYS/broker/load/connections/1min").stdout.strip()
    assert float(load) >= 0 and len(load.split(".")[1]) == 2

    one, two = Client(server, "one"), Client(server, "two")
    watcher = Client(server, "watcher")
    watcher.subscribe("$SYS/broker/clients/connected", 0)
    seen = wait_for_payload(watcher, "$SYS/broker/clients/connected", b"3")  # one, two and watcher
    assert seen[0][2] is True  # the value held at SUBSCRIBE comes retained
    if len(seen) > 1:
        assert seen[-1][2] is False  # an update to an established subscription: retain flag 0 [MQTT-3.3.1-9]
    # mosquitto_sub itself may already be counted, if an update ran while it was connected.
    connected = mosquitto_sub(server, "$SYS/broker/clients/connected")
    assert connected.stdout.strip() in ("3", "4")
    two.disconnect()
    wait_for_payload(watcher, "$SYS/broker/clients/connected", b"2")
    total = mosquitto_sub(server, "$SYS/broker/clients/total")
    assert total.stdout.strip() in ("2", "3")  # two's clean session went with it

    one.publish("counted/x", b"hello", qos=1)
    watcher.subscribe("$SYS/broker/publish/messages/received", 0)
    wait_for_payload(watcher, "$SYS/broker/publish/messages/received", b"1")
    for client in (one, watcher):
        client.disconnect()


def test_wildcards_do_not_match_sys_topics_but_sys_filters_do(server_factory, tmp_path):
    server = sys_server(server_factory, tmp_path)
    everything = Client(server, "everything")
    everything.subscribe("#", 0)
    plus = Client(server, "plus")
    plus.subscribe("+/broker/uptime", 0)
    system = Client(server, "system")
    system.subscribe("$SYS/#", 0)
    time.sleep(2.5)  # two updates or more
    uptimes = [m for m in drain(system) if m.topic == "$SYS/broker/uptime"]
    assert len(uptimes) >= 2 and uptimes[0].retain and not uptimes[-1].retain
    publisher = Client(server, "publisher")
    publisher.publish("plain/topic", b"for #", qos=1)
    [got] = everything.receive(1)
    assert got.topic == "plain/topic"  # `#` works, and got nothing of $SYS before it
    assert everything.nothing_more(0.5)
    assert plus.nothing_more(0.5)
    for client in (everything, plus, system, publisher):
        client.disconnect()


def test_clients_cannot_publish_to_sys(server_factory, tmp_path):
    server = sys_server(server_factory, tmp_path)
    system = Client(server, "system")
    system.subscribe("$SYS/#", 0)
    raw = RawV5(server, "forger")
    raw.sendall(mqtt5.PublishPacket("$SYS/broker/uptime", b"forged", qos=mqtt5.QoS.AT_LEAST_ONCE, packet_id=7).write())
    [ack], closed = raw.read(count=1)
    assert isinstance(ack, mqtt5.PubAckPacket) and not closed
    assert (ack.packet_id, int(ack.reason_code)) == (7, 0x87)  # Not authorized, as an ACL denial
    v311 = Client(server, "old", version=paho.MQTTv311)
    info = v311.publish("$SYS/x", b"forged", qos=1)  # 3.1.1: acknowledged and dropped, as Mosquitto
    assert info.is_published()
    v311.paho.publish("$SYS", b"forged", qos=0)
    time.sleep(2.5)  # two updates or more
    received = drain(system)
    assert all(m.payload != b"forged" for m in received)
    assert any(m.topic == "$SYS/broker/uptime" for m in received)
    raw.close()
    for client in (system, v311):
        client.disconnect()


def test_sys_interval_0_publishes_nothing(server_factory, tmp_path):
    server = sys_server(server_factory, tmp_path, interval=0)
    result = mosquitto_sub(server, "$SYS/#", wait_s=2)
    assert result.stdout == ""
    assert result.returncode != 0  # timed out waiting
