"""`mqgate serve` with what RocketMQ 4 clients use: the embedded NameServer and the broker's remoting port, named in
the ready line (remoting= then namesrv=, between grpc= and http=), each turned off by its own key; the broker
registers with the embedded NameServer over loopback unless [broker] namesrv_addr names others."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from core import BrokerConfig
from mqgate.rocketmq_doors import loopback_to, registration_addresses
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.serve_process import ServeProcess


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


async def test_serve_names_both_ports_in_order_and_both_answer(tmp_path: Path):
    serve = ServeProcess(tmp_path / "data")
    try:
        assert [part.split("=")[0] for part in serve.line.split()[1:]] == [
            "store", "recovery", "mqtt", "grpc", "remoting", "ha", "namesrv", "http",
        ]  # fmt: skip
        namesrv = f"127.0.0.1:{port_of(serve.ready['namesrv'])}"
        client = RemotingClient()
        try:
            reply = await client.invoke(namesrv, RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 10)
        finally:
            await client.close()
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        with socket.create_connection(("127.0.0.1", port_of(serve.ready["remoting"])), timeout=10):
            pass
    finally:
        assert serve.stop() == 0
    # The defaults bind every address; the broker reaches its own NameServer over loopback.
    assert serve.ready["namesrv"].startswith("0.0.0.0:") and serve.ready["remoting"].startswith("0.0.0.0:")
    assert f"registering with {namesrv}" in serve.stderr()


def test_each_is_turned_off_by_its_key(tmp_path: Path):
    config = tmp_path / "no-namesrv.toml"
    config.write_text("[namesrv]\nembedded = false\n")
    serve = ServeProcess(tmp_path / "a", "--config", config)
    assert serve.stop() == 0
    assert "remoting" in serve.ready and "namesrv" not in serve.ready
    assert "registers with no NameServer, so RocketMQ 4 clients will not find its topics" in serve.stderr()
    config = tmp_path / "no-remoting.toml"
    config.write_text("[remoting]\nenabled = false\n")
    serve = ServeProcess(tmp_path / "b", "--config", config)
    assert serve.stop() == 0
    assert "remoting" not in serve.ready and "namesrv" in serve.ready


def test_a_broker_given_nameservers_runs_none_of_its_own_unless_told(tmp_path: Path):
    # A broker of a cluster registers with the cluster's NameServers (an unreachable one here: it goes on serving).
    serve = ServeProcess(tmp_path / "a", "--namesrv-addr", "127.0.0.1:9")
    assert serve.stop() == 0
    assert "remoting" in serve.ready and "namesrv" not in serve.ready
    assert "registering with 127.0.0.1:9" in serve.stderr()
    config = tmp_path / "both.toml"
    config.write_text("[namesrv]\nembedded = true\nport = 0\n")
    serve = ServeProcess(tmp_path / "b", "--config", config, "--namesrv-addr", "127.0.0.1:9")
    assert serve.stop() == 0
    assert "namesrv" in serve.ready


def test_the_broker_registers_with_the_named_nameservers_else_the_embedded_one():
    named = BrokerConfig(namesrv_addr=("10.0.0.5:9876", "10.0.0.6:9876"))
    assert registration_addresses(named, "127.0.0.1:9876") == ["10.0.0.5:9876", "10.0.0.6:9876"]
    assert registration_addresses(BrokerConfig(), "127.0.0.1:9876") == ["127.0.0.1:9876"]
    assert registration_addresses(BrokerConfig(), None) == []


@pytest.mark.parametrize(
    ("host", "reached_at"),
    [("0.0.0.0", "127.0.0.1"), ("::", "::1"), ("", "127.0.0.1"), ("192.0.2.7", "192.0.2.7"), ("ns.local", "ns.local")],
)
def test_the_embedded_nameserver_is_reached_over_loopback_unless_bound_to_one_address(host: str, reached_at: str):
    assert loopback_to(host) == reached_at
