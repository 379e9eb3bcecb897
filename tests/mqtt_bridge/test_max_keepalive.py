"""`[mqtt] max_keepalive` against `mqgate serve`: an MQTT 5 client asking for more is told the maximum (Server Keep
Alive) and held to it; an MQTT 3.1.1 client asking for more, or for none, is refused (as Mosquitto does)."""

from __future__ import annotations

import socket
import time

import mqtt5
import paho.mqtt.client as paho

from .conftest import Client, RawV5, configured


def test_a_v5_client_asking_600_s_gets_2_and_is_dropped_with_its_will_when_silent(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, "[mqtt]\nmax_keepalive = 2\n")
    watcher = Client(server, "watcher", paho.MQTTv5)
    watcher.subscribe("wills/#", 0)
    will = mqtt5.Will("wills/silent", payload=b"gone")
    silent = RawV5(server, "silent", keep_alive=600, will=will)
    assert silent.connack.server_keep_alive == 2
    started = time.monotonic()
    got, closed = silent.read(timeout=20)  # says nothing from now on, not even PINGREQ
    waited = time.monotonic() - started
    silent.close()
    assert closed and [type(packet) for packet in got] == [mqtt5.DisconnectPacket]
    assert got[0].reason_code == mqtt5.DisconnectReasonCode.KEEP_ALIVE_TIMEOUT
    # 1.5 times the 2 s in force (3 s), not the 900 s the client asked for; a timer never fires early.
    assert 2.0 <= waited < 10
    [message] = watcher.receive(1)
    assert (message.topic, message.payload) == ("wills/silent", b"gone")


def server_keep_alive(server, client_id: str, keep_alive: int) -> int | None:
    client = RawV5(server, client_id, keep_alive=keep_alive)
    client.close()
    return client.connack.server_keep_alive


def test_a_v5_client_asking_for_no_keep_alive_is_given_the_maximum(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, "[mqtt]\nmax_keepalive = 30\n")
    assert server_keep_alive(server, "none", 0) == 30
    assert server_keep_alive(server, "within", 20) is None
    # paho reads the Server Keep Alive and pings at that period.
    client = Client(server, "paho", paho.MQTTv5, keepalive=600)
    assert client.connack_properties.ServerKeepAlive == 30  # type: ignore[attr-defined]


def test_without_max_keepalive_a_client_keeps_what_it_asked_for(server):
    assert server_keep_alive(server, "long", 65535) is None
    assert server_keep_alive(server, "none", 0) is None


def connect_v311(client_id: bytes, keep_alive: int) -> bytes:
    body = b"\x00\x04MQTT\x04\x02" + keep_alive.to_bytes(2, "big") + len(client_id).to_bytes(2, "big") + client_id
    return bytes([0x10, len(body)]) + body


def test_a_3_1_1_client_past_max_keepalive_is_refused_and_one_within_it_is_accepted(server_factory, tmp_path):
    server = configured(server_factory, tmp_path, "[mqtt]\nmax_keepalive = 60\n")
    for client_id, keep_alive in ((b"long", 600), (b"none", 0)):
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(connect_v311(client_id, keep_alive))
            assert sock.recv(16) == b"\x20\x02\x00\x02"  # CONNACK 2, identifier rejected
            assert sock.recv(16) == b""  # and closed
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(connect_v311(b"within", 60))
        assert sock.recv(16) == b"\x20\x02\x00\x00"
    paho_311 = Client(server, "paho311", keepalive=30)  # mosquitto_sub and paho ask for 60 and 30 by default
    assert paho_311.reason == 0
