"""The official RocketMQ 5 Python client (rocketmq-python-client 5.1.2), unchanged, against a real `mqgate serve`:
producers (sync, async, FIFO, delayed, transactional with check-back), simple consumers (receive, ack, change of
invisible time, redelivery), push consumers (success, failure, retries and the dead-letter topic) and filters.
Each test asserts that bodies, keys, tags and properties arrive as they were sent."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from rocketmq import (
    ConsumeResult,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType

from tests.proxy.serving import (
    WAIT_S,
    by_key,
    client_config,
    eventually,
    receive_all,
    start,
    write_groups,
    write_topics,
)

pytestmark = pytest.mark.slow

TOPICS = {
    "normal": "NORMAL",
    "filtered": "NORMAL",
    "fifo": "FIFO",
    "delayed": "DELAY",
    "tx": "TRANSACTION",
    "pushed": "NORMAL",
    "invisible": "NORMAL",
    "fifo-pushed": "FIFO",
}
GROUPS = {
    "fifo-g": {"consumeMessageOrderly": True},
    # Two retries a second apart, then the dead-letter topic.
    "push-g": {
        "retryMaxTimes": 2,
        "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000]}},
    },
    # Orderly: the client retries a failure itself (two attempts in all), then forwards it to the dead-letter topic.
    "fifo-push-g": {
        "consumeMessageOrderly": True,
        "retryMaxTimes": 1,
        "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000]}},
    },
}
# Transactions are checked back soon and often, so that a test need not wait RocketMQ's 6 s and 30 s.
CONFIG = "[broker]\ntransaction_timeout_ms = 1000\ntransaction_check_interval_ms = 1000\n"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory):
    data_dir: Path = tmp_path_factory.mktemp("grpc") / "data"
    write_topics(data_dir, TOPICS)
    write_groups(data_dir, GROUPS)
    process = start(data_dir, config=CONFIG)
    yield process
    assert process.stop() == 0
    assert "Traceback" not in process.stderr(), process.stderr()


@pytest.fixture(scope="module")
def config(serve):
    return client_config(serve)


@pytest.fixture(scope="module")
def producer(config):
    producer = Producer(config, tuple(TOPICS))
    producer.startup()
    yield producer
    producer.shutdown()


def message(topic: str, body: bytes, *, tag: str | None = None, key: str | None = None, **properties: str) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if key:
        m.keys = key
    for name, value in properties.items():
        m.add_property(name, value)
    return m


def simple_consumer(config, group: str, topic: str, expression: FilterExpression | None = None) -> SimpleConsumer:
    consumer = SimpleConsumer(config, group, {topic: expression or FilterExpression()}, await_duration=5)
    consumer.startup()
    return consumer


def test_sync_and_async_sends_arrive_unchanged(config, producer):
    receipts = {}
    for i in range(10):
        sent = message("normal", f"sync {i}".encode(), tag="TagA", key=f"s{i}", color="red", n=str(i))
        receipts[f"s{i}"] = producer.send(sent).message_id
    futures = {
        f"a{i}": producer.send_async(message("normal", f"async {i}".encode(), tag="TagB", key=f"a{i}", shape="o"))
        for i in range(10)
    }
    receipts.update({key: future.result(timeout=WAIT_S).message_id for key, future in futures.items()})

    consumer = simple_consumer(config, "normal-g", "normal")
    try:
        got = by_key(receive_all(consumer, 20))
    finally:
        consumer.shutdown()
    assert set(got) == set(receipts)
    for i in range(10):
        m = got[f"s{i}"]
        assert (m.body, m.tag, m.keys, m.properties) == (
            f"sync {i}".encode(),
            "TagA",
            {f"s{i}"},
            {"color": "red", "n": str(i)},
        )
        assert m.message_id == receipts[f"s{i}"]
        assert m.delivery_attempt == 1
        a = got[f"a{i}"]
        assert (a.body, a.tag, a.keys, a.properties) == (f"async {i}".encode(), "TagB", {f"a{i}"}, {"shape": "o"})
        assert a.message_id == receipts[f"a{i}"]


def test_fifo_messages_of_four_groups_are_consumed_in_order_per_group(config, producer):
    for seq in range(10):
        for group in range(4):
            m = message("fifo", f"{group}:{seq}".encode(), key=f"f{group}-{seq}")
            m.message_group = f"order-{group}"
            producer.send(m)
    consumer = simple_consumer(config, "fifo-g", "fifo")
    seen: dict[str, list[int]] = defaultdict(list)
    try:
        for m in receive_all(consumer, 40):
            group, seq = m.body.decode().split(":")
            assert m.message_group == f"order-{group}"
            seen[group].append(int(seq))
    finally:
        consumer.shutdown()
    assert dict(seen) == {str(g): list(range(10)) for g in range(4)}


def test_a_message_with_a_delivery_timestamp_arrives_then_and_not_before(config, producer):
    deliver_ms = int(time.time() * 1000) + 2500
    m = message("delayed", b"later", key="d1")
    m.delivery_timestamp = deliver_ms  # milliseconds, as the client documents
    producer.send(m)
    consumer = simple_consumer(config, "delayed-g", "delayed")
    try:
        got = receive_all(consumer, 1)
        arrived_ms = time.time() * 1000
    finally:
        consumer.shutdown()
    assert [(x.body, x.keys) for x in got] == [(b"later", {"d1"})]
    assert arrived_ms >= deliver_ms
    assert got[0].delivery_timestamp == deliver_ms


class Checker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(next(iter(message.keys)))
        return TransactionResolution.COMMIT


def test_transactions_commit_roll_back_and_are_checked_back(config):
    checker = Checker()
    producer = Producer(config, ("tx",), checker)
    producer.startup()
    try:
        for key, ending in (("commit", "commit"), ("rollback", "rollback"), ("orphan", None)):
            transaction = producer.begin_transaction()
            producer.send(message("tx", key.encode(), tag="T", key=key, step="1"), transaction)
            if ending == "commit":
                transaction.commit()
            elif ending == "rollback":
                transaction.rollback()
        # The orphan is left undecided: the broker asks the producer over its Telemetry stream, which commits it.
        assert eventually(lambda: "orphan" in checker.checked), checker.checked
        consumer = simple_consumer(config, "tx-g", "tx")
        try:
            got = by_key(receive_all(consumer, 2))
            assert consumer.receive(32, 10) == []  # the rolled back one never comes
        finally:
            consumer.shutdown()
    finally:
        producer.shutdown()
    assert set(got) == {"commit", "orphan"}
    for key, m in got.items():
        assert (m.body, m.tag, m.properties) == (key.encode(), "T", {"step": "1"})
    assert set(checker.checked) == {"orphan"}


def test_simple_consumer_acks_changes_invisible_time_and_gets_the_unacked_again(config, producer):
    producer.send(message("invisible", b"again", key="inv1", p="q"))
    consumer = simple_consumer(config, "invisible-g", "invisible")
    try:
        first = receive_all(consumer, 1, invisible_s=10, ack=False)
        assert [m.body for m in first] == [b"again"]
        assert first[0].delivery_attempt == 1
        consumer.change_invisible_duration(first[0], 1)  # visible again in a second, not in ten
        began = time.monotonic()
        second = receive_all(consumer, 1, invisible_s=10, ack=False)
        assert time.monotonic() - began < 9
        assert [(m.body, m.keys, m.properties, m.delivery_attempt) for m in second] == [
            (b"again", {"inv1"}, {"p": "q"}, 2)
        ]
        consumer.ack(second[0])
        assert consumer.receive(32, 10) == []
    finally:
        consumer.shutdown()


def test_tag_and_sql92_filters_pick_what_they_subscribe(config, producer):
    for i in range(6):
        producer.send(message("filtered", f"m{i}".encode(), tag=f"Tag{i % 3}", key=f"k{i}", a=str(i)))
    tags = simple_consumer(config, "tag-g", "filtered", FilterExpression("Tag0 || Tag2"))
    sql = simple_consumer(config, "sql-g", "filtered", FilterExpression("a > 3", FilterType.SQL))
    try:
        by_tag = by_key(receive_all(tags, 4))
        by_sql = by_key(receive_all(sql, 2))
        assert tags.receive(32, 10) == [] and sql.receive(32, 10) == []
    finally:
        tags.shutdown()
        sql.shutdown()
    assert sorted(by_tag) == ["k0", "k2", "k3", "k5"]
    assert sorted(by_sql) == ["k4", "k5"]
    assert {k: (m.tag, m.properties) for k, m in by_sql.items()} == {
        "k4": ("Tag1", {"a": "4"}),
        "k5": ("Tag2", {"a": "5"}),
    }


class Listener(MessageListener):
    def __init__(self) -> None:
        self.deliveries: dict[str, list[int]] = defaultdict(list)
        self.lock = threading.Lock()
        self.messages: dict[str, Message] = {}

    def consume(self, message: Message) -> ConsumeResult:
        key = next(iter(message.keys))
        with self.lock:
            self.deliveries[key].append(message.delivery_attempt)
            self.messages[key] = message
        return ConsumeResult.FAILURE if key.startswith("fail") else ConsumeResult.SUCCESS


def test_push_consumer_success_once_failure_retried_then_dead_lettered(config, producer):
    listener = Listener()
    consumer = PushConsumer(config, "push-g", listener, {"pushed": FilterExpression()})
    consumer.startup()
    try:
        producer.send(message("pushed", b"fine", tag="P", key="ok1", x="1"))
        producer.send(message("pushed", b"broken", tag="P", key="fail1", x="2"))
        # retryMaxTimes 2: three deliveries, a second apart, then the group's dead-letter topic.
        assert eventually(lambda: len(listener.deliveries["fail1"]) >= 3), dict(listener.deliveries)
        dead = simple_consumer(config, "dlq-reader", "%DLQ%push-g")
        try:
            dead_letters = receive_all(dead, 1)
        finally:
            dead.shutdown()
        time.sleep(2)  # no fourth delivery comes
    finally:
        consumer.shutdown()
    assert listener.deliveries["ok1"] == [1]
    assert listener.deliveries["fail1"] == [1, 2, 3]
    ok = listener.messages["ok1"]
    assert (ok.body, ok.tag, ok.properties) == (b"fine", "P", {"x": "1"})
    assert [(m.body, m.tag, m.keys, m.properties) for m in dead_letters] == [(b"broken", "P", {"fail1"}, {"x": "2"})]


def test_fifo_push_consumer_forwards_a_message_it_cannot_consume_to_the_dead_letter_topic(config, producer):
    listener = Listener()
    order: list[str] = []
    consume = listener.consume

    def consume_in_order(message: Message) -> ConsumeResult:
        order.append(next(iter(message.keys)))
        return consume(message)

    listener.consume = consume_in_order  # type: ignore[method-assign]
    consumer = PushConsumer(config, "fifo-push-g", listener, {"fifo-pushed": FilterExpression()})
    consumer.startup()
    try:
        for key, body in (("fail-first", b"cannot"), ("then-ok", b"can")):
            m = message("fifo-pushed", body, tag="F", key=key, step=key)
            m.message_group = "line-1"
            producer.send(m)
        assert eventually(lambda: listener.deliveries["then-ok"] == [1]), dict(listener.deliveries)
        dead = simple_consumer(config, "fifo-dlq-reader", "%DLQ%fifo-push-g")
        try:
            dead_letters = receive_all(dead, 1)
        finally:
            dead.shutdown()
    finally:
        consumer.shutdown()
    # Two attempts of the first message (the client's own retry), forwarded, and only then the next of its group.
    assert order == ["fail-first", "fail-first", "then-ok"]
    assert [(m.body, m.tag, m.keys, m.properties) for m in dead_letters] == [
        (b"cannot", "F", {"fail-first"}, {"step": "fail-first"})
    ]
