"""ACL files against Mosquitto itself: the same acl_file and password file loaded by mqgate and by a running
mosquitto, and the decisions of both compared over a table of clients, topics and accesses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from mqtt_bridge.access.acl_file import Access
from mqtt_bridge.access.password_file import set_password
from tests.mqtt_bridge.access.test_acl_file import R, W, load
from tests.mqtt_bridge.access.test_password_file import needs_mosquitto, running_mosquitto

BROKER_ACL = """\
# anonymous clients
topic read public/#
topic deny public/private/#
topic write anon/in

user alice
topic readwrite alice/#
topic deny alice/secret/#
topic read shared/+/status
topic write shared/alice/cmd
topic read $app/alice

user bob
topic #

user admin
topic readwrite #
topic readwrite $app/#

pattern readwrite devices/%c/#
pattern deny devices/%c/locked
pattern read inbox/%u/#
pattern read marker/%c
"""

# (username, client id, topic, access). Only cases where Mosquitto 2.0 and the module docstring agree: the
# documented departures (pattern deny vs section grant, '/' in ids) are covered by the tests above.
BROKER_CASES: list[tuple[str | None, str, str, Access]] = [
    (None, "anon-1", "public/news", R),
    (None, "anon-1", "public/private/x", R),
    (None, "anon-1", "public/news", W),
    (None, "anon-1", "anon/in", W),
    (None, "anon-1", "anon/in", R),
    (None, "anon-1", "alice/x", R),
    (None, "anon-1", "devices/anon-1/t", W),
    (None, "anon-1", "devices/anon-2/t", W),
    (None, "anon-1", "devices/anon-1/locked", W),
    (None, "anon-1", "inbox/anon-1/x", R),
    (None, "anon-1", "$app/alice", R),
    (None, "dev#1", "anon/in", W),
    ("alice", "alice-1", "alice/x", W),
    ("alice", "alice-1", "alice/x", R),
    ("alice", "alice-1", "alice", R),
    ("alice", "alice-1", "alice/secret/x", W),
    ("alice", "alice-1", "alice/secret", R),
    ("alice", "alice-1", "shared/k/status", R),
    ("alice", "alice-1", "shared/k/status", W),
    ("alice", "alice-1", "shared/k/status/more", R),
    ("alice", "alice-1", "shared/alice/cmd", W),
    ("alice", "alice-1", "shared/alice/cmd", R),
    ("alice", "alice-1", "public/news", R),
    ("alice", "alice-1", "$app/alice", R),
    ("alice", "alice-1", "inbox/alice/m", R),
    ("alice", "alice-1", "inbox/bob/m", R),
    ("alice", "alice-1", "inbox/alice/m", W),
    ("alice", "alice-1", "devices/alice-1/t", W),
    ("alice", "alice-1", "devices/alice-1", R),
    ("bob", "bob-1", "anything/x", R),
    ("bob", "bob-1", "devices/other/locked", W),
    ("bob", "bob-1", "$app/alice", R),
    ("carol", "carol-1", "public/news", R),
    ("carol", "carol-1", "devices/carol-1/x", W),
    ("carol", "carol-1", "inbox/carol/x", R),
]
# The documented departures: Mosquitto 2.0 allows these (a section grant beats a pattern deny; '/' in a client id
# spans levels), we deny them. Checked one way only, ours implies Mosquitto's, so a Mosquitto that closes the gap
# (2.1 for the '/') keeps the test green: the point is that we are never more permissive.
DEPARTURE_CASES: list[tuple[str | None, str, str, Access]] = [
    ("bob", "bob-1", "devices/bob-1/locked", W),
    (None, "a/b", "devices/a/b/x", W),
]
PASSWORD = "pw"
TIMEOUT = 10


class Session:
    """A paho MQTT 5 client, connected and looping, with what it received."""

    def __init__(self, port: int, username: str | None, client_id: str) -> None:
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        if username is not None:
            self.client.username_pw_set(username, PASSWORD)
        self.events: dict[str, threading.Event] = {"connect": threading.Event(), "subscribe": threading.Event()}
        self.codes: dict[str, object] = {}
        self.received: list[str] = []
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_publish = self._on_publish
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert self.events["connect"].wait(TIMEOUT), "no CONNACK"
        assert not getattr(self.codes["connect"], "is_failure", True), f"CONNACK {self.codes['connect']}"

    def _on_connect(self, client: mqtt.Client, userdata: object, flags: object, code: object, props: object) -> None:
        self.codes["connect"] = code
        self.events["connect"].set()

    def _on_subscribe(self, client: mqtt.Client, userdata: object, mid: int, codes: object, props: object) -> None:
        self.events["subscribe"].set()

    def _on_publish(self, client: mqtt.Client, userdata: object, mid: int, code: object, props: object) -> None:
        self.codes[f"puback-{mid}"] = code
        self.events.setdefault(f"puback-{mid}", threading.Event()).set()

    def _on_message(self, client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        self.received.append(message.topic)
        self.events.setdefault(f"message-{message.topic}", threading.Event()).set()

    def publish(self, topic: str) -> bool:
        """Publish at QoS 1; True when the PUBACK reports success (Mosquitto answers 0x87 to a denied PUBLISH)."""
        info = self.client.publish(topic, b"x", qos=1)
        event = self.events.setdefault(f"puback-{info.mid}", threading.Event())
        assert event.wait(TIMEOUT), f"no PUBACK for {topic}"
        return not getattr(self.codes[f"puback-{info.mid}"], "is_failure", True)

    def subscribe(self, *topics: str) -> None:
        self.events["subscribe"].clear()
        self.client.subscribe([(topic, 1) for topic in topics])
        assert self.events["subscribe"].wait(TIMEOUT), "no SUBACK"

    def wait_for(self, topic: str) -> None:
        event = self.events.setdefault(f"message-{topic}", threading.Event())
        assert event.wait(TIMEOUT), f"{topic} was not delivered"

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def broker_allows(port: int, admin: Session, username: str | None, client_id: str, topic: str, access: Access) -> bool:
    session = Session(port, username, client_id)
    try:
        if access is Access.WRITE:
            return session.publish(topic)
        # Mosquitto's acl_file lets every SUBSCRIBE through and checks READ per delivered message. The marker is
        # published after the probe by the same client at the same QoS, so it arrives after the probe would have.
        marker = f"marker/{client_id}"
        session.subscribe(topic, marker)
        assert admin.publish(topic)
        assert admin.publish(marker)
        session.wait_for(marker)
        return topic in session.received
    finally:
        session.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[int]:
    passwords = tmp_path / "passwords"
    for user in ("alice", "bob", "carol", "admin"):
        set_password(passwords, user, PASSWORD)
    acl = tmp_path / "acl"
    acl.write_text(BROKER_ACL)
    settings = [f"password_file {passwords}", f"acl_file {acl}", "allow_anonymous true"]
    with running_mosquitto(tmp_path, settings) as port:
        yield port


@needs_mosquitto
def test_decisions_agree_with_mosquitto(tmp_path: Path, broker: int) -> None:
    ours = load(tmp_path, BROKER_ACL)
    admin = Session(broker, "admin", "admin-1")
    try:
        mismatches = []
        for username, client_id, topic, access in BROKER_CASES:
            expected = ours.check(username=username, client_id=client_id, topic=topic, access=access)
            actual = broker_allows(broker, admin, username, client_id, topic, access)
            if actual is not expected:
                mismatches.append(f"{username}/{client_id} {access.name} {topic}: mosquitto {actual}, ours {expected}")
        for username, client_id, topic, access in DEPARTURE_CASES:
            ours_allows = ours.check(username=username, client_id=client_id, topic=topic, access=access)
            assert not ours_allows
            assert not ours_allows or broker_allows(broker, admin, username, client_id, topic, access)
    finally:
        admin.close()

    assert not mismatches, "\n".join(mismatches)
    decisions = {ours.check(username=u, client_id=c, topic=t, access=a) for u, c, t, a in BROKER_CASES}
    assert decisions == {True, False}  # the table exercises both outcomes
