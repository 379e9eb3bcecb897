"""Session rules against `mqgate serve`: redelivery with DUP, expiry, takeover, clean start, will delay."""

from __future__ import annotations

import time

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from .conftest import Client


def v5_connect_properties(**values: int) -> Properties:
    properties = Properties(PacketTypes.CONNECT)
    for name, value in values.items():
        setattr(properties, name, value)
    return properties


def test_unacknowledged_publishes_are_resent_with_dup_and_their_packet_ids(server):
    sub = Client(server, "resend", paho.MQTTv5, clean=False, properties=v5_connect_properties(SessionExpiryInterval=60))
    sub.paho.manual_ack_set(True)  # receives, never acknowledges
    sub.subscribe("redo/#", 1)
    pub = Client(server, "pub")
    for n in range(3):
        pub.publish("redo/x", b"%d" % n, qos=1)
    first = sub.receive(3)
    assert [m.dup for m in first] == [False, False, False]
    sub.drop()
    again = Client(server, "resend", paho.MQTTv5, clean=False)
    assert again.flags.session_present is True
    resent = again.receive(3)
    assert [(m.payload, m.mid, m.dup) for m in resent] == [(m.payload, m.mid, True) for m in first]
    assert again.nothing_more()


def test_acknowledged_publishes_are_not_resent(server):
    sub = Client(server, "acked", paho.MQTTv311, clean=False)
    sub.subscribe("done/#", 2)
    pub = Client(server, "pub")
    for n in range(3):
        pub.publish("done/x", b"%d" % n, qos=2)
    assert len(sub.receive(3)) == 3
    time.sleep(0.3)  # let the last PUBCOMP reach the server before the socket goes
    sub.drop()
    again = Client(server, "acked", paho.MQTTv311, clean=False)
    assert again.flags.session_present is True
    assert again.nothing_more()


def test_session_expiry_deletes_the_session(server):
    sub = Client(server, "brief", paho.MQTTv5, clean=False, properties=v5_connect_properties(SessionExpiryInterval=1))
    sub.subscribe("gone/#", 1)
    sub.disconnect()
    pub = Client(server, "pub")
    pub.publish("gone/x", b"early", qos=1)  # queued for the session while it lasts
    time.sleep(2.5)
    pub.publish("gone/x", b"late", qos=1)
    again = Client(server, "brief", paho.MQTTv5, clean=False)
    assert again.flags.session_present is False
    assert again.nothing_more()  # neither message: the subscription went with the session


def test_session_within_its_expiry_keeps_what_it_missed(server):
    sub = Client(server, "kept", paho.MQTTv5, clean=False, properties=v5_connect_properties(SessionExpiryInterval=30))
    sub.subscribe("kept/#", 1)
    sub.disconnect()
    pub = Client(server, "pub")
    pub.publish("kept/x", b"while away", qos=1)
    again = Client(server, "kept", paho.MQTTv5, clean=False)
    assert again.flags.session_present is True
    assert again.receive(1)[0].payload == b"while away"


def test_clean_start_discards_the_old_session(server):
    sub = Client(server, "fresh", paho.MQTTv311, clean=False)
    sub.subscribe("old/#", 1)
    sub.disconnect()
    pub = Client(server, "pub")
    pub.publish("old/x", b"missed", qos=1)
    clean = Client(server, "fresh", paho.MQTTv311, clean=True)
    assert clean.flags.session_present is False
    assert clean.nothing_more()
    clean.disconnect()
    back = Client(server, "fresh", paho.MQTTv311, clean=False)
    assert back.flags.session_present is False  # the clean session replaced it and ended with its connection


def test_session_takeover_disconnects_the_older_connection(server):
    first = Client(server, "twin", paho.MQTTv5, clean=False, properties=v5_connect_properties(SessionExpiryInterval=60))
    first.subscribe("twin/#", 1)
    second = Client(server, "twin", paho.MQTTv5, clean=False)
    assert second.flags.session_present is True
    assert first.disconnects.get(timeout=10) == 0x8E  # Session taken over
    first.paho.loop_stop()
    pub = Client(server, "pub")
    pub.publish("twin/x", b"to the new one", qos=1)
    assert second.receive(1)[0].payload == b"to the new one"


def test_will_delay_is_kept_and_cancelled_by_a_reconnect(server):
    watcher = Client(server, "watcher")
    watcher.subscribe("wills/#", 1)
    will = Properties(PacketTypes.WILLMESSAGE)
    will.WillDelayInterval = 2

    quick = Client(
        server,
        "quick",
        paho.MQTTv5,
        clean=False,
        properties=v5_connect_properties(SessionExpiryInterval=60),
        will=("wills/quick", b"quick gone", 1, False),
        will_properties=will,
    )
    quick.drop()
    back = Client(server, "quick", paho.MQTTv5, clean=False)  # back within the will delay: no will
    slow = Client(
        server,
        "slow",
        paho.MQTTv5,
        clean=False,
        properties=v5_connect_properties(SessionExpiryInterval=60),
        will=("wills/slow", b"slow gone", 1, False),
        will_properties=will,
    )
    slow.drop()
    dropped_at = time.monotonic()
    assert watcher.nothing_more(1.0)  # not before the delay
    [got] = watcher.receive(1, timeout=10)
    assert (got.topic, got.payload) == ("wills/slow", b"slow gone")
    assert time.monotonic() - dropped_at >= 1.5
    assert watcher.nothing_more(1.0)
    back.disconnect()


def test_will_is_published_at_session_end_if_sooner_than_the_delay(server):
    watcher = Client(server, "watcher")
    watcher.subscribe("wills/#", 1)
    will = Properties(PacketTypes.WILLMESSAGE)
    will.WillDelayInterval = 60
    short = Client(
        server,
        "short",
        paho.MQTTv5,
        clean=True,
        properties=v5_connect_properties(SessionExpiryInterval=0),
        will=("wills/short", b"session ended", 1, False),
        will_properties=will,
    )
    short.drop()
    [got] = watcher.receive(1, timeout=10)  # the session ends with the connection: the will goes now
    assert got.payload == b"session ended"


def test_overlapping_subscriptions_keep_the_publish_order_over_a_long_backlog(server):
    # Two filters, two queues: each is read 64 entries at a time, and the merge must not let one queue's later
    # messages overtake the other's earlier ones. QoS 0, so that no send window cuts a round short.
    sub = Client(server, "merge", paho.MQTTv5, clean=False, properties=v5_connect_properties(SessionExpiryInterval=60))
    sub.subscribe([("order/#", 0), ("order/a", 0)])
    sub.disconnect()
    pub = Client(server, "pub")
    sent = []
    for n in range(300):
        topic = "order/a" if n % 3 == 0 else f"order/b{n % 2}"
        payload = f"{n}".encode()
        pub.publish(topic, payload, qos=1)
        sent.append(payload)
    pub.disconnect()
    again = Client(server, "merge", paho.MQTTv5, clean=False)
    received = [message.payload for message in again.receive(300, timeout=30)]
    assert received == sent
    assert again.nothing_more()
