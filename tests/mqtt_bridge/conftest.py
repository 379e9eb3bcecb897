"""Fixtures for gateway tests: `mqgate serve` as a real child process on a free port, and paho clients."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mqtt5
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.core.conftest import make_broker  # noqa: F401  (the in-process broker fixture, shared)
from tests.serve_process import serve_command

ROOT = Path(__file__).resolve().parents[2]
MQGATE = [sys.executable, "-m", "mqgate.cli"]


@dataclass
class Server:
    data_dir: Path
    process: subprocess.Popen[str]
    host: str
    port: int
    ready: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            assert self.process.wait(20) == 0, self.process.stderr.read() if self.process.stderr else ""

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def start_server(data_dir: Path, *args: str) -> Server:
    process = subprocess.Popen(
        serve_command("--data-dir", data_dir, "--log-level", "WARNING", *args),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=open(data_dir.parent / f"{data_dir.name}.stderr", "a"),  # noqa: SIM115
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("ready "), f"no ready line: {line!r}"
    parts = dict(part.split("=", 1) for part in line.split()[1:])
    _, port = parts["mqtt"].rsplit(":", 1)
    return Server(data_dir, process, "127.0.0.1", int(port), line)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = start_server(tmp_path / "data")
    yield started
    started.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[object]:
    servers: list[Server] = []

    def make(*args: str, data_dir: Path | None = None) -> Server:
        directory = data_dir or tmp_path / "data"
        directory.mkdir(parents=True, exist_ok=True)
        started = start_server(directory, *args)
        servers.append(started)
        return started

    yield make
    for started in servers:
        if started.process.poll() is None:
            started.kill()


class Client:
    """A paho client on its own network thread, with received messages in a queue."""

    def __init__(
        self,
        server: Server,
        client_id: str = "",
        version: int = paho.MQTTv311,
        clean: bool = True,
        will: tuple[str, bytes, int, bool] | None = None,
        keepalive: int = 60,
        properties: object = None,
        username: str | None = None,
        password: str | None = None,
        will_properties: object = None,
        max_inflight: int | None = None,
    ) -> None:
        kwargs: dict[str, object] = {"client_id": client_id, "protocol": version}
        if version != paho.MQTTv5:
            kwargs["clean_session"] = clean
        self.paho = paho.Client(CallbackAPIVersion.VERSION2, **kwargs)  # type: ignore[arg-type]
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connack: queue.Queue[tuple[object, object, object]] = queue.Queue()
        self.subacks: queue.Queue[list[object]] = queue.Queue()
        self.disconnects: queue.Queue[object] = queue.Queue()
        self.paho.on_message = lambda c, u, m: self.messages.put(m)
        self.paho.on_connect = lambda c, u, flags, rc, props: self.connack.put((flags, rc, props))
        self.paho.on_subscribe = lambda c, u, mid, codes, props: self.subacks.put(codes)
        self.paho.on_disconnect = lambda c, u, flags, rc, props: self.disconnects.put(rc)
        if username is not None:
            self.paho.username_pw_set(username, password)
        if will is not None:
            self.paho.will_set(*will, properties=will_properties)  # type: ignore[arg-type]
        if max_inflight is not None:  # paho takes it before connecting only
            self.paho.max_inflight_messages_set(max_inflight)
        connect_kwargs: dict[str, object] = {"keepalive": keepalive}
        if version == paho.MQTTv5:
            connect_kwargs["clean_start"] = clean
            if properties is not None:
                connect_kwargs["properties"] = properties
        self.paho.connect(server.host, server.port, **connect_kwargs)  # type: ignore[arg-type]
        self.paho.loop_start()
        self.flags, self.reason, self.connack_properties = self.connack.get(timeout=10)

    def subscribe(self, *args: object, **kwargs: object) -> list[object]:
        self.paho.subscribe(*args, **kwargs)  # type: ignore[arg-type]
        return self.subacks.get(timeout=10)

    def publish(self, topic: str, payload: bytes, qos: int = 0, retain: bool = False, properties: object = None):
        info = self.paho.publish(topic, payload, qos=qos, retain=retain, properties=properties)  # type: ignore[arg-type]
        info.wait_for_publish(10)
        return info

    def receive(self, count: int, timeout: float = 10.0) -> list[paho.MQTTMessage]:
        deadline = time.monotonic() + timeout
        got = []
        while len(got) < count:
            got.append(self.messages.get(timeout=max(0.01, deadline - time.monotonic())))
        return got

    def nothing_more(self, wait: float = 0.5) -> bool:
        try:
            self.messages.get(timeout=wait)
        except queue.Empty:
            return True
        return False

    def disconnect(self) -> None:
        self.paho.disconnect()
        self.paho.loop_stop()

    def drop(self) -> None:
        """Close the socket without DISCONNECT: an abnormal end (the will is published)."""
        self.paho.loop_stop()
        sock = self.paho.socket()
        if sock is not None:
            sock.close()


def configured(server_factory, tmp_path: Path, text: str) -> Server:
    """A server started with `text` as its configuration file."""
    config = tmp_path / "mqgate.toml"
    config.write_text(text)
    return server_factory("--config", str(config))


def connect_properties(**values: int) -> Properties:
    properties = Properties(PacketTypes.CONNECT)
    for name, value in values.items():
        setattr(properties, name, value)
    return properties


class RawV5:
    """An MQTT 5 client on a plain socket that sends what it is told, limits or not, and reads packet by packet."""

    def __init__(self, server: Server, client_id: str, **connect: object) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=10)
        self._data = b""
        self._packets: list = []
        self.sendall(mqtt5.ConnectPacket(client_id, **connect).write())  # type: ignore[arg-type]
        [self.connack], closed = self.read(count=1)
        assert isinstance(self.connack, mqtt5.ConnAckPacket) and not closed

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self, count: int | None = None, timeout: float = 10.0) -> tuple[list, bool]:
        """The next `count` packets (all until the server closes or `timeout` passes if None), and whether the
        server closed the connection."""
        closed = False
        deadline = time.monotonic() + timeout
        while count is None or len(self._packets) < count:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                closed = True
                break
            self._data += chunk
            while self._data:
                try:
                    packet, size = mqtt5.read(self._data)
                except ValueError:  # the rest of the packet is still on its way
                    break
                self._packets.append(packet)
                self._data = self._data[size:]
        taken = len(self._packets) if count is None else count
        found, self._packets = self._packets[:taken], self._packets[taken:]
        return found, closed

    def close(self) -> None:
        self.sock.close()
