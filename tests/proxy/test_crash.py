"""Nothing acknowledged is lost: the official producer sends while `mqgate serve` is killed with SIGKILL; after a
restart on the same data directory every message whose SendMessage was answered OK is there, exactly as sent."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer

from tests.proxy.serving import WAIT_S, client_config, start, write_topics

pytestmark = pytest.mark.slow


def test_every_acknowledged_send_survives_a_sigkill(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_topics(data_dir, {"ledger": "NORMAL"})
    serve = start(data_dir)
    acknowledged: dict[str, bytes] = {}
    stop = threading.Event()
    producer = Producer(client_config(serve, request_timeout=2), ("ledger",))
    producer.startup()

    def send_until_refused() -> None:
        i = 0
        while not stop.is_set():
            m = Message()
            m.topic = "ledger"
            m.body = f"entry {i}".encode() * 20
            m.keys = f"e{i}"
            try:
                acknowledged[producer.send(m).message_id] = m.body
            except Exception:  # the server is gone: nothing more is acknowledged
                return
            i += 1

    sender = threading.Thread(target=send_until_refused)
    sender.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while len(acknowledged) < 300 and time.monotonic() < deadline and sender.is_alive():
            time.sleep(0.01)
        serve.kill()  # SIGKILL, mid-stream
    finally:
        stop.set()
        sender.join(WAIT_S)
        producer.shutdown()
    assert len(acknowledged) >= 300

    restarted = start(data_dir)
    try:
        assert restarted.ready["recovery"] == "scan"  # it did not close cleanly
        consumer = SimpleConsumer(client_config(restarted), "auditor", {"ledger": FilterExpression()}, await_duration=5)
        consumer.startup()
        found: dict[str, bytes] = {}
        try:
            deadline = time.monotonic() + WAIT_S
            while not acknowledged.keys() <= found.keys() and time.monotonic() < deadline:
                for m in consumer.receive(32, 30):
                    found[m.message_id] = m.body
                    consumer.ack(m)
        finally:
            consumer.shutdown()
    finally:
        assert restarted.stop() == 0
    missing = acknowledged.keys() - found.keys()
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:3]}"
    assert all(found[message_id] == body for message_id, body in acknowledged.items())
