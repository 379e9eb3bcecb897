"""5,000 idle MQTT connections held by one `mqgate serve`, and what they cost it in memory.

The connections are opened from this process on asyncio sockets (5,000 paho clients would be 5,000 threads), each
with a pre-encoded MQTT 3.1.1 CONNECT (keep alive 0: idle for as long as the test wants). The server's resident
memory is read before and after and printed as one key=value line (`pytest -s` shows it; bench/mqtt_idle.py
measures the same against Mosquitto).
"""

from __future__ import annotations

import asyncio
import resource
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from .conftest import Client, start_server

CONNECTIONS = 5_000
# This process holds one descriptor per connection, plus pytest's, paho's and the server's pipes.
SPARE_DESCRIPTORS = 200
CONCURRENT_HANDSHAKES = 200
CONNACK_OK = b"\x20\x02\x00\x00"
PINGREQ, PINGRESP = b"\xc0\x00", b"\xd0\x00"
# A guard against gross regressions (a buffer or a task too many per connection), far above the 6 to 7 KiB an
# idle connection costs today; not a target.
MAX_KB_PER_CONNECTION = 32


def connect_frame(client_id: str) -> bytes:
    raw = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x00" + len(raw).to_bytes(2, "big") + raw  # clean session, keep alive 0
    return bytes([0x10, len(body)]) + body


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


@pytest.fixture
def open_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = CONNECTIONS + SPARE_DESCRIPTORS
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"{needed} open files needed, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def open_idle(port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    gate = asyncio.Semaphore(CONCURRENT_HANDSHAKES)
    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def open_one(number: int) -> None:
        async with gate:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(connect_frame(f"idle-{number}"))
            assert await reader.readexactly(4) == CONNACK_OK, f"connection {number}"
            streams.append((reader, writer))

    await asyncio.gather(*(open_one(number) for number in range(count)))
    return streams


async def ping_all(streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]) -> int:
    """Send every connection a PINGREQ; return how many got their PINGRESP."""
    for _, writer in streams:
        writer.write(PINGREQ)
    answers = await asyncio.gather(*(reader.readexactly(2) for reader, _ in streams), return_exceptions=True)
    return sum(answer == PINGRESP for answer in answers)


@pytest.mark.slow
def test_five_thousand_idle_connections(tmp_path, open_file_limit):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir)

    async def scenario() -> None:
        # paho's network loop uses select(), which cannot watch a descriptor numbered 1024 or more: its client
        # connects first, while descriptor numbers are low.
        client = await asyncio.to_thread(Client, server, "busy", paho.MQTTv5)
        before = rss_kb(server.process.pid)
        streams = await open_idle(server.port, CONNECTIONS)
        try:
            after = rss_kb(server.process.pid)
            assert len(streams) == CONNECTIONS
            # The client still subscribes, publishes and receives, with 5,000 others idle.
            assert await asyncio.to_thread(client.subscribe, "idle/check", 1)
            await asyncio.to_thread(client.publish, "idle/check", b"through", 1)
            [message] = await asyncio.to_thread(client.receive, 1)
            assert message.payload == b"through"
            await asyncio.to_thread(client.disconnect)
            # ... and every idle connection is still held and served.
            assert await ping_all(streams) == CONNECTIONS
        finally:
            for _, writer in streams:
                writer.close()
        per_connection = (after - before) / CONNECTIONS
        print(
            f"\nmqtt.idle_connections={CONNECTIONS} rss_mb_before={before / 1024:.1f} "
            f"rss_mb_after={after / 1024:.1f} kb_per_connection={per_connection:.2f}"
        )
        assert per_connection < MAX_KB_PER_CONNECTION

    try:
        asyncio.run(scenario())
        assert server.process.poll() is None
    finally:
        server.stop()
