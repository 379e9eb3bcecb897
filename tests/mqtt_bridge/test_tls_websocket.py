"""The TLS and WebSocket listeners end to end: `mqgate serve` with `[mqtt] tls_port`/`websocket_port` from a
configuration file, a certificate made here by `openssl`, and paho and mosquitto clients verifying it."""

from __future__ import annotations

import contextlib
import queue
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mqtt5
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as websocket_connect

from tests.serve_process import serve_command

from .conftest import Client, Server, start_server

# A name and an address the server certificate is valid for; clients connect by name so hostname checks run.
SERVER_NAME = "localhost"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA that signed `cert`
    cert: Path
    key: Path
    other_ca: Path  # a CA that signed nothing here: verifying the server against it must fail


def openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> None:
    openssl(
        directory,
        *("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"),
        *("-subj", f"/CN=mqgate test {name}", "-keyout", f"{name}.key", "-out", f"{name}.pem"),
        *("-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"),
    )


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA and a server certificate it signed for localhost and 127.0.0.1, as a deployment would have."""
    directory = tmp_path_factory.mktemp("certificates")
    make_ca(directory, "ca")
    make_ca(directory, "other-ca")
    openssl(
        directory,
        *("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
        *("-subj", f"/CN={SERVER_NAME}", "-keyout", "server.key", "-out", "server.csr"),
    )
    (directory / "server.ext").write_text(
        f"subjectAltName=DNS:{SERVER_NAME},IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        directory,
        *("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"),
        *("-days", "2", "-extfile", "server.ext", "-out", "server.pem"),
    )
    return Certificates(
        directory / "ca.pem", directory / "server.pem", directory / "server.key", directory / "other-ca.pem"
    )


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return f'"{value}"'
    return str(value)


def serve(tmp_path: Path, servers: list[Server], **mqtt: object) -> dict[str, int]:
    """`mqgate serve` with these [mqtt] settings in a --config file; the port of each listener by ready-line key."""
    config = tmp_path / "mqgate.toml"
    config.write_text("[mqtt]\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in mqtt.items()))
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    server = start_server(data_dir, "--config", str(config))
    servers.append(server)
    parts = dict(part.split("=", 1) for part in server.ready.split()[1:])
    return {key: int(value.rsplit(":", 1)[1]) for key, value in parts.items() if key.startswith("mqtt")}


@pytest.fixture
def servers() -> object:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def tls_settings(certificates: Certificates) -> dict[str, object]:
    return {"tls_port": 0, "certfile": certificates.cert, "keyfile": certificates.key}


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closing)."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(4096):
            data += chunk
    return data


class Peer:
    """A paho client over TCP, TLS (verifying the server against `ca`) or WebSocket; messages in a queue."""

    def __init__(
        self,
        port: int,
        client_id: str,
        *,
        version: int = paho.MQTTv311,
        ca: Path | None = None,
        websocket_path: str | None = None,
    ) -> None:
        transport = "tcp" if websocket_path is None else "websockets"
        self.paho = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version, transport=transport)
        if websocket_path is not None:
            self.paho.ws_set_options(path=websocket_path)
        if ca is not None:
            self.paho.tls_set(ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)  # hostname checked as well
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connack: queue.Queue[object] = queue.Queue()
        self.paho.on_message = lambda c, u, m: self.messages.put(m)
        self.paho.on_connect = lambda c, u, flags, rc, props: self.connack.put(rc)
        self.paho.connect(SERVER_NAME, port, keepalive=30)
        self.paho.loop_start()
        assert self.connack.get(timeout=10) == 0

    def subscribe(self, topic: str, qos: int) -> None:
        done: queue.Queue[list[object]] = queue.Queue()
        self.paho.on_subscribe = lambda c, u, mid, codes, props: done.put(codes)
        self.paho.subscribe(topic, qos)
        assert done.get(timeout=10) == [qos]

    def publish(self, topic: str, payload: bytes, qos: int) -> None:
        info = self.paho.publish(topic, payload, qos=qos)
        info.wait_for_publish(10)
        assert info.is_published()

    def receive(self, timeout: float = 10.0) -> paho.MQTTMessage:
        return self.messages.get(timeout=timeout)

    def close(self) -> None:
        self.paho.disconnect()
        self.paho.loop_stop()


@pytest.mark.parametrize("version", [paho.MQTTv311, paho.MQTTv5])
def test_paho_over_tls_publishes_and_subscribes_qos1(tmp_path, servers, certificates, version):
    ports = serve(tmp_path, servers, **tls_settings(certificates))
    sub = Peer(ports["mqtts"], "tls-sub", version=version, ca=certificates.ca)
    sub.subscribe("secure/#", 1)
    pub = Peer(ports["mqtts"], "tls-pub", version=version, ca=certificates.ca)
    pub.publish("secure/room", b"over tls", 1)
    got = sub.receive()
    assert (got.topic, got.payload, got.qos) == ("secure/room", b"over tls", 1)
    sub.close()
    pub.close()


def test_tls_client_refuses_a_server_certificate_from_another_ca(tmp_path, servers, certificates):
    ports = serve(tmp_path, servers, **tls_settings(certificates))
    with pytest.raises(ssl.SSLCertVerificationError):
        Peer(ports["mqtts"], "wrong-ca", ca=certificates.other_ca)


def test_plain_mqtt_on_the_tls_port_is_dropped_and_tls_clients_carry_on(tmp_path, servers, certificates):
    ports = serve(tmp_path, servers, **tls_settings(certificates))
    connect = bytes([0x10, 0x0C, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x00])
    with socket.create_connection(("127.0.0.1", ports["mqtts"]), timeout=10) as sock:
        sock.sendall(connect)
        answer = read_to_end(sock)
    assert not answer.startswith(b"\x20")  # a TLS alert at most, never a CONNACK
    peer = Peer(ports["mqtts"], "after", ca=certificates.ca)
    peer.subscribe("still/#", 1)
    peer.publish("still/up", b"yes", 1)
    assert peer.receive().payload == b"yes"


def test_a_silent_connection_on_the_tls_port_is_closed_after_connect_timeout(tmp_path, servers, certificates):
    # The TLS handshake is part of connecting: a peer that opens the socket and says nothing must not hold it
    # for the event loop's 60 s handshake default, but for connect_timeout_s like a plain connection.
    ports = serve(tmp_path, servers, connect_timeout_s=1.0, **tls_settings(certificates))
    with socket.create_connection(("127.0.0.1", ports["mqtts"]), timeout=30) as sock:
        started = time.monotonic()
        assert read_to_end(sock) == b""
        assert time.monotonic() - started < 15


@pytest.mark.parametrize("version", [paho.MQTTv311, paho.MQTTv5])
def test_paho_over_websocket_at_mqtt_publishes_and_subscribes_qos1(tmp_path, servers, version):
    ports = serve(tmp_path, servers, websocket_port=0)
    sub = Peer(ports["mqtt_ws"], "ws-sub", version=version, websocket_path="/mqtt")
    sub.subscribe("web/#", 1)
    pub = Peer(ports["mqtt_ws"], "ws-pub", version=version, websocket_path="/mqtt")
    pub.publish("web/page", b"over websocket", 1)
    got = sub.receive()
    assert (got.topic, got.payload, got.qos) == ("web/page", b"over websocket", 1)
    sub.close()
    pub.close()


def test_websocket_path_is_configurable_and_other_paths_get_404(tmp_path, servers):
    ports = serve(tmp_path, servers, websocket_port=0, websocket_path="/broker")
    port = ports["mqtt_ws"]
    with pytest.raises(InvalidStatus) as refused:
        websocket_connect(f"ws://127.0.0.1:{port}/mqtt", subprotocols=["mqtt"], open_timeout=10)
    assert refused.value.response.status_code == 404
    # A query string is not part of the path (some clients send a token in it).
    with websocket_connect(f"ws://127.0.0.1:{port}/broker?token=x", subprotocols=["mqtt"], open_timeout=10) as ws:
        ws.send(bytes([0x10, 0x0C, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x00]))
        assert ws.recv(timeout=10) == b"\x20\x02\x00\x00"
    peer = Peer(port, "custom-path", websocket_path="/broker")
    peer.close()


def test_websocket_frames_may_cut_packets_anywhere(tmp_path, servers):
    ports = serve(tmp_path, servers, websocket_port=0)
    url = f"ws://127.0.0.1:{ports['mqtt_ws']}/mqtt"
    connect = bytes([0x10, 0x0C, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x00])
    subscribe = bytes([0x82, 0x08, 0x00, 0x01, 0x00, 0x03]) + b"c/#" + b"\x01"
    topic = b"c/x"
    publish = bytes([0x32, 2 + len(topic) + 2 + 2]) + len(topic).to_bytes(2, "big") + topic + b"\x00\x07" + b"hi"
    with websocket_connect(url, subprotocols=["mqtt"], open_timeout=10) as ws:
        stream = connect + subscribe
        for index in range(0, len(stream), 3):  # three bytes a frame
            ws.send(stream[index : index + 3])
        connack_suback = b"\x20\x02\x00\x00" + b"\x90\x03\x00\x01\x01"
        assert receive_at_least(ws, len(connack_suback)) == connack_suback  # the server may join them in one frame
        ws.send(publish + b"\xc0")  # PUBLISH and PINGREQ's first byte in one frame
        ws.send(b"\x00")
        received = receive_at_least(ws, 4 + 2 + len(publish))  # PUBACK, PINGRESP, our PUBLISH back
        assert b"\x40\x02\x00\x07" in received  # PUBACK
        assert b"\xd0\x00" in received  # PINGRESP
        assert b"\x00\x03c/x" in received and received.endswith(b"hi")  # our own subscription matches


def receive_at_least(ws: ClientConnection, size: int) -> bytes:
    received = b""
    while len(received) < size:
        frame = ws.recv(timeout=10)
        assert isinstance(frame, bytes)
        received += frame
    return received


def test_tcp_publish_reaches_websocket_and_tls_subscribers_of_one_gateway(tmp_path, servers, certificates):
    ports = serve(tmp_path, servers, websocket_port=0, **tls_settings(certificates))
    assert set(ports) == {"mqtt", "mqtts", "mqtt_wss"}
    assert len(set(ports.values())) == 3
    # With certfile set the WebSocket listener speaks TLS as well (wss://), and the ready line says so.
    web = Peer(ports["mqtt_wss"], "web", version=paho.MQTTv5, ca=certificates.ca, websocket_path="/mqtt")
    web.subscribe("fan/#", 1)
    secure = Peer(ports["mqtts"], "secure", ca=certificates.ca)
    secure.subscribe("fan/#", 1)
    plain = Client(_endpoint(ports["mqtt"]), "plain")
    plain.publish("fan/out", b"from tcp", qos=1)
    for peer in (web, secure):
        got = peer.receive()
        assert (got.topic, got.payload, got.qos) == ("fan/out", b"from tcp", 1)
    # And back: a WebSocket publish reaches the TCP and TLS subscribers.
    plain.subscribe("back/#", 1)
    web.publish("back/in", b"from websocket", 1)
    assert plain.receive(1)[0].payload == b"from websocket"
    secure.subscribe("back/#", 1)
    secure.publish("back/tls", b"from tls", 1)
    assert secure.receive().payload == b"from tls"
    assert plain.receive(1)[0].payload == b"from tls"
    plain.disconnect()


def _endpoint(port: int) -> Server:
    """A Server value pointing conftest's Client at one listener of a running server."""
    return Server(Path(), None, "127.0.0.1", port, "")  # type: ignore[arg-type]


