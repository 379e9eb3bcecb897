"""Bad input on the gRPC port gets the protocol's answer and costs nobody else anything: garbage bytes and a truncated
HTTP/2 frame, an oversized message, an unknown topic and requests that break the protocol's rules each get their
code (or, below gRPC, a closed connection), while another client of the same endpoint goes on sending and
receiving in the same test. Requests are made with the protocol's own stubs, as a misbehaving client would."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import (
    Code,
    FilterType,
    MessageType,
    definition_pb2,
    service_pb2,
    service_pb2_grpc,
)

from tests.proxy.serving import WAIT_S, client_config, grpc_port, receive_all, start, write_groups, write_topics
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MAX_BODY = 4 * 1024 * 1024  # the store's max_message_size, the endpoint's largest body


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    data_dir = tmp_path_factory.mktemp("bad") / "data"
    write_topics(data_dir, {"plain": "NORMAL", "calm": "NORMAL", "fifo": "FIFO"})
    process = start(data_dir, "--no-auto-create-topic")
    yield process
    assert process.stop() == 0
    assert "Traceback" not in process.stderr(), process.stderr()


@pytest.fixture(scope="module")
def stub(serve: ServeProcess) -> Iterator[service_pb2_grpc.MessagingServiceStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port(serve)}")
    yield service_pb2_grpc.MessagingServiceStub(channel)
    channel.close()


METADATA = (("x-mq-client-id", "bad-client-1"),)


def proto_message(topic: str, body: bytes = b"x", **system: object) -> definition_pb2.Message:
    properties = {"message_id": uuid.uuid4().hex, "message_type": MessageType.NORMAL, **system}
    user = properties.pop("user_properties", {})
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic),
        body=body,
        user_properties=user,
        system_properties=definition_pb2.SystemProperties(**properties),
    )


def send(stub, *messages: definition_pb2.Message) -> service_pb2.SendMessageResponse:
    return stub.SendMessage(service_pb2.SendMessageRequest(messages=messages), metadata=METADATA, timeout=10)


def still_serving(serve: ServeProcess, topic: str = "calm") -> None:
    """Another client of the endpoint sends a message and receives it back."""
    config = client_config(serve)
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, f"calm-{uuid.uuid4().hex[:8]}", {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    try:
        body = uuid.uuid4().hex.encode()
        m = Message()
        m.topic = topic
        m.body = body
        producer.send(m)
        seen: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while body not in seen and time.monotonic() < deadline:
            for x in consumer.receive(32, 30):
                seen.append(x.body)
                consumer.ack(x)
        assert body in seen
    finally:
        producer.shutdown()
        consumer.shutdown()


def test_garbage_bytes_and_a_truncated_http2_frame_close_that_connection_only(serve: ServeProcess) -> None:
    port = grpc_port(serve)
    for payload in (
        b"\x16\x03\x01\x02\x00garbage that is no HTTP/2 at all" * 10,
        # the preface, then a SETTINGS frame header announcing 18 bytes of which 3 come
        HTTP2_PREFACE + struct.pack(">I", 18)[1:] + b"\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00",
    ):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(payload)
            raw.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := raw.recv(65536):
                answer += chunk
        # The server answers (a GOAWAY or its own preface) and closes; it does not hang or die.
        assert serve.process.poll() is None
    still_serving(serve)


def test_an_oversized_message_gets_message_body_too_large(serve: ServeProcess, stub) -> None:
    answer = send(stub, proto_message("plain", b"z" * (MAX_BODY + 1)))
    assert answer.status.code == Code.MESSAGE_BODY_TOO_LARGE
    assert str(MAX_BODY) in answer.status.message
    still_serving(serve)


def test_an_unknown_topic_gets_topic_not_found(serve: ServeProcess, stub) -> None:
    route = stub.QueryRoute(
        service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="nowhere")), metadata=METADATA, timeout=10
    )
    assert route.status.code == Code.TOPIC_NOT_FOUND
    assert "nowhere" in route.status.message
    assert send(stub, proto_message("nowhere")).status.code == Code.TOPIC_NOT_FOUND
    producer = Producer(client_config(serve), ("nowhere",))
    producer.startup()
    try:
        m = Message()
        m.topic = "nowhere"
        m.body = b"lost?"
        with pytest.raises(Exception, match="route"):
            producer.send(m)
    finally:
        producer.shutdown()
    still_serving(serve)


CONFLICT = Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def future(seconds: int) -> Timestamp:
    return Timestamp(seconds=int(time.time()) + seconds)


@pytest.mark.parametrize(
    ("messages", "code", "says"),
    [
        ([], Code.MESSAGE_CORRUPTED, "no message"),
        ([proto_message("plain", message_id="")], Code.ILLEGAL_MESSAGE_ID, "message_id"),
        ([proto_message("plain", b"")], Code.MESSAGE_BODY_EMPTY, "empty"),
        ([proto_message("plain", tag="a|b")], Code.ILLEGAL_MESSAGE_TAG, "'|'"),
        ([proto_message("plain", tag="   ")], Code.ILLEGAL_MESSAGE_TAG, "whitespace"),
        ([proto_message("plain", keys=["two words"])], Code.ILLEGAL_MESSAGE_KEY, "space"),
        ([proto_message("plain", user_properties={"UNIQ_KEY": "mine"})], Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "system"),
        ([proto_message("plain", user_properties={"a": "b\x01c"})], Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "control"),
        ([proto_message("plain", message_group="g", message_type=MessageType.FIFO)], CONFLICT, "NORMAL"),
        ([proto_message("fifo", message_type=MessageType.FIFO)], CONFLICT, "message_group"),
        ([proto_message("fifo", message_group="x" * 64)], Code.ILLEGAL_MESSAGE_GROUP, "63 bytes"),
        ([proto_message("plain", delivery_timestamp=future(40 * 24 * 3600))], Code.ILLEGAL_DELIVERY_TIME, "max delay"),
        ([proto_message("plain"), proto_message("calm")], Code.MESSAGE_CORRUPTED, "one topic"),
        (
            [proto_message("plain", body_encoding=definition_pb2.Encoding.GZIP)],
            Code.MESSAGE_CORRUPTED,
            "GZIP",
        ),
    ],
)  # fmt: skip
def test_a_malformed_send_gets_its_code(stub, messages, code, says) -> None:
    answer = send(stub, *messages)
    assert (Code.Name(answer.status.code), says in answer.status.message) == (Code.Name(code), True), answer.status
    assert not any(entry.message_id for entry in answer.entries if entry.status.code == Code.OK)


def test_several_messages_in_one_request_are_stored_together(serve: ServeProcess, stub) -> None:
    sent = [proto_message("plain", f"b{i}".encode(), keys=[f"k{i}"], tag="B") for i in range(5)]
    answer = send(stub, *sent)
    assert answer.status.code == Code.OK
    assert [e.message_id for e in answer.entries] == [m.system_properties.message_id for m in sent]
    offsets = [e.offset for e in answer.entries]
    assert offsets == list(range(offsets[0], offsets[0] + 5))  # one queue, consecutive
    consumer = SimpleConsumer(client_config(serve), "batch-g", {"plain": FilterExpression("B")}, await_duration=5)
    consumer.startup()
    try:
        got = {next(iter(m.keys)): m.body for m in receive_all(consumer, 5)}
    finally:
        consumer.shutdown()
    assert got == {f"k{i}": f"b{i}".encode() for i in range(5)}


def receive(stub, **fields: object) -> list[service_pb2.ReceiveMessageResponse]:
    request = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name="recv-g"),
        message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name="plain"), id=-1),
        batch_size=1,
        **fields,
    )
    return list(stub.ReceiveMessage(request, metadata=METADATA, timeout=30))


def test_malformed_consumer_requests_get_their_codes(stub) -> None:
    def status_of(responses: list[service_pb2.ReceiveMessageResponse]) -> int:
        (status,) = [r.status for r in responses if r.HasField("status")]
        assert responses[-1].HasField("delivery_timestamp")
        return int(status.code)

    assert status_of(receive(stub, invisible_duration={"seconds": 1})) == Code.ILLEGAL_INVISIBLE_TIME
    bad_sql = definition_pb2.FilterExpression(type=FilterType.SQL, expression="a >")
    assert status_of(receive(stub, invisible_duration={"seconds": 30}, filter_expression=bad_sql)) == (
        Code.ILLEGAL_FILTER_EXPRESSION
    )
    ack = stub.AckMessage(
        service_pb2.AckMessageRequest(
            group=definition_pb2.Resource(name="recv-g"),
            topic=definition_pb2.Resource(name="plain"),
            entries=[service_pb2.AckMessageEntry(message_id="m", receipt_handle="not-a-handle")],
        ),
        metadata=METADATA,
        timeout=10,
    )
    assert (ack.status.code, ack.entries[0].status.code) == (Code.INVALID_RECEIPT_HANDLE, Code.INVALID_RECEIPT_HANDLE)
    heartbeat = stub.Heartbeat(service_pb2.HeartbeatRequest(), timeout=10)  # no client id
    assert heartbeat.status.code == Code.CLIENT_ID_REQUIRED
    recall = stub.RecallMessage(
        service_pb2.RecallMessageRequest(topic=definition_pb2.Resource(name="plain"), recall_handle="h"),
        metadata=METADATA,
        timeout=10,
    )
    assert recall.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE  # a NORMAL topic holds nothing to recall


def test_a_method_the_service_does_not_have_is_unimplemented(serve: ServeProcess) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port(serve)}") as channel:
        call = channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"", timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
    still_serving(serve)


def test_an_unknown_group_gets_consumer_group_not_found(tmp_path) -> None:
    data_dir = tmp_path / "data"
    write_topics(data_dir, {"orders": "NORMAL"})
    write_groups(data_dir, {"known": {}})
    serve = start(data_dir, config="[broker]\nauto_create_group = false\n")
    channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port(serve)}")
    try:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        topic = definition_pb2.Resource(name="orders")

        def codes(group: str) -> list[str]:
            resource = definition_pb2.Resource(name=group)
            assignment = stub.QueryAssignment(
                service_pb2.QueryAssignmentRequest(topic=topic, group=resource), metadata=METADATA, timeout=10
            )
            heartbeat = stub.Heartbeat(
                service_pb2.HeartbeatRequest(group=resource, client_type=3), metadata=METADATA, timeout=10
            )
            request = service_pb2.ReceiveMessageRequest(
                group=resource,
                message_queue=definition_pb2.MessageQueue(topic=topic, id=-1),
                batch_size=1,
                invisible_duration={"seconds": 30},
                long_polling_timeout={"seconds": 5},
            )
            (received,) = [
                r.status for r in stub.ReceiveMessage(request, metadata=METADATA, timeout=30) if r.HasField("status")
            ]
            return [Code.Name(assignment.status.code), Code.Name(heartbeat.status.code), Code.Name(received.code)]

        assert codes("stranger") == ["CONSUMER_GROUP_NOT_FOUND"] * 3
        assert codes("known") == ["OK", "OK", "MESSAGE_NOT_FOUND"]
    finally:
        channel.close()
        assert serve.stop() == 0
