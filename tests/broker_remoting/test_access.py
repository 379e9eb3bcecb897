"""RocketMQ's plain ACL on the broker's remoting port: requests signed as RocketMQ 4 clients sign them
(remoting/acl_signature.py) are served as their account allows; unsigned requests, wrong signatures, unknown keys,
missing permissions and admin codes from other accounts are refused NO_PERMISSION, and a signed client goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from acl.acl_file import load_acl_file
from broker_remoting.access import needs
from broker_remoting.config import RemotingConfig
from broker_remoting.door import BrokerRemoting
from remoting.acl_signature import sign
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker_remoting import requests

ACL = """
accounts:
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms:
      - orders=PUB
  - accessKey: consumer-key
    secretKey: consumer-secret
    topicPerms:
      - orders=SUB
    groupPerms:
      - billing=SUB
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
"""


@pytest.fixture
async def guarded(door, tmp_path: Path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    remoting = BrokerRemoting(
        door.broker, RemotingConfig(host="127.0.0.1", port=0), max_body_bytes=1 << 20, access=load_acl_file(str(path))
    )
    await remoting.start()
    client = RemotingClient()
    yield lambda request, key=None, secret=None: ask(client, remoting.address, request, key, secret)
    await client.close()
    await remoting.close()


async def ask(client, address, request: RemotingCommand, key: str | None, secret: str | None) -> RemotingCommand:
    if key is not None:
        sign(request, key, secret or "")
    return await client.invoke(address, request, 10)


async def test_signed_requests_are_served_as_the_account_allows(guarded):
    sent = await guarded(requests.send("orders", b"o1"), "producer-key", "producer-secret")
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    elsewhere = await guarded(requests.send("payments", b"p1"), "producer-key", "producer-secret")
    assert elsewhere.code == ResponseCode.NO_PERMISSION and "payments" in elsewhere.remark
    pulled = await guarded(requests.pull("billing", "orders", 0, 0), "consumer-key", "consumer-secret")
    assert pulled.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND), pulled.remark
    other_group = await guarded(requests.pull("audit", "orders", 0, 0), "consumer-key", "consumer-secret")
    assert other_group.code == ResponseCode.NO_PERMISSION and "audit" in other_group.remark


async def test_unsigned_wrong_and_unknown_credentials_are_refused_and_a_signed_client_goes_on(guarded):
    unsigned = await guarded(requests.send("orders", b"x"))
    assert unsigned.code == ResponseCode.NO_PERMISSION and "AccessKey" in unsigned.remark
    empty_key = requests.send("orders", b"x")
    empty_key.ext_fields.update({"AccessKey": "", "Signature": "abc"})  # what the C++ client sends without a key
    assert (await guarded(empty_key)).code == ResponseCode.NO_PERMISSION
    wrong = await guarded(requests.send("orders", b"x"), "producer-key", "not-the-secret")
    assert wrong.code == ResponseCode.NO_PERMISSION and "signature" in wrong.remark
    unknown = await guarded(requests.send("orders", b"x"), "nobody-key", "whatever")
    assert unknown.code == ResponseCode.NO_PERMISSION and "nobody-key" in unknown.remark
    assert (await guarded(requests.send("orders", b"ok"), "producer-key", "producer-secret")).code == 0


async def test_admin_codes_need_an_admin_account(guarded):
    create = requests.fields(RequestCode.UPDATE_AND_CREATE_TOPIC, topic="t9", readQueueNums=1, writeQueueNums=1)
    refused = await guarded(create, "producer-key", "producer-secret")
    assert refused.code == ResponseCode.NO_PERMISSION and "admin" in refused.remark
    create = requests.fields(RequestCode.UPDATE_AND_CREATE_TOPIC, topic="t9", readQueueNums=1, writeQueueNums=1)
    assert (await guarded(create, "admin-key", "admin-secret")).code == ResponseCode.SUCCESS


def test_what_each_code_needs():
    assert [(k.value, n, a.value) for k, n, a in needs(requests.send("orders", b""))] == [("topic", "orders", "PUB")]
    assert [(k.value, n) for k, n, _ in needs(requests.send("%RETRY%g1", b"", v2=True))] == [("group", "g1")]
    heartbeat = requests.heartbeat("c", "g", topic="orders")
    assert [(k.value, n) for k, n, _ in needs(heartbeat)] == [("group", "g"), ("topic", "orders")]
    assert needs(RemotingCommand(RequestCode.HEART_BEAT, body=b"{nope")) == []
