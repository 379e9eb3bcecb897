"""A store that refuses writes (disk over disk_refuse_ratio): nothing refused is acknowledged as stored, nothing refused
becomes retained (publish_refusal.py). `mqgate serve` runs on a small tmpfs that a filler file pushes over the ratio
and back (the tests run as root, as CI does; skipped where mount is refused)."""

from __future__ import annotations

import queue
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import mqtt5
import paho.mqtt.client as paho
import pytest

from .conftest import Client, Server, connect_properties

FS_MB = 64
FILLER_MB = 40  # 62% of the file system: over the refuse ratio of 50%

CONFIG = """
[store]
segment_size = "4MiB"
max_message_size = "1MiB"
write_ring_size = "2MiB"
cq_entries_per_file = 1000
disk_clean_ratio = 0.45
disk_warn_ratio = 0.48
disk_refuse_ratio = 0.5
retention_check_interval_s = 0.1
"""


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(mount_point)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture
def disk(small_fs: Path, server_factory) -> Iterator[tuple[Server, Path]]:
    config = small_fs / "mqgate.toml"
    config.write_text(CONFIG)
    server = server_factory("--config", str(config), data_dir=small_fs / "data")
    yield server, small_fs / "filler"


def v5_ack(client: Client, topic: str, payload: bytes, qos: int, retain: bool = False) -> int:
    """Publish and return the reason code of the PUBACK (QoS 1) or PUBREC (QoS 2), as paho reports it."""
    acks: queue.Queue[int] = queue.Queue()
    client.paho.on_publish = lambda c, u, mid, reason, props: acks.put(int(reason.value))
    info = client.paho.publish(topic, payload, qos=qos, retain=retain)
    info.wait_for_publish(10)
    return acks.get(timeout=10)


def v5_pubrec(server: Server, topic: str, payload: bytes, retain: bool) -> int:
    """The reason code of the PUBREC that answers a QoS 2 PUBLISH (paho reports only the PUBCOMP's)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(mqtt5.ConnectPacket(client_id=f"raw-{uuid.uuid4().hex[:6]}").write())
        packets = read_packets(sock, 1)
        assert isinstance(packets[0], mqtt5.ConnAckPacket) and packets[0].reason_code == 0
        publish = mqtt5.PublishPacket(topic, payload, qos=mqtt5.QoS.EXACTLY_ONCE, retain=retain, packet_id=7)
        sock.sendall(publish.write())
        (pubrec,) = read_packets(sock, 1)
        assert isinstance(pubrec, mqtt5.PubRecPacket) and pubrec.packet_id == 7
        return int(pubrec.reason_code)


def read_packets(sock: socket.socket, count: int) -> list[mqtt5.Packet]:
    data = b""
    packets: list[mqtt5.Packet] = []
    while len(packets) < count:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
        while data:
            try:
                packet, used = mqtt5.read(data)
            except Exception:  # incomplete: read more
                break
            packets.append(packet)
            data = data[used:]
    return packets


def persistent_v5(server: Server, client_id: str) -> Client:
    return Client(server, client_id, paho.MQTTv5, clean=False, properties=connect_properties(SessionExpiryInterval=600))


def wait_for_store(probe: Client, refusing: bool) -> None:
    """Until a QoS 1 probe is refused (0x97) or accepted, as the retention thread notices the disk."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        code = v5_ack(probe, "probe/x", b"?", 1)
        if (code == 0x97) == refusing:
            return
        time.sleep(0.1)
    raise AssertionError(f"the store did not start {'refusing' if refusing else 'accepting'} writes")


def fill(filler: Path) -> None:
    with open(filler, "wb") as file:
        file.write(b"\xff" * FILLER_MB * 1024 * 1024)


def mosquitto_pub(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["mosquitto_pub", "-p", str(server.port), "-V", "mqttv311", "-i", "v311-pub", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_refused_writes_are_not_acknowledged_and_do_not_become_retained(disk):
    server, filler = disk
    watcher = Client(server, "watcher", paho.MQTTv5)
    watcher.subscribe("t/#", 2)
    probe = Client(server, "probe", paho.MQTTv5)
    v5 = Client(server, "v5-pub", paho.MQTTv5)
    assert v5_ack(v5, "t/r", b"A", 1, retain=True) == 0
    assert watcher.receive(1)[0].payload == b"A"

    fill(filler)
    wait_for_store(probe, refusing=True)
    # MQTT 5: the acknowledgement says why, with a reason code >= 0x80, for QoS 1 and QoS 2, retained or not.
    assert v5_ack(v5, "t/r", b"B5", 1, retain=True) == 0x97
    assert v5_pubrec(server, "t/r", b"C5", retain=True) == 0x97
    # paho sends PUBREL after any PUBREC and reports the PUBCOMP: 0x92, the flow is unknown, never success.
    assert v5_ack(v5, "t/r", b"C5-paho", 2, retain=True) == 0x92
    assert v5_ack(v5, "t/plain", b"D5", 1) == 0x97
    # MQTT 3.1.1 cannot refuse in a PUBACK/PUBREC: the connection is closed unacknowledged (mosquitto_pub fails).
    for qos in ("1", "2"):
        result = mosquitto_pub(server, "-t", "t/r", "-m", f"B3-{qos}", "-q", qos, "-r")
        assert result.returncode != 0, result
    # The v5 connection is still there after its refusals.
    assert v5.paho.is_connected()
    # A persistent session's subscription must survive a restart: one whose record cannot be stored is not made.
    keeper = persistent_v5(server, "keeper")
    assert [int(code.value) for code in keeper.subscribe("t/kept", 1)] == [0x80]  # type: ignore[attr-defined]

    filler.unlink()
    wait_for_store(probe, refusing=False)
    late = Client(server, "late", paho.MQTTv5)
    late.subscribe("t/r", 1)
    retained = late.receive(1)
    assert [m.payload for m in retained] == [b"A"]  # none of the refused ones became retained
    assert late.nothing_more(0.5)
    assert watcher.nothing_more(0.5)  # and no refused message was delivered

    assert v5_ack(v5, "t/kept", b"after", 1) == 0
    assert watcher.receive(1)[0].payload == b"after"
    assert keeper.nothing_more(0.5)  # the refused subscription was not made

    # Accepted again: retained and delivered.
    assert v5_pubrec(server, "t/r", b"E", retain=True) == 0
    assert watcher.receive(1)[0].payload == b"E"
    assert mosquitto_pub(server, "-t", "t/r", "-m", "F", "-q", "1", "-r").returncode == 0
    assert watcher.receive(1)[0].payload == b"F"
    later = Client(server, "later", paho.MQTTv5)
    later.subscribe("t/r", 1)
    assert [m.payload for m in later.receive(1)] == [b"F"]
