"""SIGKILL of `mqgate serve` with publishes in flight: no acknowledged message is lost."""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from .conftest import Client


@pytest.mark.slow
@pytest.mark.parametrize("qos", [1, 2])
def test_sigkill_loses_no_acknowledged_publish(server_factory, qos):
    server = server_factory("--flush-mode", "SYNC_FLUSH")
    keeper = Client(server, "keeper", clean=False)
    keeper.subscribe("crash/#", qos)
    keeper.disconnect()

    # paho calls on_publish on its network thread while holding its own lock; never hold ours across publish().
    acked_mids: set[int] = set()
    by_mid: dict[int, bytes] = {}
    lock = threading.Lock()
    publisher = paho.Client(CallbackAPIVersion.VERSION2, client_id="publisher")
    publisher.max_inflight_messages_set(50)

    def on_publish(client, userdata, mid, reason, properties):
        with lock:
            acked_mids.add(mid)

    publisher.on_publish = on_publish
    publisher.connect(server.host, server.port)
    publisher.loop_start()
    n = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with lock:
            if len(acked_mids) >= 300:
                break
            outstanding = n - len(acked_mids)
        payload = b"m%d" % n
        info = publisher.publish(f"crash/{n % 4}", payload, qos=qos)
        by_mid[info.mid] = payload
        n += 1
        if outstanding > 200:
            time.sleep(0.002)
    server.kill()  # SIGKILL, with publishes still in flight
    publisher.loop_stop()
    with lock:
        acknowledged = {by_mid[mid] for mid in acked_mids}
    assert len(acknowledged) >= 300

    server = server_factory("--flush-mode", "SYNC_FLUSH", data_dir=server.data_dir)
    keeper = Client(server, "keeper", clean=False)
    assert keeper.flags.session_present is True
    received: set[bytes] = set()
    while not acknowledged <= received:
        received.update(m.payload for m in keeper.receive(1, timeout=15))
    keeper.disconnect()
    server.stop()