def test_ready_line_names_the_tls_and_websocket_listeners(tmp_path, servers, certificates):
    ports = serve(tmp_path, servers, websocket_port=0, **tls_settings(certificates))
    line = servers[0].ready.split()
    assert line[0] == "ready"
    assert [part.split("=", 1)[0] for part in line[1:] if part.startswith("mqtt")] == ["mqtt", "mqtts", "mqtt_wss"]
    for key in ("mqtt", "mqtts", "mqtt_wss"):
        socket.create_connection(("127.0.0.1", ports[key]), timeout=5).close()


def test_mosquitto_clients_over_tls_with_cafile(tmp_path, servers, certificates):
    ports = serve(tmp_path, servers, **tls_settings(certificates))
    tls = ["-h", SERVER_NAME, "-p", str(ports["mqtts"]), "--cafile", str(certificates.ca)]
    sub = subprocess.Popen(
        ["mosquitto_sub", *tls, "-t", "mq/#", "-C", "2", "-q", "1", "-v", "-W", "15"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watcher = Peer(ports["mqtts"], "watcher", ca=certificates.ca)
    watcher.subscribe("mq/#", 1)
    time.sleep(0.5)  # mosquitto_sub has no ready signal; give it time to subscribe
    for payload, version in (("one", "mqttv311"), ("two", "mqttv5")):
        subprocess.run(
            ["mosquitto_pub", *tls, "-t", "mq/x", "-m", payload, "-q", "1", "-V", version], check=True, timeout=30
        )
    assert [watcher.receive().payload for _ in range(2)] == [b"one", b"two"]
    out, err = sub.communicate(timeout=20)
    assert out.splitlines() == ["mq/x one", "mq/x two"], err
    # The wrong CA: mosquitto_pub fails the handshake and publishes nothing.
    wrong = ["-h", SERVER_NAME, "-p", str(ports["mqtts"]), "--cafile", str(certificates.other_ca)]
    refused = subprocess.run(["mosquitto_pub", *wrong, "-t", "mq/x", "-m", "no", "-q", "1"], capture_output=True)
    assert refused.returncode != 0
    assert watcher.messages.empty()


def test_max_connections_counts_websocket_clients_too(tmp_path, servers):
    ports = serve(tmp_path, servers, websocket_port=0, max_connections=2)
    first = Client(_endpoint(ports["mqtt"]), "tcp-1")
    second = Peer(ports["mqtt_ws"], "ws-1", websocket_path="/mqtt")
    url = f"ws://127.0.0.1:{ports['mqtt_ws']}/mqtt"
    with pytest.raises(InvalidStatus) as refused:
        websocket_connect(url, subprotocols=["mqtt"], open_timeout=10)
    assert refused.value.response.status_code == 503
    with socket.create_connection(("127.0.0.1", ports["mqtt"]), timeout=10) as sock:
        assert sock.recv(16) == b""  # TCP: closed at once
    second.close()
    time.sleep(0.5)  # the server sees the close
    third = Peer(ports["mqtt_ws"], "ws-2", websocket_path="/mqtt")
    third.close()
    first.disconnect()


def test_unreadable_certfile_stops_serve_with_exit_2_naming_the_key(tmp_path, certificates):
    config = tmp_path / "mqgate.toml"
    missing = tmp_path / "missing.pem"
    config.write_text(f'[mqtt]\ntls_port = 0\ncertfile = "{missing}"\nkeyfile = "{certificates.key}"\n')
    result = subprocess.run(
        serve_command("--data-dir", tmp_path / "data", "--config", config),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()[-1:]
    assert "certfile" in line and str(missing) in line
    # A key that does not belong to the certificate: also a configuration error, named.
    config.write_text(
        f'[mqtt]\ntls_port = 0\ncertfile = "{certificates.cert}"\nkeyfile = "{certificates.ca.with_suffix(".key")}"\n'
    )
    result = subprocess.run(
        serve_command("--data-dir", tmp_path / "data", "--config", config),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "keyfile" in result.stderr


def anonymous_memory(pid: int) -> int:
    # RssAnon: the heap. VmRSS would count the commit log too, which the store writes through mmap.
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def masked_frame(payload: bytes) -> bytes:
    """One binary WebSocket frame from a client (RFC 6455 5.2; payloads under 126 bytes, mask of zeros)."""
    assert len(payload) < 126
    return bytes([0x82, 0x80 | len(payload)]) + bytes(4) + payload


def test_a_websocket_subscriber_that_stops_reading_is_held_back_not_buffered(tmp_path, servers):
    # Delivery to a WebSocket client pauses when its bytes pile up, as for a TCP client whose socket buffer is
    # full: the backlog waits on disk, not in the server's memory. (The decoded-message cache, bounded by
    # message_cache_mb, is kept at 1 MiB here so that only the link's buffering is measured.)
    ports = serve(tmp_path, servers, websocket_port=0, message_cache_mb=1)
    pid = servers[0].process.pid
    connect = bytes([0x10, 0x0C, 0x00, 0x04]) + b"MQTT" + bytes([0x04, 0x02, 0x00, 0x3C, 0x00, 0x00])
    subscribe = bytes([0x82, 0x0C, 0x00, 0x01, 0x00, 0x07]) + b"flood/#" + b"\x00"
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel holds little for us either
        sock.settimeout(10)
        sock.connect(("127.0.0.1", ports["mqtt_ws"]))
        sock.sendall(
            b"GET /mqtt HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: mqtt\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(1)
        assert answer.startswith(b"HTTP/1.1 101")
        sock.sendall(masked_frame(connect) + masked_frame(subscribe))
        answer = b""
        while b"\x90\x03\x00\x01\x00" not in answer:  # the SUBACK, after the CONNACK
            answer += sock.recv(64)
        publisher = Client(_endpoint(ports["mqtt"]), "flooder")
        payload = b"x" * 4096
        before = anonymous_memory(pid)
        for _ in range(8000):  # 32 MiB for a reader that takes none of it
            publisher.paho.publish("flood/a", payload, qos=0)
        publisher.publish("flood/a", b"last", qos=1)
        time.sleep(2)  # let the gateway deliver whatever it would
        grown = anonymous_memory(pid) - before
        publisher.disconnect()
    assert grown < 16 * 1024 * 1024, f"server memory grew by {grown / 2**20:.1f} MiB"


def push_past_receive_maximum(send: Callable[[bytes], None], receive: Callable[[], bytes]) -> list[object]:
    """Eclipse Paho's MQTT 5 test test_flow_control2 over any transport (`receive` gives b"" at the end): CONNECT,
    five QoS 2 publishes against a Receive Maximum of 4, a PUBREL for each PUBREC as it is read and a publish after
    the DISCONNECT; the packets read up to the end. A send the server refuses fails the test."""
    send(mqtt5.ConnectPacket("pushy").write())
    send(b"".join(mqtt5.PublishPacket("fc/x", b"m", qos=mqtt5.QoS(2), packet_id=n).write() for n in range(1, 6)))
    packets: list[object] = []
    data = b""
    while chunk := receive():
        data += chunk
        while data:
            try:
                packet, size = mqtt5.read(data)
            except ValueError:  # the rest of the packet is still on its way
                break
            data = data[size:]
            packets.append(packet)
            if isinstance(packet, mqtt5.PubRecPacket):
                send(mqtt5.PubRelPacket(packet.packet_id).write())
            elif isinstance(packet, mqtt5.DisconnectPacket):
                send(mqtt5.PublishPacket("fc/late", b"m", qos=mqtt5.QoS(1), packet_id=9).write())
    return packets


def assert_disconnected_with_0x93(packets: list[object]) -> None:
    names = [type(packet).__name__ for packet in packets]
    assert names == ["ConnAckPacket"] + ["PubRecPacket"] * 4 + ["DisconnectPacket"], names
    assert packets[-1].reason_code == mqtt5.DisconnectReasonCode.RECEIVE_MAX_EXCEEDED  # type: ignore[attr-defined]


def test_a_tls_client_that_keeps_sending_past_receive_maximum_reads_its_disconnect(tmp_path, servers, certificates):
    # TLS cannot half-close: the server's close_notify ends the stream, and what the client sends after it is read
    # and dropped, not answered with a reset.
    ports = serve(tmp_path, servers, receive_maximum=4, **tls_settings(certificates))
    context = ssl.create_default_context(cafile=str(certificates.ca))
    with (
        socket.create_connection(("127.0.0.1", ports["mqtts"]), timeout=30) as plain,
        context.wrap_socket(plain, server_hostname=SERVER_NAME) as sock,
    ):
        packets = push_past_receive_maximum(sock.sendall, lambda: sock.recv(65536))
    assert_disconnected_with_0x93(packets)


def test_a_websocket_client_that_keeps_sending_past_receive_maximum_reads_its_disconnect(tmp_path, servers):
    # WebSocket ends with a closing handshake, which goes on reading until the client's close frame (or
    # DISCONNECT_LINGER_S): the client reads every frame before the server's close frame.
    ports = serve(tmp_path, servers, websocket_port=0, receive_maximum=4)
    url = f"ws://127.0.0.1:{ports['mqtt_ws']}/mqtt"
    with websocket_connect(url, subprotocols=["mqtt"], open_timeout=10) as ws:

        def receive() -> bytes:
            try:
                frame = ws.recv(timeout=10)
            except ConnectionClosed:
                return b""
            assert isinstance(frame, bytes)
            return frame

        def send(data: bytes) -> None:
            # The library refuses to send once it has read the server's close frame: a close it knows of (the
            # frames before it are still read), not a reset.
            with contextlib.suppress(ConnectionClosed):
                ws.send(data)

        packets = push_past_receive_maximum(send, receive)
    assert_disconnected_with_0x93(packets)
