"""RecallMessage on a real `mqgate serve`: a timer message sent with the official client (rocketmq-python-client
5.1.2) carries a recall handle in its receipt; recalled through the protocol's stubs (and again with the client's own
`recall_message`) before it is due, it never reaches a consumer, also after the server restarts, while one sent
beside it arrives. The answers RocketMQ's proxy gives: OK with the message id for a recall and a second one,
INTERNAL_SERVER_ERROR for a garbage handle, another topic's handle or a message due already,
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE on a NORMAL topic, TOPIC_NOT_FOUND for an unknown one."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.grpc_protocol import Code, definition_pb2, service_pb2, service_pb2_grpc

from tests.proxy.serving import client_config, grpc_port, receive_all, start, write_topics
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

TOPICS = {"delayed": "DELAY", "elsewhere": "DELAY", "plain": "NORMAL"}
METADATA = (("x-mq-client-id", "recall-test-1"),)
# Far enough ahead for the sends and recalls of a loaded machine; the test waits for it once.
AHEAD_MS = 4000


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    data_dir = tmp_path_factory.mktemp("recall") / "data"
    write_topics(data_dir, TOPICS, queues=1)
    process = start(data_dir, "--no-auto-create-topic")
    yield process
    assert process.stop() == 0
    assert "Traceback" not in process.stderr(), process.stderr()


def started_producer(serve: ServeProcess) -> Producer:
    producer = Producer(client_config(serve), tuple(TOPICS))
    producer.startup()
    return producer


def timer_message(topic: str, body: bytes, deliver_ms: int | None) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    if deliver_ms is not None:
        m.delivery_timestamp = deliver_ms  # milliseconds, as the client documents
    return m


def recall(serve: ServeProcess, topic: str, handle: str) -> service_pb2.RecallMessageResponse:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port(serve)}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        request = service_pb2.RecallMessageRequest(topic=definition_pb2.Resource(name=topic), recall_handle=handle)
        return stub.RecallMessage(request, metadata=METADATA, timeout=10)


def received(serve: ServeProcess, topic: str, count: int, linger_s: float = 1.0) -> list[bytes]:
    """What a new consumer group receives: `count` messages, then whatever more arrives within `linger_s`."""
    consumer = SimpleConsumer(client_config(serve), f"g-{uuid.uuid4().hex[:8]}", {topic: FilterExpression()}, 5)
    consumer.startup()
    try:
        bodies = [m.body for m in receive_all(consumer, count)]
        deadline = time.monotonic() + linger_s
        while time.monotonic() < deadline:
            for m in consumer.receive(32, 30):
                bodies.append(m.body)
                consumer.ack(m)
        return bodies
    finally:
        consumer.shutdown()


def test_a_recalled_timer_message_never_arrives_and_its_neighbour_does(serve: ServeProcess) -> None:
    producer = started_producer(serve)
    try:
        due = int(time.time() * 1000) + AHEAD_MS
        recalled = producer.send(timer_message("delayed", b"recalled", due))
        kept = producer.send(timer_message("delayed", b"kept", due))
        plain = producer.send(timer_message("plain", b"now", None))
        assert recalled.recall_handle and kept.recall_handle and plain.recall_handle is None
        answer = recall(serve, "delayed", recalled.recall_handle)
        assert (answer.status.code, answer.message_id) == (Code.OK, recalled.message_id)
        # The second recall, with the official client's own call: OK again, as RocketMQ answers.
        assert producer.recall_message("delayed", recalled.recall_handle) == recalled.message_id
        other_topic = recall(serve, "elsewhere", kept.recall_handle)
        assert other_topic.status.code == Code.INTERNAL_SERVER_ERROR
        assert "topic 'delayed', not 'elsewhere'" in other_topic.status.message
        assert received(serve, "delayed", 1, linger_s=2.0) == [b"kept"]
        assert time.time() * 1000 >= due
        too_late = recall(serve, "delayed", kept.recall_handle)
        assert too_late.status.code == Code.INTERNAL_SERVER_ERROR and "past it" in too_late.status.message
        with pytest.raises(Exception, match="past it"):
            producer.recall_message("delayed", kept.recall_handle)
    finally:
        producer.shutdown()


@pytest.mark.parametrize(
    ("topic", "handle", "code", "says"),
    [
        ("delayed", "garbage!", Code.INTERNAL_SERVER_ERROR, "not URL-safe base64"),
        ("delayed", "", Code.INTERNAL_SERVER_ERROR, "empty"),
        ("delayed", "djEgZGVsYXllZA==", Code.INTERNAL_SERVER_ERROR, "lacks a field"),  # "v1 delayed"
        ("plain", "djEgZGVsYXllZA==", Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "DELAY or MIXED"),
        ("nowhere", "djEgZGVsYXllZA==", Code.TOPIC_NOT_FOUND, "nowhere"),
        ("", "djEgZGVsYXllZA==", Code.ILLEGAL_TOPIC, "no topic"),
    ],
)
def test_a_bad_recall_gets_the_proxys_code(serve: ServeProcess, topic, handle, code, says) -> None:
    answer = recall(serve, topic, handle)
    assert answer.status.code == code, answer.status
    assert says in answer.status.message
    assert not answer.message_id


def test_a_recall_holds_across_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    write_topics(data_dir, TOPICS, queues=1)
    process = start(data_dir)
    try:
        producer = started_producer(process)
        try:
            due = int(time.time() * 1000) + AHEAD_MS
            recalled = producer.send(timer_message("delayed", b"recalled", due))
            producer.send(timer_message("delayed", b"kept", due))
            assert producer.recall_message("delayed", recalled.recall_handle) == recalled.message_id
        finally:
            producer.shutdown()
        assert process.stop() == 0
        process = start(data_dir)
        assert received(process, "delayed", 1, linger_s=2.0) == [b"kept"]
        assert time.time() * 1000 >= due
    finally:
        assert process.stop() == 0
        assert "Traceback" not in process.stderr(), process.stderr()
