"""Every valid MQTT topic name works, with the Mosquitto clients as devices use them: empty levels, spaces, dots,
non-ASCII letters, names the core uses itself; retained messages and wills to them (topic_mapping.py)."""

from __future__ import annotations

import signal
import subprocess
import time

import paho.mqtt.client as paho
import pytest

from .conftest import Client, Server, configured

DEVICE_TOPICS = [
    "/TopicA",
    "home kitchen/temp",
    "dev.1/temp",
    "Gerät/x",
    "a//b",
    "a/",
    "MQTT_SESSIONS/x",
    "connect-configs/x",
    "%DLQ%g/x",
    "sensors/dev1/temp",
]


def mosquitto_sub(server: Server, version: str, count: int, *filters: str) -> subprocess.Popen[str]:
    args = ["mosquitto_sub", "-p", str(server.port), "-V", version, "-q", "1", "-C", str(count), "-W", "20"]
    for topic_filter in filters:
        args += ["-t", topic_filter]
    return subprocess.Popen([*args, "-F", "%t|%p"], stdout=subprocess.PIPE, text=True)


def mosquitto_pub(server: Server, version: str, topic: str, payload: str, *extra: str) -> None:
    subprocess.run(
        ["mosquitto_pub", "-p", str(server.port), "-V", version, "-q", "1", "-t", topic, "-m", payload, *extra],
        check=True,
        timeout=20,
    )


def wait_subscribed() -> None:
    """mosquitto_sub prints nothing when its SUBACK comes; on loopback it has come well within this."""
    time.sleep(1.0)


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_device_topics_reach_subscribers_byte_for_byte(server, version):
    sub = mosquitto_sub(server, version, len(DEVICE_TOPICS), "#")
    wait_subscribed()
    for number, topic in enumerate(DEVICE_TOPICS):
        mosquitto_pub(server, version, topic, f"m{number}")
    out, _ = sub.communicate(timeout=30)
    assert out.splitlines() == [f"{topic}|m{number}" for number, topic in enumerate(DEVICE_TOPICS)]


def test_wildcards_match_empty_levels_as_the_specification_says(server):
    # '+' matches one level, empty included; '#' its parent level too ([MQTT-4.7.1-2]); '/TopicA' has two levels.
    sub = mosquitto_sub(server, "mqttv5", 4, "+/TopicA", "a/+/b", "a/#")
    wait_subscribed()
    for topic in ("/TopicA", "TopicA", "a//b", "a", "b/TopicA/x", "a/end"):
        mosquitto_pub(server, "mqttv5", topic, topic)
    out, _ = sub.communicate(timeout=30)
    # 'a//b' matches two of the filters and comes once; 'TopicA' and 'b/TopicA/x' match none, so the last line is
    # the sentinel 'a/end'.
    assert out.splitlines() == ["/TopicA|/TopicA", "a//b|a//b", "a|a", "a/end|a/end"]


def test_dollar_topics_are_not_matched_by_a_first_level_wildcard(server):
    everything = Client(server, "everything", paho.MQTTv5)
    everything.subscribe("#", 1)
    plus = Client(server, "plus", paho.MQTTv5)
    plus.subscribe("+/x", 1)
    dollar = Client(server, "dollar", paho.MQTTv5)
    dollar.subscribe("$dev/#", 1)
    mosquitto_pub(server, "mqttv5", "$dev/x", "hidden")
    mosquitto_pub(server, "mqttv5", "dev/x", "seen")
    assert [(m.topic, m.payload) for m in dollar.receive(1)] == [("$dev/x", b"hidden")]
    assert [(m.topic, m.payload) for m in everything.receive(1)] == [("dev/x", b"seen")]
    assert [(m.topic, m.payload) for m in plus.receive(1)] == [("dev/x", b"seen")]
    assert everything.nothing_more() and plus.nothing_more()


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_retained_messages_on_device_topics_survive_a_restart(server_factory, version):
    server = server_factory()
    for number, topic in enumerate(DEVICE_TOPICS):
        mosquitto_pub(server, version, topic, f"r{number}", "-r")
    server.stop()
    server = server_factory(data_dir=server.data_dir)
    sub = mosquitto_sub(server, version, len(DEVICE_TOPICS), "#")
    out, _ = sub.communicate(timeout=30)
    assert sorted(out.splitlines()) == sorted(f"{topic}|r{number}" for number, topic in enumerate(DEVICE_TOPICS))


