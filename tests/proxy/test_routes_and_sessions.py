"""The pure parts of the endpoint: route and assignment answers against a reference of the proxy's numbering, the
settings a client is sent, the auto-renewal of held messages on a moved clock, and the status of every core
error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import Code, MessageType, Permission, Settings, definition_pb2

from core import (
    GroupRetryPolicy,
    IllegalMessageError,
    PayloadTooLargeError,
    Perm,
    ReceiptHandleError,
    ReceiptHandleProblem,
    RetryPolicyType,
    ServiceNotAvailableError,
    TopicConfig,
    TopicNotFoundError,
)
from core import (
    MessageType as TopicMessageType,
)
from proxy.client_sessions import ClientSessions
from proxy.client_settings import consumer_settings, producer_settings
from proxy.held_messages import RENEW_AHEAD_MS, RENEW_MAX_MS, RENEW_SLICE_MS, HeldMessages
from proxy.routes import accepts, assignments, broker_of, message_queues
from proxy.status_codes import RequestError, status_of

BROKER = broker_of("broker-a", definition_pb2.Endpoints(addresses=[definition_pb2.Address(host="10.0.0.1", port=8081)]))
PERMS = [Perm.READ | Perm.WRITE, Perm.READ, Perm.WRITE, Perm(0)]


def reference_queues(reads: int, writes: int, perm: Perm) -> list[int]:
    """The proxy's numbering (RouteActivity.genMessageQueueFromQueueData), written out plainly."""
    readable, writable = bool(perm & Perm.READ), bool(perm & Perm.WRITE)
    if readable and writable:
        both = min(reads, writes)
        return (
            [Permission.READ] * (reads - both) + [Permission.WRITE] * (writes - both) + [Permission.READ_WRITE] * both
        )
    if writable:
        return [Permission.WRITE] * writes
    if readable:
        return [Permission.READ] * reads
    return [Permission.NONE] * max(1, reads, writes)


@given(st.integers(1, 16), st.integers(1, 16), st.sampled_from(PERMS), st.sampled_from(list(TopicMessageType)))
def test_route_queues_are_numbered_as_the_proxy_numbers_them(reads: int, writes: int, perm: Perm, kind) -> None:
    config = TopicConfig("t", read_queue_nums=reads, write_queue_nums=writes, perm=perm, message_type=kind)
    queues = message_queues(config, BROKER)
    assert [q.permission for q in queues] == reference_queues(reads, writes, perm)
    assert [q.id for q in queues] == list(range(len(queues)))
    assert all(q.broker == BROKER and q.topic.name == "t" for q in queues)
    types = [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION]
    expected = (
        types if kind is TopicMessageType.MIXED else [types[[t.value for t in TopicMessageType].index(kind.value)]]
    )
    assert all(list(q.accept_message_types) == expected for q in queues)
    assert [t for t in types if accepts(config, t)] == expected


def test_assignments_are_one_per_broker_or_one_per_queue_when_orderly() -> None:
    config = TopicConfig("t", read_queue_nums=3, write_queue_nums=3)
    assert [a.message_queue.id for a in assignments(config, BROKER, orderly=False)] == [-1]
    assert [a.message_queue.id for a in assignments(config, BROKER, orderly=True)] == [0, 1, 2]
    with pytest.raises(RequestError) as refused:
        assignments(TopicConfig("t", perm=Perm.WRITE), BROKER, orderly=False)
    assert refused.value.code == Code.FORBIDDEN


def test_settings_merge_the_servers_terms_into_the_clients() -> None:
    given_settings = Settings(request_timeout={"seconds": 3})
    given_settings.publishing.topics.add(name="t")
    producer = producer_settings(given_settings, 1024)
    assert (producer.publishing.max_body_size, producer.publishing.validate_message_type) == (1024, True)
    assert producer.backoff_policy.max_attempts == 3
    assert [t.name for t in producer.publishing.topics] == ["t"]
    policy = GroupRetryPolicy(RetryPolicyType.CUSTOMIZED, next_ms=(1000, 2000))
    consumer = consumer_settings(Settings(), retry_max_times=4, orderly=True, policy=policy)
    assert consumer.backoff_policy.max_attempts == 5
    assert [d.seconds for d in consumer.backoff_policy.customized_backoff.next] == [1, 2]
    assert consumer.subscription.fifo is True
    assert (consumer.subscription.receive_batch_size, consumer.subscription.long_polling_timeout.seconds) == (32, 20)
    exponential = GroupRetryPolicy(RetryPolicyType.EXPONENTIAL, initial_ms=500, max_ms=8000, multiplier=3)
    backoff = consumer_settings(Settings(), retry_max_times=0, orderly=False, policy=exponential).backoff_policy
    assert (backoff.exponential_backoff.initial.nanos, backoff.exponential_backoff.max.seconds) == (500_000_000, 8)
    assert backoff.exponential_backoff.multiplier == 3


def test_held_messages_are_renewed_ahead_of_their_end_and_let_go_after_the_max() -> None:
    held = HeldMessages()
    held.add("g", "h1", now_ms=0)
    assert held.due(RENEW_SLICE_MS - RENEW_AHEAD_MS - 1) == []
    (due,) = held.due(RENEW_SLICE_MS - RENEW_AHEAD_MS)
    assert due[0] == "h1"
    held.renewed("h1", "h1-b", now_ms=RENEW_SLICE_MS - RENEW_AHEAD_MS)
    assert held.current("h1") == "h1-b"  # the client's handle names the newest one
    assert held.due(RENEW_MAX_MS) == [] and len(held) == 0  # three hours: no more renewals
    held.add("g", "h2", now_ms=0)
    assert held.take("h2") == "h2" and held.take("h2") == "h2" and len(held) == 0
    held.add("g", "h3", now_ms=0)
    assert [h.handle for h in held.release_all()] == ["h3"] and len(held) == 0


def test_sessions_expire_only_when_silent_and_without_a_stream() -> None:
    now = [0.0]
    sessions = ClientSessions(expire_after_s=120, clock=lambda: now[0])
    quiet, streaming = sessions.touch("a"), sessions.touch("b")
    streaming.outbox = object()  # type: ignore[assignment]
    now[0] = 121
    assert sessions.take_expired() == [quiet]
    assert sessions.find("a") is None and sessions.find("b") is streaming


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TopicNotFoundError("topic 't' does not exist"), Code.TOPIC_NOT_FOUND),
        (PayloadTooLargeError("too big"), Code.MESSAGE_BODY_TOO_LARGE),
        (IllegalMessageError("bad"), Code.BAD_REQUEST),
        (ReceiptHandleError(ReceiptHandleProblem.MALFORMED, "no handle"), Code.INVALID_RECEIPT_HANDLE),
        (ServiceNotAvailableError("disk full"), Code.INTERNAL_SERVER_ERROR),
        (RequestError(Code.ILLEGAL_MESSAGE_TAG, "tag"), Code.ILLEGAL_MESSAGE_TAG),
        (KeyError("oops"), Code.INTERNAL_SERVER_ERROR),
    ],
)
def test_every_refusal_has_its_status(error: Exception, code: int) -> None:
    answer = status_of(error)
    assert Code.Name(answer.code) == Code.Name(code)
    assert answer.message
    if isinstance(error, KeyError):
        assert "KeyError" in answer.message  # a defect of ours says what it was, without a traceback
