"""Bad input on the broker's remoting port: generated garbage frames, a 2 GiB length, a header longer than its
frame, headers of every broker code with generated extFields and bodies, unknown codes. Each is refused (the
connection closed for a frame that breaks the protocol, an answer for a request the broker cannot read) and a
well-behaved client on another connection keeps sending and pulling in the same test."""

from __future__ import annotations

import asyncio
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import encode_frame
from remoting.message_codec import decode_records
from tests.broker_remoting import requests

BROKER_CODES = [code for code in RequestCode if code < 100 or code in (215, 310, 320)]


async def raw(door, data: bytes, wait_s: float = 1.0) -> bytes:
    """Send bytes on a new connection; what the broker answered before it closed (or `wait_s` passed)."""
    host, port = door.address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(1 << 16), wait_s)
    except TimeoutError:
        return b"(open)"
    finally:
        writer.close()


async def still_serves(door, n: int) -> None:
    sent = await door.ask(requests.send("steady", f"m{n}".encode()))
    assert sent.code == ResponseCode.SUCCESS
    await door.broker.wait_visible()
    pulled = await door.ask(requests.pull("g", "steady", 0, int(sent.ext_fields["queueOffset"])))
    assert [r.body for r in decode_records(pulled.body)] == [f"m{n}".encode()]


async def test_frames_that_break_the_protocol_close_their_connection_only(door):
    too_long = struct.pack(">i", 2**31 - 1) + b"\x00" * 16  # a 2 GiB length: refused before its bytes come
    header_past_frame = struct.pack(">ii", 8, 500) + b"{}\x00\x00"  # a 500-byte header in an 8-byte frame
    not_json = struct.pack(">ii", 9, 5) + b"{nope"
    negative = struct.pack(">i", -5)
    for n, garbage in enumerate((too_long, header_past_frame, not_json, negative)):
        assert await raw(door, garbage) == b""  # closed without an answer
        await still_serves(door, n)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(min_size=1, max_size=300))
async def test_generated_bytes_never_stop_the_broker(door, data):
    await raw(door, data, wait_s=0.05)
    await still_serves(door, 0 if not data else data[0])


@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    code=st.sampled_from(BROKER_CODES),
    fields=st.dictionaries(
        st.sampled_from(["topic", "queueId", "consumerGroup", "queueOffset", "maxMsgNums", "sysFlag", "offset",
                         "commitOffset", "producerGroup", "commitOrRollback", "group", "delayLevel", "key", "b", "e"]),
        st.one_of(st.text(max_size=12), st.integers(-5, 2**40).map(str)), max_size=8,
    ),
    body=st.binary(max_size=64),
)  # fmt: skip
async def test_every_broker_code_with_generated_fields_is_answered(door, code, fields, body):
    reply = await door.ask(RemotingCommand(code, ext_fields=fields, body=body), timeout_s=20)
    assert reply.is_response and reply.code in set(ResponseCode)
    await still_serves(door, code)


async def test_unknown_codes_are_named_in_the_answer(door):
    for code in (0, 99, 777, 32767):
        reply = await door.ask(RemotingCommand(code))
        assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and str(code) in reply.remark
    frame = encode_frame(RemotingCommand(4321, opaque=9))
    assert b"4321" in await raw(door, frame)
    await still_serves(door, 1)