def test_a_will_to_an_empty_first_level_is_published_when_keepalive_expires(server):
    watcher = Client(server, "watcher", paho.MQTTv311)
    watcher.subscribe("/TopicA", 1)
    # A device that stops answering: mosquitto_sub with a will and a 5 s keepalive, then frozen (SIGSTOP), so its
    # socket stays open and only the keepalive (1.5 periods) can end it.
    device = subprocess.Popen(
        ["mosquitto_sub", "-p", str(server.port), "-V", "mqttv311", "-i", "frozen", "-k", "5", "-t", "none",
         "--will-topic", "/TopicA", "--will-payload", "gone", "--will-qos", "1"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        device.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        got = watcher.receive(1, timeout=20)
        assert [(m.topic, m.payload) for m in got] == [("/TopicA", b"gone")]
        assert time.monotonic() - started >= 5  # not before the keepalive ran out
    finally:
        device.kill()
        device.wait(10)


def test_a_topic_the_configuration_does_not_take_is_refused_not_acknowledged(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, '[mqtt]\ntopics = ["plant", ""]\n')
    watcher = Client(server, "watcher", paho.MQTTv5)
    watcher.subscribe("#", 1)
    v5 = Client(server, "v5", paho.MQTTv5)
    acks: list[int] = []
    v5.paho.on_publish = lambda c, u, mid, reason, props: acks.append(int(reason.value))
    v5.publish("office/x", b"refused", qos=1)
    v5.publish("/TopicA", b"empty first level is configured", qos=1)
    assert acks == [0x90, 0]  # MQTT 5: Topic Name invalid, "not accepted by this Server"
    # MQTT 3.1.1 cannot say no in a PUBACK: the connection is closed and mosquitto_pub fails.
    refused = subprocess.run(
        ["mosquitto_pub", "-p", str(server.port), "-V", "mqttv311", "-q", "1", "-t", "office/x", "-m", "no"],
        capture_output=True,
        timeout=20,
    )
    assert refused.returncode != 0
    mosquitto_pub(server, "mqttv311", "plant/x", "yes")
    got = watcher.receive(2)
    assert [(m.topic, m.payload) for m in got] == [("/TopicA", b"empty first level is configured"), ("plant/x", b"yes")]
    assert watcher.nothing_more()


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_wills_to_device_topics_are_published_when_a_device_dies(server, version):
    watcher = Client(server, "watcher", paho.MQTTv5)
    watcher.subscribe("#", 1)
    devices = []
    for number, topic in enumerate(DEVICE_TOPICS):
        devices.append(subprocess.Popen(
            ["mosquitto_sub", "-p", str(server.port), "-V", version, "-i", f"dev{number}", "-t", "none",
             "--will-topic", topic, "--will-payload", f"w{number}", "--will-qos", "1"],
            stdout=subprocess.DEVNULL,
        ))  # fmt: skip
    time.sleep(1.0)  # connected (mosquitto_sub says nothing when it is)
    for device in devices:
        device.kill()  # the connection drops without a DISCONNECT: the will is published
        device.wait(10)
    got = watcher.receive(len(DEVICE_TOPICS), timeout=20)
    assert sorted((m.topic, m.payload) for m in got) == sorted(
        (topic, f"w{number}".encode()) for number, topic in enumerate(DEVICE_TOPICS)
    )
