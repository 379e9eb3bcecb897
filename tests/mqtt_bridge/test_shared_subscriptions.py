"""Shared subscriptions (`$share/<group>/<filter>`) against `mqgate serve`: a clustering group of MQTT clients."""

from __future__ import annotations

import queue
import subprocess
import time

import paho.mqtt.client as paho

from .conftest import Client


def drain(client: Client, wait: float = 1.0) -> list[bytes]:
    """Everything the client receives until it has been quiet for `wait` seconds."""
    got = []
    while True:
        try:
            got.append(client.messages.get(timeout=wait).payload)
        except queue.Empty:
            return got


def test_each_message_goes_to_one_member_and_plain_subscribers_get_all(server):
    members = [
        Client(server, "m1", paho.MQTTv5),
        Client(server, "m2", paho.MQTTv5),
        Client(server, "m3", paho.MQTTv311),
    ]
    for member in members:
        assert [code.value for code in member.subscribe("$share/workers/jobs/#", 1)] == [1]  # type: ignore[attr-defined]
    plain = Client(server, "plain")
    plain.subscribe("jobs/#", 1)
    pub = Client(server, "pub")
    sent = {b"job-%d" % n for n in range(300)}
    for n in range(300):
        pub.paho.publish(f"jobs/{n % 5}", b"job-%d" % n, qos=1)
    assert {m.payload for m in plain.receive(300, timeout=30)} == sent
    shares = [drain(member) for member in members]
    received = [payload for share in shares for payload in share]
    assert sorted(received) == sorted(sent)  # all of them, none twice
    assert all(shares), [len(share) for share in shares]  # the work was spread over the members


def test_suback_grants_shared_subscriptions(server):
    v5 = Client(server, "v5", paho.MQTTv5)
    assert [code.value for code in v5.subscribe("$share/g/a/+", 2)] == [2]  # type: ignore[attr-defined]
    v311 = Client(server, "v311", paho.MQTTv311)
    assert [code.value for code in v311.subscribe("$share/g/a/+", 1)] == [1]  # type: ignore[attr-defined]


def test_two_groups_each_get_every_message_once(server):
    groups = {name: [Client(server, f"{name}{i}", paho.MQTTv5) for i in range(2)] for name in ("ga", "gb")}
    for name, clients in groups.items():
        for client in clients:
            client.subscribe(f"$share/{name}/t/#", 1)
    pub = Client(server, "pub")
    for n in range(50):
        pub.paho.publish("t/x", b"%d" % n, qos=1)
    for clients in groups.values():
        got = [payload for client in clients for payload in drain(client)]
        assert sorted(got) == sorted(b"%d" % n for n in range(50))


def test_unacknowledged_messages_of_a_member_that_goes_reach_another(server):
    # A member that takes messages and never acknowledges them (manual acks, never sent), then drops.
    silent = Client(server, "silent", paho.MQTTv5)
    silent.paho.manual_ack_set(True)
    silent.subscribe("$share/g/work/#", 1)
    pub = Client(server, "pub")
    for n in range(40):
        pub.paho.publish("work/x", b"%d" % n, qos=1)
    held = silent.receive(1, timeout=10)  # it holds some now
    assert held
    busy = Client(server, "busy", paho.MQTTv5)
    busy.subscribe("$share/g/work/#", 1)
    silent.drop()
    got = set(drain(busy, wait=2.0))
    assert got == {b"%d" % n for n in range(40)}  # including what the silent member held


def test_shared_subscription_of_a_persistent_session_survives_a_restart(server_factory):
    server = server_factory()
    member = Client(server, "member", paho.MQTTv311, clean=False)
    member.subscribe("$share/g/keep/#", 1)
    member.disconnect()
    pub = Client(server, "pub")
    for n in range(10):
        pub.publish("keep/x", b"%d" % n, qos=1)
    pub.disconnect()
    server.kill()  # SIGKILL: the group's consumer offset may never have been written
    server = server_factory(data_dir=server.data_dir)
    member = Client(server, "member", paho.MQTTv311, clean=False)
    assert member.flags.session_present is True
    assert sorted(m.payload for m in member.receive(10)) == sorted(b"%d" % n for n in range(10))
    assert member.nothing_more()


def test_no_retained_messages_for_a_shared_subscription(server):
    pub = Client(server, "pub")
    pub.publish("ret/x", b"kept", qos=1, retain=True)
    member = Client(server, "member", paho.MQTTv5)
    member.subscribe("$share/g/ret/#", 1)
    plain = Client(server, "plain", paho.MQTTv5)
    plain.subscribe("ret/#", 1)
    assert plain.receive(1)[0].payload == b"kept"
    assert member.nothing_more()


def test_mosquitto_sub_in_a_shared_group(server):
    port = str(server.port)
    subs = [
        subprocess.Popen(
            ["mosquitto_sub", "-p", port, "-t", "$share/cli/m/#", "-q", "1", "-V", "mqttv5", "-W", "8"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(1.0)  # mosquitto_sub prints nothing when subscribed
    pub = Client(server, "pub")
    for n in range(20):
        pub.paho.publish("m/x", b"%d" % n, qos=1)
    lines = []
    for sub in subs:
        out, _ = sub.communicate(timeout=20)
        lines.extend(out.splitlines())
    assert sorted(lines, key=int) == [str(n) for n in range(20)]


def test_max_queued_messages_drops_the_oldest(server_factory, tmp_path):
    config = tmp_path / "mqgate.toml"
    config.write_text("[mqtt]\nmax_queued_messages = 5\n")
    server = server_factory("--config", str(config))
    offline = Client(server, "offline", clean=False)
    offline.subscribe("burst/#", 1)
    offline.disconnect()
    shared = Client(server, "shared-member", clean=False)
    shared.subscribe("$share/g/burst/#", 1)
    shared.disconnect()
    # Another filter's light queue gets its entries in the same dispatch: once the probe has the last message,
    # every queue holds all 20 (the probe itself may skip some: it is subject to the same limit).
    probe = Client(server, "probe")
    probe.subscribe("burst/+", 1)
    pub = Client(server, "pub")
    for n in range(20):
        pub.publish("burst/x", b"%d" % n, qos=1)
    while probe.receive(1)[0].payload != b"19":
        pass
    for client_id in ("offline", "shared-member"):
        client = Client(server, client_id, clean=False)
        assert [m.payload for m in client.receive(5)] == [b"%d" % n for n in range(15, 20)]
        assert client.nothing_more()
        client.disconnect()
