"""SEND_MESSAGE (10, 310, 320) and PULL_MESSAGE (11) on the broker's remoting port, through a real connection:
replies in the clients' words, stored records in RocketMQ's layout naming the broker's address, long polling that
holds up nothing else on the connection, the commit-offset flag, and the offsets-moved answer."""

from __future__ import annotations

import asyncio
import json

from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import decode_records, encode_batch
from tests.broker_remoting import requests


async def test_a_send_is_stored_and_answered_with_its_offset_message_id_all_fields_strings(door):
    reply = await door.ask(requests.send("t", b"hello", {"TAGS": "a", "KEYS": "k1 k2"}))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert all(isinstance(value, str) for value in reply.ext_fields.values())
    assert reply.ext_fields["queueId"] == "0" and reply.ext_fields["queueOffset"] == "0"
    msg_id = reply.ext_fields["msgId"]
    host, port = door.address.split(":")
    assert msg_id[:8] == "7F000001" and int(msg_id[8:16], 16) == int(port) and len(msg_id) == 32
    await door.broker.wait_visible()
    pulled = await door.ask(requests.pull("g", "t", 0, 0))
    (record,) = decode_records(pulled.body)
    assert (record.body, record.properties["TAGS"], record.properties["KEYS"]) == (b"hello", "a", "k1 k2")
    assert record.store_host == (host, int(port))  # where the C++ client sends its send-back
    assert record.commit_log_offset == int(msg_id[16:], 16)


async def test_send_v2_with_json_values_and_a_batch(door):
    v2 = await door.ask(requests.send("t2", b"v2", v2=True))
    assert v2.code == ResponseCode.SUCCESS, v2.remark
    batch_header = requests.send("t2", b"", queue_id=1).ext_fields
    batch = RemotingCommand(
        RequestCode.SEND_BATCH_MESSAGE,
        ext_fields={**batch_header, "batch": "true"},
        body=encode_batch([(0, f"b{n}".encode(), {"UNIQ_KEY": f"B{n}"}) for n in range(3)]),
    )
    reply = await door.ask(batch)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert len(reply.ext_fields["msgId"].split(",")) == 3 and reply.ext_fields["queueId"] == "1"
    await door.broker.wait_visible()
    records = decode_records((await door.ask(requests.pull("g", "t2", 1, 0))).body)
    assert [(r.body, r.properties["UNIQ_KEY"]) for r in records] == [(b"b0", "B0"), (b"b1", "B1"), (b"b2", "B2")]


async def test_refusals_are_answered_in_the_protocols_words_and_nothing_is_stored(door):
    door.broker.create_topic("t")
    door.broker.topics.auto_create = False
    missing = await door.ask(requests.send("nowhere", b"x"))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "nowhere" in missing.remark
    too_big = await door.ask(requests.send("t", b"x" * (2 << 20)))
    assert too_big.code == ResponseCode.MESSAGE_ILLEGAL
    no_topic = RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields={"producerGroup": "pg"})
    refused = await door.ask(no_topic)
    assert refused.code == ResponseCode.SYSTEM_ERROR and "topic" in refused.remark
    assert door.broker.max_offset("t", 0) == 0


async def test_a_suspended_pull_waits_for_the_next_message_and_holds_up_nothing_on_its_connection(door):
    await door.ask(requests.send("lp", b"first"))
    await door.broker.wait_visible()
    parked = asyncio.ensure_future(door.ask(requests.pull("g", "lp", 0, 1, suspend_ms=10_000), timeout_s=20))
    await asyncio.sleep(0.2)
    assert not parked.done()
    sent = await door.ask(requests.send("lp", b"second"))  # same connection, answered while the pull waits
    assert sent.code == ResponseCode.SUCCESS
    reply = await asyncio.wait_for(parked, 10)
    assert reply.code == ResponseCode.SUCCESS
    assert [r.body for r in decode_records(reply.body)] == [b"second"]
    assert reply.ext_fields["nextBeginOffset"] == "2" and reply.ext_fields["maxOffset"] == "2"


async def test_an_empty_pull_is_not_found_and_an_offset_past_the_end_moved(door):
    await door.ask(requests.send("e", b"one"))
    await door.broker.wait_visible()
    empty = await door.ask(requests.pull("g", "e", 0, 1))
    assert empty.code == ResponseCode.PULL_NOT_FOUND and empty.ext_fields["nextBeginOffset"] == "1"
    moved = await door.ask(requests.pull("g", "e", 0, 50))
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "1"


async def test_the_commit_offset_flag_commits_and_a_subscription_filters(door):
    for tag in ("a", "b", "a"):
        await door.ask(requests.send("f", tag.encode(), {"TAGS": tag}))
    await door.broker.wait_visible()
    reply = await door.ask(requests.pull("g", "f", 0, 0, commit=2, subscription="a"))
    assert [r.body for r in decode_records(reply.body)] == [b"a", b"a"]
    assert door.broker.query_offset("g", "f", 0) == 2
    # A pull without the subscription flag filters by what the group's heartbeat registered.
    await door.ask(requests.heartbeat("c1", "g2", topic="f", expression="b"))
    reply = await door.ask(requests.pull("g2", "f", 0, 0))
    assert [r.body for r in decode_records(reply.body)] == [b"b"]


async def test_the_namesrv_routes_a_new_topic_to_the_broker(door):
    await door.ask(requests.send("routed", b"x"))
    for _ in range(100):
        reply = await door.ask_namesrv(requests.fields(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="routed"))
        if reply.code == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.05)
    route = json.loads(reply.body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": door.address}
    assert route["queueDatas"][0]["writeQueueNums"] == 4
    template = await door.ask_namesrv(requests.fields(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="TBW102"))
    assert template.code == ResponseCode.SUCCESS and json.loads(template.body)["queueDatas"][0]["perm"] == 7
