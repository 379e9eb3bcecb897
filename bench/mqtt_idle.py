"""Memory of idle MQTT connections: mqgate against Mosquitto, same connections, one run.

    python bench/mqtt_idle.py [--quick] [--connections N] [--mosquitto PATH]

Each broker is started on 127.0.0.1 (mqgate: `mqgate serve --mqtt-port 0` on a fresh data directory; Mosquitto:
`/usr/sbin/mosquitto -c <generated conf>` on a free port, anonymous, no persistence, no connection limit). Then
this process opens N connections on asyncio sockets, each sending one pre-encoded MQTT 3.1.1 CONNECT (clean
session, keep alive 0, its own client id) and reading its CONNACK, and leaves them idle. The broker's resident
memory (VmRSS in /proc/PID/status) is read before the first connection and after the last CONNACK; at the end
every connection sends a PINGREQ and must get its PINGRESP (a broker that dropped one fails the run).

Output (stdout, key=value), for each broker B in mqgate, mosquitto:
  mqtt.idle.B.rss_mb_before, mqtt.idle.B.rss_mb_after, mqtt.idle.B.kb_per_connection
and mqtt.idle.connections, mqtt.idle.rss_ratio_to_mosquitto (mqgate's RSS over Mosquitto's, after),
mqtt.idle.kb_per_connection_ratio_to_mosquitto. --quick: 5,000 connections (the default: 10,000).
The soft limit on open files is raised to the hard limit in this process and the brokers (N descriptors each).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serve_child import serve_command  # bench/ is on sys.path: this script's directory

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
MQGATE = [sys.executable, "-m", "mqgate.cli"]
QUICK_CONNECTIONS = 5_000
FULL_CONNECTIONS = 10_000
# Handshakes in flight at once: enough to be quick, few enough not to overflow a listen backlog of 100 by much.
CONCURRENT_HANDSHAKES = 200
CONNACK_OK = b"\x20\x02\x00\x00"
PINGREQ, PINGRESP = b"\xc0\x00", b"\xd0\x00"
START_TIMEOUT_S = 30.0
# Descriptors this process needs beyond one per connection (stdio, the event loop, pipes to the brokers).
SPARE_DESCRIPTORS = 100


def connect_frame(client_id: str) -> bytes:
    raw = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x00" + len(raw).to_bytes(2, "big") + raw  # clean session, keep alive 0
    return bytes([0x10, len(body)]) + body


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def raise_open_file_limit(needed: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(f"mqtt_idle: {needed} open files needed, the hard limit is {hard} (raise it with ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def start_mqgate(work: Path) -> tuple[subprocess.Popen[str], int]:
    data_dir = work / "mqgate"
    process = subprocess.Popen(
        serve_command(MQGATE, data_dir, "--log-level", "WARNING"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(work / "mqgate.log", "w"),  # noqa: SIM115
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"\bmqtt=[^ ]*:(\d+)", line)
    if not found:
        process.kill()
        sys.exit(f"mqgate did not start: {line!r}; see {work / 'mqgate.log'}")
    return process, int(found.group(1))


def start_mosquitto(work: Path, executable: str) -> tuple[subprocess.Popen[str], int]:
    if not Path(executable).exists():
        sys.exit(f"mosquitto: {executable} not found; install the Debian package mosquitto")
    port = free_port()
    conf = work / "mosquitto.conf"
    conf.write_text(
        f"listener {port} {HOST}\nallow_anonymous true\npersistence false\nmax_connections -1\n"
        "log_dest stderr\nlog_type error\nlog_type warning\n"
    )
    process = subprocess.Popen(
        [executable, "-c", str(conf)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "mosquitto.log", "w"),  # noqa: SIM115
        text=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"mosquitto did not start; see {work / 'mosquitto.log'}")
            time.sleep(0.05)


async def hold_idle_connections(pid: int, port: int, count: int, name: str) -> tuple[int, int]:
    """Open `count` idle MQTT connections; return the broker's RSS in KiB before and after. Raises on a failure."""
    before = rss_kb(pid)
    gate = asyncio.Semaphore(CONCURRENT_HANDSHAKES)
    streams: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def open_one(number: int) -> None:
        async with gate:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(connect_frame(f"idle-{name}-{number}"))
            ack = await reader.readexactly(len(CONNACK_OK))
            if ack != CONNACK_OK:
                raise RuntimeError(f"{name}: connection {number} got {ack!r}, not a successful CONNACK")
            streams.append((reader, writer))

    try:
        await asyncio.gather(*(open_one(number) for number in range(count)))
        after = rss_kb(pid)
        for _, writer in streams:
            writer.write(PINGREQ)
        answers = await asyncio.gather(*(reader.readexactly(len(PINGRESP)) for reader, _ in streams))
        missing = sum(answer != PINGRESP for answer in answers)
        if missing:
            raise RuntimeError(f"{name}: {missing} of {count} connections got no PINGRESP")
    finally:
        for _, writer in streams:
            writer.close()
    return before, after


def measure(name: str, process: subprocess.Popen[str], port: int, count: int) -> tuple[int, int]:
    try:
        before, after = asyncio.run(hold_idle_connections(process.pid, port, count, name))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    print(f"mqtt.idle.{name}.rss_mb_before={before / 1024:.1f}")
    print(f"mqtt.idle.{name}.rss_mb_after={after / 1024:.1f}")
    print(f"mqtt.idle.{name}.kb_per_connection={(after - before) / count:.2f}", flush=True)
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CONNECTIONS} connections")
    parser.add_argument("--connections", type=int, help=f"connections (default {FULL_CONNECTIONS})")
    parser.add_argument("--mosquitto", default="/usr/sbin/mosquitto", help="mosquitto executable")
    args = parser.parse_args()
    count = args.connections or (QUICK_CONNECTIONS if args.quick else FULL_CONNECTIONS)
    raise_open_file_limit(count + SPARE_DESCRIPTORS)
    print(f"mqtt.idle.connections={count}")
    with tempfile.TemporaryDirectory(prefix="mqtt_idle-") as tmp:
        work = Path(tmp)
        mqgate = measure("mqgate", *start_mqgate(work), count)
        mosquitto = measure("mosquitto", *start_mosquitto(work, args.mosquitto), count)
    print(f"mqtt.idle.rss_ratio_to_mosquitto={mqgate[1] / mosquitto[1]:.1f}")
    per_connection = [(after - before) / count for before, after in (mqgate, mosquitto)]
    print(f"mqtt.idle.kb_per_connection_ratio_to_mosquitto={per_connection[0] / max(per_connection[1], 0.01):.1f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
