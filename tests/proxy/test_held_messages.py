"""Messages a push consumer receives with auto_renew are held for it by the endpoint (invisible for 60 s, renewed
while it is there); when it says it is terminating, another consumer of its group gets them within a second or two,
not a minute later. Driven with the protocol's stubs, as the official push consumer calls them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import Code, MessageType, definition_pb2, service_pb2, service_pb2_grpc

from tests.proxy.serving import grpc_port, start, write_topics

pytestmark = pytest.mark.slow


def receive(stub, client_id: str, auto_renew: bool) -> list[definition_pb2.Message]:
    request = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name="pushers"),
        message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name="work"), id=-1),
        batch_size=8,
        auto_renew=auto_renew,
        long_polling_timeout={"seconds": 5},
        **({} if auto_renew else {"invisible_duration": {"seconds": 30}}),
    )
    responses = list(stub.ReceiveMessage(request, metadata=(("x-mq-client-id", client_id),), timeout=30))
    return [r.message for r in responses if r.HasField("message")]


def test_messages_held_for_a_terminating_client_go_to_another_at_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_topics(data_dir, {"work": "NORMAL"})
    serve = start(data_dir)
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port(serve)}")
    try:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        message_id = uuid.uuid4().hex
        sent = definition_pb2.Message(
            topic=definition_pb2.Resource(name="work"),
            body=b"job",
            system_properties=definition_pb2.SystemProperties(message_id=message_id, message_type=MessageType.NORMAL),
        )
        answer = stub.SendMessage(service_pb2.SendMessageRequest(messages=[sent]), timeout=10)
        assert answer.status.code == Code.OK
        (held,) = receive(stub, "pusher-1", auto_renew=True)
        assert held.system_properties.message_id == message_id
        assert held.system_properties.invisible_duration.seconds == 60  # the proxy's auto-renew slice
        assert receive(stub, "pusher-2", auto_renew=False) == []  # held: nobody else gets it
        began = time.monotonic()
        terminated = stub.NotifyClientTermination(
            service_pb2.NotifyClientTerminationRequest(group=definition_pb2.Resource(name="pushers")),
            metadata=(("x-mq-client-id", "pusher-1"),),
            timeout=10,
        )
        assert terminated.status.code == Code.OK
        (again,) = receive(stub, "pusher-2", auto_renew=False)
        assert time.monotonic() - began < 10  # about a second, far from the 60 s it was held for
        assert (again.system_properties.message_id, again.body) == (message_id, b"job")
        assert again.system_properties.delivery_attempt == 2
    finally:
        channel.close()
        assert serve.stop() == 0
