"""The broker's other request codes on a real connection: heartbeats and group notices, offsets, send-back, queue
locks, transactions and their check-back, queries, topic administration; and requests it cannot read, refused with
what was wrong while the connection goes on."""

from __future__ import annotations

import asyncio
import json

from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import decode_records
from tests.broker_remoting import requests


async def until(condition, what: str, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"waited {timeout_s} s for {what}")


async def test_heartbeats_make_members_that_are_told_when_their_group_changes_and_leave_with_their_connection(door):
    assert (await door.ask(requests.heartbeat("c1", "g", message_model=1))).code == ResponseCode.SUCCESS
    assert door.broker.has_topic("%RETRY%g")  # a clustering group's retry topic, which its consumers subscribe to
    other = RemotingClient()
    try:
        await other.invoke(door.address, requests.heartbeat("c2", "g"), 10)
        await until(lambda: any(r.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for r in door.heard), "a notice")
        notice = next(r for r in door.heard if r.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
        assert notice.ext_fields == {"consumerGroup": "g"}
        listed = await door.ask(requests.fields(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="g"))
        assert json.loads(listed.body) == {"consumerIdList": ["c1", "c2"]}
        assert sorted(m.client_id for m in door.broker.admin.members("g")) == ["c1", "c2"]
    finally:
        await other.close()
    await until(
        lambda: [m.client_id for m in door.broker.admin.members("g")] == ["c1"], "c2 to leave with its connection"
    )
    await door.ask(requests.fields(RequestCode.UNREGISTER_CLIENT, clientID="c1", consumerGroup="g"))
    listed = await door.ask(requests.fields(RequestCode.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="g"))
    assert listed.code == ResponseCode.SYSTEM_ERROR


async def test_offsets_committed_queried_and_the_queue_bounds(door):
    for n in range(3):
        await door.ask(requests.send("o", str(n).encode()))
    await door.broker.wait_visible()
    query = requests.fields(RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="g", topic="o", queueId=0)
    assert (await door.ask(query)).ext_fields == {"offset": "0"}  # nothing committed, the first message still stored
    update = requests.fields(
        RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="g", topic="o", queueId=0, commitOffset=2
    )
    assert (await door.ask(update)).code == ResponseCode.SUCCESS
    assert (await door.ask(query)).ext_fields == {"offset": "2"}
    bounds = [
        (await door.ask(requests.fields(code, topic="o", queueId=0))).ext_fields["offset"]
        for code in (RequestCode.GET_MIN_OFFSET, RequestCode.GET_MAX_OFFSET)
    ]
    assert bounds == ["0", "3"]
    search = requests.fields(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic="o", queueId=0, timestamp=0)
    assert (await door.ask(search)).ext_fields["offset"] == "0"


async def test_a_message_sent_back_goes_to_the_retry_topic_and_with_level_minus_one_to_the_dead_letters(door):
    sent = await door.ask(requests.send("sb", b"fails"))
    offset = int(sent.ext_fields["msgId"][16:], 16)
    back = requests.fields(RequestCode.CONSUMER_SEND_MSG_BACK, group="g", delayLevel=0, offset=offset)
    assert (await door.ask(back)).code == ResponseCode.SUCCESS
    dead = requests.fields(RequestCode.CONSUMER_SEND_MSG_BACK, group="g", delayLevel=-1, offset=offset)
    assert (await door.ask(dead)).code == ResponseCode.SUCCESS
    await door.broker.wait_visible()
    (record,) = decode_records((await door.ask(requests.pull("r", "%DLQ%g", 0, 0))).body)
    assert record.body == b"fails" and record.properties["RETRY_TOPIC"] == "sb"
    assert door.broker.has_topic("%RETRY%g")
    nowhere = requests.fields(RequestCode.CONSUMER_SEND_MSG_BACK, group="g", delayLevel=0, offset=10**12)
    assert (await door.ask(nowhere)).code == ResponseCode.SYSTEM_ERROR


async def test_queue_locks_are_held_by_one_client_at_a_time(door):
    def lock(client: str, code: int = RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
        body = {
            "consumerGroup": "g",
            "clientId": client,
            "mqSet": [{"topic": "q", "brokerName": "broker-a", "queueId": 1}],
        }
        return RemotingCommand(code, body=json.dumps(body).encode())

    first = json.loads((await door.ask(lock("c1"))).body)
    assert first == {"lockOKMQSet": [{"topic": "q", "brokerName": "broker-a", "queueId": 1}]}
    assert json.loads((await door.ask(lock("c2"))).body) == {"lockOKMQSet": []}
    await door.ask(lock("c1", RequestCode.UNLOCK_BATCH_MQ))
    assert len(json.loads((await door.ask(lock("c2"))).body)["lockOKMQSet"]) == 1


async def test_a_half_message_is_ended_by_commit_log_offset_and_checked_back_on_its_producers_connection(door):
    await door.ask(requests.heartbeat("p1", producer_group="pg"))
    half = await door.ask(requests.send("tx", b"half", {"TRAN_MSG": "true", "PGROUP": "pg"}))
    assert half.code == ResponseCode.SUCCESS
    offset = int(half.ext_fields["msgId"][16:], 16)
    end = requests.fields(
        RequestCode.END_TRANSACTION, producerGroup="pg", tranStateTableOffset=half.ext_fields["queueOffset"],
        commitLogOffset=offset, commitOrRollback=8, fromTransactionCheck="0", msgId="x", transactionId="",
    )  # fmt: skip
    assert (await door.ask(end)).code == ResponseCode.SUCCESS
    await door.broker.wait_visible()
    (record,) = decode_records((await door.ask(requests.pull("g", "tx", 0, 0))).body)
    assert record.body == b"half"
    # A second half, left undecided and checked at once: the broker asks the producer's connection, the half (its
    # real topic) in the body, and the answer decides it.
    undecided = {"TRAN_MSG": "true", "PGROUP": "pg", "CHECK_IMMUNITY_TIME_IN_SECONDS": "0"}
    await door.ask(requests.send("tx", b"undecided", undecided))
    await until(lambda: any(r.code == RequestCode.CHECK_TRANSACTION_STATE for r in door.heard), "a check-back", 30)
    check = next(r for r in door.heard if r.code == RequestCode.CHECK_TRANSACTION_STATE)
    (checked,) = decode_records(check.body)
    assert (checked.topic, checked.body) == ("tx", b"undecided")
    assert all(isinstance(value, str) for value in check.ext_fields.values())
    answer = requests.fields(
        RequestCode.END_TRANSACTION, producerGroup="pg", tranStateTableOffset=check.ext_fields["tranStateTableOffset"],
        commitLogOffset=check.ext_fields["commitLogOffset"], commitOrRollback=8, fromTransactionCheck="1",
    )  # fmt: skip
    assert (await door.ask(answer)).code == ResponseCode.SUCCESS
    await door.broker.wait_visible()
    records = decode_records((await door.ask(requests.pull("g", "tx", 0, 0))).body)
    assert [r.body for r in records] == [b"half", b"undecided"]


async def test_queries_by_key_unique_id_and_offset(door):
    sent = await door.ask(requests.send("qm", b"found", {"KEYS": "order-7", "UNIQ_KEY": "UNIQ7"}))
    await door.broker.wait_visible()
    await asyncio.sleep(0.2)  # the index is built a moment after the queues
    by_key = requests.fields(RequestCode.QUERY_MESSAGE, topic="qm", key="order-7", maxNum=32, beginTimestamp=0,
                             endTimestamp=2**62)  # fmt: skip
    reply = await door.ask(by_key)
    assert reply.code == ResponseCode.SUCCESS and [r.body for r in decode_records(reply.body)] == [b"found"]
    by_id = requests.fields(RequestCode.QUERY_MESSAGE, topic="qm", key="UNIQ7", maxNum=32, beginTimestamp=0,
                            endTimestamp=2**62, _UNIQUE_KEY_QUERY="true")  # fmt: skip
    assert [r.body for r in decode_records((await door.ask(by_id)).body)] == [b"found"]
    offset = int(sent.ext_fields["msgId"][16:], 16)
    viewed = await door.ask(requests.fields(RequestCode.VIEW_MESSAGE_BY_ID, offset=offset))
    assert [r.body for r in decode_records(viewed.body)] == [b"found"]
    none = requests.fields(RequestCode.QUERY_MESSAGE, topic="qm", key="nothing", maxNum=32, beginTimestamp=0,
                           endTimestamp=2**62)  # fmt: skip
    assert (await door.ask(none)).code == ResponseCode.QUERY_NOT_FOUND


async def test_topics_created_changed_listed_and_deleted_and_the_nameserver_knows_before_the_answer(door):
    route = requests.fields(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="adm")
    create = requests.fields(
        RequestCode.UPDATE_AND_CREATE_TOPIC, topic="adm", readQueueNums=2, writeQueueNums=3, perm=6
    )
    assert (await door.ask(create)).code == ResponseCode.SUCCESS
    # As RocketMQ's broker, it registers the change before it answers: a client asking for the route next finds it.
    found = await door.ask_namesrv(route)
    assert found.code == ResponseCode.SUCCESS
    assert json.loads(found.body)["queueDatas"][0]["writeQueueNums"] == 3
    config = door.broker.topic_config("adm")
    assert (config.read_queue_nums, config.write_queue_nums) == (2, 3)
    table = json.loads((await door.ask(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG))).body)["topicConfigTable"]
    assert table["adm"]["writeQueueNums"] == 3
    assert table["adm"]["attributes"] == {"message.type": "NORMAL"}
    await door.ask(requests.fields(RequestCode.DELETE_TOPIC_IN_BROKER, topic="adm"))
    assert not door.broker.has_topic("adm")
    assert (await door.ask_namesrv(route)).code == ResponseCode.TOPIC_NOT_EXIST


async def test_a_topics_message_type_is_rocketmq_5s_attribute_and_others_are_refused(door):
    fields = {"topic": "fifo", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    made = await door.ask(
        requests.fields(RequestCode.UPDATE_AND_CREATE_TOPIC, **fields, attributes="+message.type=FIFO")
    )
    assert made.code == ResponseCode.SUCCESS
    assert door.broker.topic_config("fifo").message_type.value == "FIFO"
    kept = await door.ask(requests.fields(RequestCode.UPDATE_AND_CREATE_TOPIC, **{**fields, "writeQueueNums": 4}))
    assert kept.code == ResponseCode.SUCCESS and door.broker.topic_config("fifo").message_type.value == "FIFO"
    for attributes, said in [
        ("+queue.type=BatchCQ", "topic attribute '+queue.type=BatchCQ' is not supported"),
        ("-message.type", "topic attribute '-message.type' is not supported"),
        ("+message.type=FAST", "the message type is one of NORMAL, FIFO, DELAY, TRANSACTION, MIXED"),
    ]:
        refused = await door.ask(requests.fields(RequestCode.UPDATE_AND_CREATE_TOPIC, **fields, attributes=attributes))
        assert refused.code == ResponseCode.SYSTEM_ERROR and said in refused.remark
    assert door.broker.topic_config("fifo").write_queue_nums == 4


async def test_requests_it_cannot_read_are_refused_with_what_was_wrong_and_the_connection_goes_on(door):
    bad_heartbeat = await door.ask(RemotingCommand(RequestCode.HEART_BEAT, body=b"{not json"))
    assert bad_heartbeat.code == ResponseCode.SYSTEM_ERROR and "not JSON" in bad_heartbeat.remark
    bad_lock = await door.ask(RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=b'{"mqSet": 3}'))
    assert bad_lock.code == ResponseCode.SYSTEM_ERROR and "LockBatchRequestBody" in bad_lock.remark
    bad_number = await door.ask(requests.fields(RequestCode.GET_MAX_OFFSET, topic="t", queueId="one"))
    assert bad_number.code == ResponseCode.SYSTEM_ERROR and "queueId" in bad_number.remark
    unknown = await door.ask(RemotingCommand(9999))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in unknown.remark
    assert (await door.ask(requests.send("still", b"ok"))).code == ResponseCode.SUCCESS


async def test_what_mqadmin_asks_about_topics_groups_and_the_broker(door):
    for n in range(3):
        await door.ask(requests.send("st", str(n).encode()))
    await door.broker.wait_visible()
    stats = (await door.ask(requests.fields(RequestCode.GET_TOPIC_STATS_INFO, topic="st"))).body.decode()
    # fastjson's map keyed by a message queue, as mqadmin reads it
    assert stats.startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"st"}:{"minOffset":0,')
    assert '"maxOffset":3' in stats
    await door.ask(requests.fields(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="cg", topic="st", queueId=0,
                                   commitOffset=1))  # fmt: skip
    consume = (await door.ask(requests.fields(RequestCode.GET_CONSUME_STATS, consumerGroup="cg", topic="st"))).body
    assert b'{"brokerName":"broker-a","queueId":0,"topic":"st"}:{"brokerOffset":3,"consumerOffset":1' in consume
    offline = await door.ask(requests.fields(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="cg"))
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    await door.ask(requests.heartbeat("c9", "cg", topic="st"))
    online = await door.ask(requests.fields(RequestCode.GET_CONSUMER_CONNECTION_LIST, consumerGroup="cg"))
    assert [c["clientId"] for c in json.loads(online.body)["connectionSet"]] == ["c9"]
    group = RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                            body=json.dumps({"groupName": "gx", "retryMaxTimes": 3}).encode())  # fmt: skip
    assert (await door.ask(group)).code == ResponseCode.SUCCESS
    groups = json.loads((await door.ask(RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)
    assert groups["subscriptionGroupTable"]["gx"]["retryMaxTimes"] == 3
    await door.ask(requests.fields(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="gx"))
    assert door.broker.admin.group_config("gx") is None
    info = json.loads((await door.ask(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))).body)["table"]
    assert info["brokerName"] == "broker-a" and int(info["msgPutTotalTodayNow"]) >= 3
    await door.ask(requests.fields(RequestCode.UNREGISTER_CLIENT, clientID="c9", consumerGroup="cg"))
    reset = await door.ask(requests.fields(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, topic="st", group="cg",
                                           timestamp=0, isForce="true"))  # fmt: skip
    assert reset.code == ResponseCode.SUCCESS, reset.remark
    assert b'{"brokerName":"broker-a","queueId":0,"topic":"st"}:0' in reset.body
    assert door.broker.query_offset("cg", "st", 0) == 0
