"""The remoting server and client on loopback (remoting/server.py, client.py, channel.py): requests and replies
paired by opaque, a request that waits holding up nothing else on its connection, requests from the server to a
client on the same connection, unknown codes and failing handlers answered, and a peer that breaks the protocol
disconnected while the others go on."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.frame import FrameReader, encode_frame
from remoting.server import RemotingServer

ECHO, WAIT, FAIL, REFUSE = 1001, 1002, 1003, 1004


@pytest.fixture
async def served():
    server = RemotingServer("test")
    release = asyncio.Event()

    async def echo(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(
            ResponseCode.SUCCESS, ext_fields={"got": request.ext_fields.get("say", "")}, body=request.body
        )

    async def wait(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return request.reply(ResponseCode.SUCCESS, "released")

    async def fail(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("the handler broke")

    async def refuse(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RemotingRequestError("the field x is null", ResponseCode.TOPIC_NOT_EXIST)

    server.register(ECHO, echo)
    server.register(REFUSE, refuse)
    server.register(WAIT, wait)
    server.register(FAIL, fail)
    await server.start("127.0.0.1", 0)
    client = RemotingClient()
    yield server, client, f"127.0.0.1:{server.port}", release
    await client.close()
    await server.close()


async def test_a_reply_answers_its_request(served):
    _, client, address, _ = served
    reply = await client.invoke(address, RemotingCommand(ECHO, ext_fields={"say": "hi"}, body=b"\x00\x01"), 5)
    assert (reply.code, reply.ext_fields, reply.body, reply.is_response) == (0, {"got": "hi"}, b"\x00\x01", True)


async def test_a_waiting_request_holds_up_nothing_else_on_its_connection(served):
    _, client, address, release = served
    waiting = asyncio.ensure_future(client.invoke(address, RemotingCommand(WAIT), 5))
    await asyncio.sleep(0.05)
    replies = await asyncio.gather(*(client.invoke(address, RemotingCommand(ECHO, ext_fields={"say": str(n)}), 5)
                                     for n in range(20)))  # fmt: skip
    assert [reply.ext_fields["got"] for reply in replies] == [str(n) for n in range(20)]
    assert not waiting.done()
    release.set()
    assert (await waiting).remark == "released"


async def test_unknown_codes_and_failing_handlers_are_answered_and_the_connection_goes_on(served):
    _, client, address, _ = served
    unknown = await client.invoke(address, RemotingCommand(4242), 5)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4242" in (unknown.remark or "")
    failed = await client.invoke(address, RemotingCommand(FAIL), 5)
    assert failed.code == ResponseCode.SYSTEM_ERROR and "the handler broke" in (failed.remark or "")
    refused = await client.invoke(address, RemotingCommand(REFUSE), 5)
    assert (refused.code, refused.remark) == (ResponseCode.TOPIC_NOT_EXIST, "the field x is null")
    assert (await client.invoke(address, RemotingCommand(ECHO), 5)).code == ResponseCode.SUCCESS


async def test_a_peer_that_breaks_the_protocol_is_disconnected_and_others_go_on(served):
    _, client, address, _ = served
    host, port = address.split(":")

    def send_garbage() -> bytes:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(struct.pack(">i", 2**31 - 1) + b"never mind")  # a 2 GiB frame
            return sock.recv(100)

    assert await asyncio.to_thread(send_garbage) == b""  # closed, with nothing sent
    assert (await client.invoke(address, RemotingCommand(ECHO, ext_fields={"say": "still"}), 5)).ext_fields == {
        "got": "still"
    }


async def test_a_raw_json_request_gets_a_json_reply(served):
    _, _, address, _ = served
    host, port = address.split(":")

    def ask() -> RemotingCommand:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(encode_frame(RemotingCommand(ECHO, opaque=99, ext_fields={"say": "raw"})))
            reader = FrameReader()
            while True:
                reader.feed(sock.recv(4096))
                for command in reader.commands():
                    return command

    reply = await asyncio.to_thread(ask)
    assert (reply.opaque, reply.ext_fields) == (99, {"got": "raw"})


async def test_the_server_asks_a_client_on_the_clients_connection():
    server = RemotingServer("test")
    clients: list[Channel] = []
    gone: list[Channel] = []

    async def heartbeat(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        clients.append(channel)
        return request.reply(ResponseCode.SUCCESS)

    async def answer(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, f"checked {request.ext_fields['id']}")

    server.register(RequestCode.HEART_BEAT, heartbeat)
    server.add_close_listener(gone.append)
    await server.start("127.0.0.1", 0)
    client = RemotingClient(on_request=answer)
    try:
        await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand(RequestCode.HEART_BEAT), 5)
        [channel] = clients
        check = RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, ext_fields={"id": "t1"})
        assert (await channel.invoke(check, 5)).remark == "checked t1"
        await client.close()
        await channel.closed
        assert gone == [channel]
    finally:
        await server.close()


async def test_a_reply_that_never_comes_times_out_and_a_closed_connection_fails_waiters(served):
    server, client, address, _ = served
    with pytest.raises(RemotingTimeoutError, match=r"within 0\.1 s"):
        await client.invoke(address, RemotingCommand(WAIT), 0.1)
    waiting = asyncio.ensure_future(client.invoke(address, RemotingCommand(WAIT), 5))
    await asyncio.sleep(0.05)
    for channel in list(server.channels):
        channel.close()
    with pytest.raises(ChannelClosedError):
        await waiting
    # The client opens a new connection for the next request.
    assert (await client.invoke(address, RemotingCommand(ECHO), 5)).code == ResponseCode.SUCCESS


async def test_an_address_nobody_listens_on_is_a_clear_error():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    client = RemotingClient()
    with pytest.raises(ChannelClosedError, match=f"cannot connect to 127.0.0.1:{port}"):
        await client.invoke(f"127.0.0.1:{port}", RemotingCommand(ECHO), 5)
    await client.close()
