"""Authentication and ACLs end to end: `mqgate serve` with a password file (written by mosquitto_passwd and by our
own writer) and an ACL file, driven by paho and raw sockets where the exact 3.1.1 bytes matter."""

from __future__ import annotations

import queue
import re
import shutil
import socket
import subprocess
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from mqtt_bridge.access.password_file import set_password
from tests.serve_process import ServeProcess, serve_command

from .conftest import ROOT, Client, Server

MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")

USERS = {"alice": "alice's pässword", "bob": "bob:secret", "admin": "root of all"}

ACL = """\
# Anonymous clients (when allowed) may read the public tree.
topic read public/#

user alice
topic readwrite alice/#
topic deny alice/secret/#
topic read news/#

user bob
topic write news/#
topic write users/+/inbox

user admin
topic readwrite #

pattern readwrite devices/%c/#
pattern read users/%u/inbox
"""


def write_passwords(path: Path, writer: str) -> None:
    if writer == "mosquitto_passwd":
        assert MOSQUITTO_PASSWD is not None, "mosquitto_passwd is not installed (make deb)"
        for index, (user, password) in enumerate(USERS.items()):
            create = ["-c"] if index == 0 else []
            subprocess.run([MOSQUITTO_PASSWD, *create, "-b", str(path), user, password], check=True, timeout=30)
    else:
        for user, password in USERS.items():
            set_password(path, user, password)


@pytest.fixture(params=["mosquitto_passwd", "mqgate"])
def secured(request, tmp_path, server_factory) -> Server:
    """A server with the password file (written by either tool) and the ACL above; allow_anonymous is not set, so
    the password file alone refuses anonymous clients."""
    return start_secured(tmp_path, server_factory, request.param)


def start_secured(
    tmp_path: Path, server_factory, writer: str = "mqgate", *, allow_anonymous: bool | None = None
) -> Server:
    passwords = tmp_path / "passwords"
    write_passwords(passwords, writer)
    acl = tmp_path / "acl"
    acl.write_text(ACL)
    config = tmp_path / "mqgate.toml"
    anonymous = "" if allow_anonymous is None else f"allow_anonymous = {'true' if allow_anonymous else 'false'}\n"
    config.write_text(f'[mqtt]\npassword_file = "{passwords}"\nacl_file = "{acl}"\n{anonymous}')
    return server_factory("--config", str(config))


def as_user(server: Server, user: str, client_id: str = "", version: int = paho.MQTTv311) -> Client:
    client = Client(server, client_id or f"{user}-client", version, username=user, password=USERS[user])
    assert client.reason == 0, client.reason
    return client


