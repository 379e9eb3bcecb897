"""Access control and TLS on the gRPC endpoint, with the official client unchanged: over TLS (a certificate made here
by `openssl`, the client verifying it), the access key and secret key of RocketMQ's plain_acl.yml are accepted, a
wrong secret is refused UNAUTHORIZED and a topic the account may not use FORBIDDEN."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import grpc
import pytest
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import Code, definition_pb2, service_pb2, service_pb2_grpc
from rocketmq.v5.exception import ForbiddenException
from rocketmq.v5.util.signature import Signature

from tests.mqtt_bridge.test_tls_websocket import Certificates, certificates  # noqa: F401 (a fixture)
from tests.proxy.serving import client_config, grpc_port, receive_all, start, write_topics

pytestmark = pytest.mark.slow

# The official client verifies the server against the default roots (grpc.ssl_channel_credentials()); gRPC reads
# them from this file, once, when the process makes its first TLS channel. The CA is copied there before.
ROOTS = Path(tempfile.mkdtemp(prefix="mqgate-grpc-roots-")) / "roots.pem"
os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(ROOTS)

ACL = """
accounts:
  - accessKey: shop-app
    secretKey: "shop-secret-1"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [orders=PUB|SUB]
    groupPerms: [shop-readers=SUB]
  - accessKey: reporting
    secretKey: "report-secret"
    topicPerms: [metrics=PUB, orders=SUB]
"""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates):  # noqa: F811
    ROOTS.write_bytes(certificates.ca.read_bytes())
    data_dir = tmp_path_factory.mktemp("acl") / "data"
    write_topics(data_dir, {"orders": "NORMAL", "metrics": "NORMAL"})
    acl = data_dir.parent / "plain_acl.yml"
    acl.write_text(ACL)
    config = f'[grpc]\nacl_file = "{acl}"\ncertfile = "{certificates.cert}"\nkeyfile = "{certificates.key}"\n'
    process = start(data_dir, config=config)
    yield process
    assert process.stop() == 0


def order(body: bytes) -> Message:
    m = Message()
    m.topic = "orders"
    m.body = body
    m.keys = "o-1"
    m.add_property("channel", "web")
    return m


def test_the_right_credentials_send_and_receive_over_tls(serve) -> None:
    config = client_config(serve, "shop-app", "shop-secret-1")
    producer = Producer(config, ("orders",), tls_enable=True)
    producer.startup()
    consumer = SimpleConsumer(config, "shop-readers", {"orders": FilterExpression()}, await_duration=5, tls_enable=True)
    consumer.startup()
    try:
        receipt = producer.send(order(b"lamp"))
        got = receive_all(consumer, 1)
    finally:
        producer.shutdown()
        consumer.shutdown()
    assert [(m.body, m.keys, m.properties, m.message_id) for m in got] == [
        (b"lamp", {"o-1"}, {"channel": "web"}, receipt.message_id)
    ]


def test_a_wrong_secret_is_unauthorized_and_a_topic_not_granted_is_forbidden(serve, certificates) -> None:  # noqa: F811
    wrong = client_config(serve, "shop-app", "not-the-secret")
    # The client's own signature, on a route lookup: what every call of the official client carries.
    channel = grpc.secure_channel(
        f"127.0.0.1:{grpc_port(serve)}", grpc.ssl_channel_credentials(certificates.ca.read_bytes())
    )
    try:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="orders"))
        answer = stub.QueryRoute(request, metadata=Signature.metadata(wrong, "impostor-1"), timeout=10)
    finally:
        channel.close()
    assert answer.status.code == Code.UNAUTHORIZED
    assert "signature" in answer.status.message
    assert not answer.message_queues
    impostor = Producer(wrong, ("orders",), tls_enable=True)
    impostor.startup()
    try:
        with pytest.raises(Exception, match="route"):  # the client reports a route it could not get
            impostor.send(order(b"forged"))
    finally:
        impostor.shutdown()
    reporting = Producer(client_config(serve, "reporting", "report-secret"), ("orders",), tls_enable=True)
    reporting.startup()
    try:
        with pytest.raises(ForbiddenException, match="orders"):
            reporting.send(order(b"not yours"))
    finally:
        reporting.shutdown()
    # Nothing refused was stored.
    config = client_config(serve, "shop-app", "shop-secret-1")
    consumer = SimpleConsumer(config, "shop-readers", {"orders": FilterExpression()}, await_duration=3, tls_enable=True)
    consumer.startup()
    try:
        assert consumer.receive(32, 10) == []
    finally:
        consumer.shutdown()
