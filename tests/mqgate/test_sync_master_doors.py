"""`mqgate serve --role SYNC_MASTER` with no slave: every send is stored on the master only (SLAVE_NOT_AVAILABLE), and
each door says so in its protocol's words, never as stored: an MQTT 5 PUBACK with reason 0x80 (and no PUBACK to MQTT
3.1.1, whose connection is closed), a gRPC SendMessage error (HA_NOT_AVAILABLE), the RocketMQ 4 reply code
SLAVE_NOT_AVAILABLE (11), and PutEvents refused whole (503, send again)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import aiohttp
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from rocketmq import Message, Producer

from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.proxy.serving import client_config
from tests.serve_process import ServeProcess


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    server = ServeProcess(tmp_path_factory.mktemp("sync") / "data", "--role", "SYNC_MASTER")
    try:
        yield server
    finally:
        server.stop()


def test_mqtt_5_gets_a_negative_puback_and_mqtt_3_no_puback(serve: ServeProcess):
    host, port = serve.ready["mqtt"].rsplit(":", 1)
    acked = threading.Event()
    codes: list[int] = []

    def on_publish(client, userdata, mid, reason_code, properties):  # type: ignore[no-untyped-def]
        codes.append(reason_code.value)
        acked.set()

    v5 = paho.Client(CallbackAPIVersion.VERSION2, client_id="sync-v5", protocol=paho.MQTTv5)
    v5.on_publish = on_publish
    v5.connect(host, int(port))
    v5.loop_start()
    try:
        v5.publish("sm5/x", b"one", qos=1, properties=Properties(paho.PacketTypes.PUBLISH))
        assert acked.wait(10)
        assert codes == [0x80]
    finally:
        v5.loop_stop()
        v5.disconnect()

    closed = threading.Event()
    v3 = paho.Client(CallbackAPIVersion.VERSION2, client_id="sync-v3")
    v3.on_disconnect = lambda client, userdata, flags, reason_code, properties: closed.set()
    acked.clear()
    v3.on_publish = on_publish
    v3.connect(host, int(port))
    v3.loop_start()
    try:
        v3.publish("sm3/x", b"one", qos=1)
        assert closed.wait(10), "a 3.1.1 PUBLISH not stored as promised closes the connection"
        assert not acked.is_set()
    finally:
        v3.loop_stop()


def test_grpc_send_fails_with_ha_not_available(serve: ServeProcess):
    producer = Producer(client_config(serve), ("sm_grpc",))
    producer.startup()
    try:
        message = Message()
        message.topic, message.body = "sm_grpc", b"one"
        with pytest.raises(Exception, match=r"HA_NOT_AVAILABLE|SLAVE_NOT_AVAILABLE"):
            producer.send(message)
    finally:
        producer.shutdown()


def test_put_events_entry_fails(serve: ServeProcess):
    async def put() -> dict:
        event = {"specversion": "1.0", "id": "e1", "source": "shop", "type": "order", "data": {"n": 1}}
        url = f"{serve.http_url}/buses/default/events"
        headers = {"Content-Type": "application/cloudevents-batch+json"}
        async with aiohttp.ClientSession() as http, http.post(url, json=[event], headers=headers) as response:
            return {"status": response.status, **(await response.json())}

    answer = asyncio.run(put())
    # The whole request is refused (as AWS's 5xx): PutEvents says nothing it did not store as promised.
    assert answer["status"] == 503 and "SLAVE_NOT_AVAILABLE" in answer["message"], answer


def test_remoting_send_answers_slave_not_available(serve: ServeProcess):
    async def send() -> RemotingCommand:
        client = RemotingClient()
        try:
            fields = {"producerGroup": "pg", "topic": "sm_remoting", "defaultTopic": "TBW102",
                      "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0",
                      "flag": "0", "properties": ""}  # fmt: skip
            address = f"127.0.0.1:{serve.ready['remoting'].rpartition(':')[2]}"
            request = RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=fields, body=b"one")
            return await client.invoke(address, request, 10)
        finally:
            await client.close()

    reply = asyncio.run(send())
    assert reply.code == ResponseCode.SLAVE_NOT_AVAILABLE, (reply.code, reply.remark)
    assert reply.ext_fields.get("msgId")  # stored on the master: its id is given, as RocketMQ's
