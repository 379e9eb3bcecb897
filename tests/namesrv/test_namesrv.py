"""The NameServer over the wire (namesrv/server.py), driven by mqgate's own remoting client as a broker and a client
would: a broker registers its topics in RocketMQ's JSON, a client gets the route and the cluster, unknown topics and
KV keys get RocketMQ's codes, a broker whose connection closes leaves the routes, and a request it cannot read is
answered with what was wrong."""

from __future__ import annotations

import asyncio
import json

import pytest

from namesrv.server import NameServer
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

REGISTRATION = {
    "topicConfigSerializeWrapper": {
        "topicConfigTable": {
            "orders": {
                "topicName": "orders",
                "readQueueNums": 4,
                "writeQueueNums": 4,
                "perm": 6,
                "topicSysFlag": 0,
                "order": False,
                "topicFilterType": "SINGLE_TAG",
            },
            "TBW102": {"topicName": "TBW102", "readQueueNums": 8, "writeQueueNums": 8, "perm": 7},
        },
        "dataVersion": {"counter": 1, "timestamp": 1700000000000},
    },
    "filterServerList": [],
}


def register(broker_id: int = 0, address: str = "127.0.0.1:10911", body: object = REGISTRATION) -> RemotingCommand:
    ext = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerAddr": address,
           "brokerId": str(broker_id), "haServerAddr": "127.0.0.1:10912", "compressed": "false"}  # fmt: skip
    return RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=ext, body=json.dumps(body).encode())


@pytest.fixture
async def namesrv():
    server = NameServer()
    port = await server.start("127.0.0.1", 0)
    yield server, f"127.0.0.1:{port}"
    await server.close()


async def test_a_registered_topic_has_a_route(namesrv):
    _, address = namesrv
    broker, client = RemotingClient(), RemotingClient()
    try:
        reply = await broker.invoke(address, register(), 5)
        assert reply.code == ResponseCode.SUCCESS and reply.ext_fields == {"masterAddr": "", "haServerAddr": ""}
        route = await client.invoke(
            address, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "orders"}), 5
        )
        assert route.code == ResponseCode.SUCCESS
        assert json.loads(route.body)["brokerDatas"] == [
            {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}
        ]
        assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in route.body  # quoted integer keys, as clients read them
        slave = await broker.invoke(address, register(1, "127.0.0.1:10921"), 5)
        assert slave.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
        cluster = await client.invoke(address, RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        assert json.loads(cluster.body)["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
        topics = await client.invoke(address, RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), 5)
        assert json.loads(topics.body) == {"topicList": ["TBW102", "orders"]}
        by_cluster = RemotingCommand(RequestCode.GET_TOPICS_BY_CLUSTER, ext_fields={"cluster": "DefaultCluster"})
        assert json.loads((await client.invoke(address, by_cluster, 5)).body) == {"topicList": ["TBW102", "orders"]}
    finally:
        await broker.close()
        await client.close()


async def test_unknown_topics_keys_and_codes_get_rocketmqs_answers(namesrv):
    _, address = namesrv
    client = RemotingClient()
    try:
        route = await client.invoke(
            address, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "none"}), 5
        )
        assert route.code == ResponseCode.TOPIC_NOT_EXIST and "none" in (route.remark or "")
        kv = RemotingCommand(RequestCode.GET_KV_CONFIG, ext_fields={"namespace": "ORDER_TOPIC_CONFIG", "key": "x"})
        assert (await client.invoke(address, kv, 5)).code == ResponseCode.QUERY_NOT_FOUND
        send = await client.invoke(address, RemotingCommand(RequestCode.SEND_MESSAGE), 5)
        assert send.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "10" in (send.remark or "")
    finally:
        await client.close()


async def test_a_broker_whose_connection_closes_leaves_the_routes(namesrv):
    server, address = namesrv
    broker = RemotingClient()
    await broker.invoke(address, register(), 5)
    assert server.routes.route("orders") is not None
    await broker.close()
    for _ in range(100):
        if server.routes.route("orders") is None:
            break
        await asyncio.sleep(0.01)
    assert server.routes.route("orders") is None


@pytest.mark.parametrize(
    ("command", "phrase"),
    [
        (register(body=["not", "a", "body"]), "not a RegisterBrokerBody"),
        (RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields={"brokerName": "b"}), "no clusterName"),
        (
            RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields={**register().ext_fields, "brokerId": "x"}),
            "brokerId",
        ),
        (
            RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields={**register().ext_fields, "compressed": "true"}),
            "compressed",
        ),
        (RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC), "no topic"),
    ],
)
async def test_a_request_it_cannot_read_is_answered_with_what_was_wrong(namesrv, command, phrase):
    _, address = namesrv
    client = RemotingClient()
    try:
        reply = await client.invoke(address, command, 5)
        assert reply.code == ResponseCode.SYSTEM_ERROR and phrase in (reply.remark or ""), reply.remark
        assert (await client.invoke(address, RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), 5)).code == 0
    finally:
        await client.close()