def mqtt_string(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def raw_connect_v311(server: Server, username: str | None = None, password: str | None = None) -> bytes:
    """Send a 3.1.1 CONNECT and return the CONNACK's four bytes exactly as the server wrote them."""
    flags = 0x02 | (0x80 if username is not None else 0) | (0x40 if password is not None else 0)
    body = b"\x00\x04MQTT\x04" + bytes([flags]) + (60).to_bytes(2, "big") + mqtt_string("raw")
    if username is not None:
        body += mqtt_string(username)
    if password is not None:
        body += mqtt_string(password)
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        answer = b""
        while len(answer) < 4:
            chunk = sock.recv(4 - len(answer))
            if not chunk:
                break
            answer += chunk
        if answer[3:4] != b"\x00":
            assert sock.recv(16) == b""  # refused: the server closes the connection after the CONNACK
    return answer


def refused_reason(server: Server, version: int, username: str | None, password: str | None) -> int:
    """The CONNACK reason code paho reports for this CONNECT."""
    client = Client(server, "refused", version, username=username, password=password)
    client.disconnect()
    return int(client.reason.value)  # type: ignore[attr-defined]


# --- passwords --------------------------------------------------------------------------------------------------


def test_right_password_connects_with_both_protocol_levels(secured):
    for version in (paho.MQTTv311, paho.MQTTv5):
        for user in USERS:
            as_user(secured, user, version=version).disconnect()
    assert raw_connect_v311(secured, "alice", USERS["alice"]) == b"\x20\x02\x00\x00"


@pytest.mark.parametrize(
    ("username", "password"),
    [("alice", "wrong"), ("alice", USERS["bob"]), ("carol", "anything"), ("alice", None), ("alice", "")],
    ids=["wrong", "another user's", "unknown user", "no password", "empty password"],
)
def test_bad_credentials_get_4_in_v311_and_0x86_in_v5(secured, username, password):
    assert raw_connect_v311(secured, username, password) == b"\x20\x02\x00\x04"
    assert refused_reason(secured, paho.MQTTv311, username, password) == 0x86  # paho maps 3.1.1's 4 to 0x86
    assert refused_reason(secured, paho.MQTTv5, username, password) == 0x86


def test_anonymous_is_refused_with_5_in_v311_and_0x87_in_v5(secured):
    assert raw_connect_v311(secured) == b"\x20\x02\x00\x05"
    assert refused_reason(secured, paho.MQTTv311, None, None) == 0x87  # paho maps 3.1.1's 5 to 0x87
    assert refused_reason(secured, paho.MQTTv5, None, None) == 0x87


def test_anonymous_allowed_gets_the_anonymous_section_and_passwords_still_count(tmp_path, server_factory):
    server = start_secured(tmp_path, server_factory, allow_anonymous=True)
    assert raw_connect_v311(server) == b"\x20\x02\x00\x00"
    assert raw_connect_v311(server, "alice", "wrong") == b"\x20\x02\x00\x04"
    anonymous = Client(server, "anon")
    assert [code.value for code in anonymous.subscribe([("public/#", 1), ("alice/#", 1)])] == [1, 0x80]
    admin = as_user(server, "admin")
    admin.publish("public/notice", b"hello", qos=1)
    assert anonymous.receive(1)[0].payload == b"hello"


@pytest.mark.parametrize(
    ("mqtt", "verdict"),
    [
        ("", "allowed (no [mqtt] password_file; setting one refuses them)"),
        (
            'password_file = "{passwords}"\n',
            "refused ([mqtt] password_file is set; allow_anonymous = true would let them in)",
        ),
        (
            'password_file = "{passwords}"\nallow_anonymous = true\n',
            "allowed ([mqtt] allow_anonymous = true from {at})",
        ),
    ],
    ids=["no password file", "password file", "password file and allow_anonymous"],
)
def test_serve_says_at_start_whether_anonymous_clients_may_connect_and_keeps_to_it(tmp_path, mqtt, verdict):
    passwords = tmp_path / "passwords"
    write_passwords(passwords, "mqgate")
    config = tmp_path / "mqgate.toml"
    config.write_text("[mqtt]\n" + mqtt.format(passwords=passwords))
    serve = ServeProcess(tmp_path / "data", "--config", config)
    try:
        port = serve.ready["mqtt"].rpartition(":")[2]
        for version in ("mqttv311", "mqttv5"):
            result = subprocess.run(
                ["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", version, "-t", "t/x", "-m", "m", "-q", "1"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if verdict.startswith("allowed"):
                assert result.returncode == 0, result.stderr
            else:  # 3.1.1: "Connection Refused: not authorised." (CONNACK 5); 5: "Not authorized" (0x87)
                assert result.returncode != 0
                assert "not authori" in result.stderr.lower(), result.stderr
        assert f"anonymous MQTT clients: {verdict.format(at=f'{config}:3')}" in serve.stderr()
    finally:
        assert serve.stop() == 0


def test_mosquitto_clients_authenticate(secured):
    common = ["-h", secured.host, "-p", str(secured.port), "-t", "alice/x", "-m", "m", "-q", "1"]
    good = subprocess.run(["mosquitto_pub", *common, "-u", "alice", "-P", USERS["alice"]], capture_output=True)
    assert good.returncode == 0, good.stderr
    bad = subprocess.run(["mosquitto_pub", *common, "-u", "alice", "-P", "nope"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "bad user name or password" in bad.stderr.lower()


# --- ACL --------------------------------------------------------------------------------------------------------


def test_refused_subscribe_gets_0x80_in_v311_and_0x87_in_v5(secured):
    v3 = as_user(secured, "alice")
    assert [code.value for code in v3.subscribe([("alice/#", 1), ("bob/#", 1), ("news/#", 0)])] == [1, 0x80, 0]
    v5 = as_user(secured, "alice", "alice-5", paho.MQTTv5)
    assert [code.value for code in v5.subscribe([("alice/#", 1), ("bob/#", 1), ("news/#", 0)])] == [1, 0x87, 0]
    # A filter wider than the grant is refused too, though part of it would be allowed.
    assert [code.value for code in v5.subscribe("#", 1)] == [0x87]


def publish_and_wait(client: Client, topic: str, payload: bytes) -> int:
    """Publish at QoS 1 and return the PUBACK's reason code as paho reports it."""
    acks: queue.Queue[int] = queue.Queue()
    client.paho.on_publish = lambda c, u, mid, reason, props: acks.put(int(reason.value))
    info = client.paho.publish(topic, payload, qos=1)
    info.wait_for_publish(10)
    assert info.is_published()
    return acks.get(timeout=10)


def test_refused_publish_is_acknowledged_and_dropped_in_v311_and_gets_0x87_in_v5(secured):
    admin = as_user(secured, "admin")
    admin.subscribe("#", 1)
    v3 = as_user(secured, "alice")
    assert publish_and_wait(v3, "bob/x", b"v3 refused") == 0  # 3.1.1 cannot say no: a plain PUBACK
    v5 = as_user(secured, "alice", "alice-5", paho.MQTTv5)
    assert publish_and_wait(v5, "bob/x", b"v5 refused") == 0x87
    # The connections stay usable and allowed publishes still go through, after the refused ones.
    assert publish_and_wait(v3, "alice/ok", b"v3 allowed") == 0
    assert publish_and_wait(v5, "alice/ok", b"v5 allowed") == 0
    got = admin.receive(2)
    assert sorted(m.payload for m in got) == [b"v3 allowed", b"v5 allowed"]
    assert admin.nothing_more()


def test_pubacks_of_a_run_with_a_refusal_inside_come_in_publish_order(secured):
    # QoS 1 publishes read together are stored as a run; the refused one's PUBACK must not overtake those before
    # it, nor the stored ones be lost ([MQTT-4.6.0-2]).
    admin = as_user(secured, "admin")
    admin.subscribe("alice/#", 1)
    alice = as_user(secured, "alice", "alice-run", paho.MQTTv5)
    acks: queue.Queue[tuple[int, int]] = queue.Queue()
    alice.paho.on_publish = lambda c, u, mid, reason, props: acks.put((mid, int(reason.value)))
    topics = ["alice/1", "alice/2", "bob/x", "alice/3", "alice/secret/y", "alice/4"]
    infos = [alice.paho.publish(topic, topic.encode(), qos=1) for topic in topics]  # no wait: one read, one run
    for info in infos:
        info.wait_for_publish(10)
    got = [acks.get(timeout=10) for _ in topics]
    assert [mid for mid, _ in got] == [info.mid for info in infos]
    assert [reason for _, reason in got] == [0, 0, 0x87, 0, 0x87, 0]
    stored = admin.receive(4)
    assert [m.payload for m in stored] == [b"alice/1", b"alice/2", b"alice/3", b"alice/4"]
    assert admin.nothing_more()


def test_read_only_topic_can_be_subscribed_but_not_published(secured):
    alice = as_user(secured, "alice", version=paho.MQTTv5)
    assert [code.value for code in alice.subscribe("news/#", 1)] == [1]
    assert publish_and_wait(alice, "news/fake", b"no") == 0x87
    bob = as_user(secured, "bob", version=paho.MQTTv5)
    assert [code.value for code in bob.subscribe("news/#", 1)] == [0x87]  # write-only for bob
    assert publish_and_wait(bob, "news/today", b"headline") == 0
    [got] = alice.receive(1)
    assert (got.topic, got.payload) == ("news/today", b"headline")
    assert alice.nothing_more()


def test_client_id_pattern(secured):
    device = as_user(secured, "bob", "sensor-7", paho.MQTTv5)
    assert [code.value for code in device.subscribe("devices/sensor-7/#", 1)] == [1]
    assert [code.value for code in device.subscribe("devices/sensor-8/#", 1)] == [0x87]
    assert [code.value for code in device.subscribe("devices/+/cmd", 1)] == [0x87]  # '+' is not 'sensor-7'
    assert publish_and_wait(device, "devices/sensor-7/temp", b"21") == 0
    assert publish_and_wait(device, "devices/sensor-8/temp", b"spoofed") == 0x87
    [got] = device.receive(1)
    assert (got.topic, got.payload) == ("devices/sensor-7/temp", b"21")
    assert device.nothing_more()


def test_username_pattern_gives_each_user_a_read_only_inbox(secured):
    alice = as_user(secured, "alice", version=paho.MQTTv5)
    assert [code.value for code in alice.subscribe("users/alice/inbox", 1)] == [1]
    assert [code.value for code in alice.subscribe("users/bob/inbox", 1)] == [0x87]
    assert publish_and_wait(alice, "users/alice/inbox", b"note to self") == 0x87  # pattern read: read only
    bob = as_user(secured, "bob", version=paho.MQTTv5)
    assert publish_and_wait(bob, "users/alice/inbox", b"hi alice") == 0
    [got] = alice.receive(1)
    assert (got.topic, got.payload) == ("users/alice/inbox", b"hi alice")
    assert alice.nothing_more()


def test_delivery_and_retained_messages_are_filtered_by_read_access(secured):
    admin = as_user(secured, "admin")
    admin.publish("alice/secret/retained", b"hidden", qos=1, retain=True)
    admin.publish("alice/open/retained", b"shown", qos=1, retain=True)
    alice = as_user(secured, "alice")
    # Allowed: the deny rule does not cover all of alice/#; what falls under it is withheld message by message.
    assert [code.value for code in alice.subscribe("alice/#", 1)] == [1]
    [retained] = alice.receive(1)
    assert (retained.topic, retained.payload) == ("alice/open/retained", b"shown")
    for topic in ("alice/secret/plan", "alice/open/a", "alice/secret/deeper/b", "alice/open/b"):
        admin.publish(topic, topic.encode(), qos=1)
    got = alice.receive(2)
    assert [m.topic for m in got] == ["alice/open/a", "alice/open/b"]
    assert alice.nothing_more()


def test_will_to_a_topic_the_client_may_not_write_is_not_published(secured):
    # As Mosquitto 2.0: the CONNECT is accepted, and the will is checked when it would be published.
    admin = as_user(secured, "admin")
    admin.subscribe("#", 1)
    for topic in ("bob/will", "alice/will"):
        client = Client(
            secured, f"will-{topic}", username="alice", password=USERS["alice"], will=(topic, b"w", 1, False)
        )
        assert client.reason == 0
        client.drop()
    [will] = admin.receive(1)
    assert (will.topic, will.payload) == ("alice/will", b"w")
    assert admin.nothing_more()


# --- configuration errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("password_file", "alice:plain-text\n", r"password file .*passwords, line 1 \(user 'alice'\)"),
        ("acl_file", "topic read a/#\nuser\n", r"ACL file .*acl, line 2"),
    ],
)
def test_unusable_password_or_acl_file_stops_serve_with_exit_2(tmp_path, name, content, expected):
    path = tmp_path / ("passwords" if name == "password_file" else "acl")
    path.write_text(content)
    config = tmp_path / "mqgate.toml"
    config.write_text(f'[mqtt]\n{name} = "{path}"\n')
    result = subprocess.run(
        serve_command("--data-dir", tmp_path / "data", "--config", config),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mqgate: error: ")
    assert re.search(expected, last), last
