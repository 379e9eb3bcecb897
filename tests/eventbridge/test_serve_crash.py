"""An EventBridge source across a SIGKILL of `mqgate serve`: every MQTT message the gateway acknowledged (PUBACK)
reaches the rule's HTTP target after the restart, at least once, even when the process dies in its first seconds,
before the periodic write of consumer offsets: where a source starts is on disk before it reads."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

RULES = """
sources:
  - name: meters
    mqtt: meters/#
rules:
  - name: all-readings
    pattern: {{type: [mqgate.mqtt.message]}}
    targets:
      - {{id: books, type: http, url: '{url}', mode: binary}}
"""


def publish_until_killed(serve: ServeProcess, acknowledged: list[int], kill_after: int) -> None:
    host, port = serve.ready["mqtt"].rsplit(":", 1)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id="meter-1", protocol=paho.MQTTv311)
    client.connect(host, int(port))
    client.loop_start()
    try:
        for n in range(10_000):
            info = client.publish(f"meters/m{n % 7}", json.dumps({"n": n}).encode(), qos=1)
            info.wait_for_publish(5)
            if not info.is_published():
                return
            acknowledged.append(n)
            if n + 1 == kill_after:
                serve.kill()  # SIGKILL, seconds after the start
    except (RuntimeError, ValueError, OSError):
        return  # the connection is gone: nothing more is acknowledged
    finally:
        client.loop_stop()


async def test_every_acknowledged_message_reaches_the_target_after_a_sigkill(tmp_path: Path) -> None:
    target = await TargetServer().start()
    try:
        rules = tmp_path / "data" / "rules"
        rules.mkdir(parents=True)
        (rules / "meters.yaml").write_text(RULES.format(url=target.url))
        first = ServeProcess(tmp_path / "data", "--log-level", "WARNING")
        acknowledged: list[int] = []
        publisher = threading.Thread(target=publish_until_killed, args=(first, acknowledged, 300))
        publisher.start()
        await asyncio.to_thread(publisher.join, 60)
        first.kill()
        assert len(acknowledged) >= 300
        second = ServeProcess(tmp_path / "data", "--log-level", "WARNING")
        try:
            for _ in range(600):
                if {r.data["data"]["n"] for r in target.received} >= set(acknowledged):
                    break
                await asyncio.sleep(0.1)
        finally:
            assert second.stop() == 0
        delivered = {r.data["data"]["n"] for r in target.received}
        missing = set(acknowledged) - delivered
        assert not missing, f"{len(missing)} acknowledged messages never reached the target, e.g. {sorted(missing)[:5]}"
    finally:
        await target.stop()
