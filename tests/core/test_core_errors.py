"""One error hierarchy: whatever the public API raises derives from CoreError, the store's errors translated at the
broker's boundary with their message kept and the store error as the cause."""

import pytest

import core
from core import (
    BrokerError,
    ConsumeFromWhere,
    CoreError,
    FilterExpressionError,
    IllegalArgumentError,
    IllegalMessageError,
    Message,
    MessageStore,
    PayloadTooLargeError,
    Producer,
    PullConsumer,
    PushConsumer,
    ServiceNotAvailableError,
    StorageError,
    StoreConfig,
    TopicConfigError,
    open_store,
    validate_topic,
)
from core.store import errors as store_errors


def test_every_exception_the_core_exports_derives_from_core_error():
    exported = [getattr(core, name) for name in core.__all__]
    errors = [value for value in exported if isinstance(value, type) and issubclass(value, BaseException)]
    assert len(errors) >= 15
    assert all(issubclass(error, CoreError) for error in errors), [e for e in errors if not issubclass(e, CoreError)]
    assert BrokerError is CoreError
    assert not any(issubclass(error, store_errors.StoreError) for error in errors)


async def test_store_errors_reach_the_sender_as_core_errors_with_the_same_message(make_broker):
    broker = await make_broker()
    cases = [
        (Message(topic="t", body=b"x" * (2 * 1024 * 1024)), PayloadTooLargeError, store_errors.MessageTooLargeError),
        (
            Message(topic="t", body=b"x", properties={"a\x02": "b"}),
            IllegalMessageError,
            store_errors.InvalidMessageError,
        ),
        (Message(topic="t", body="text"), IllegalMessageError, store_errors.InvalidMessageError),  # type: ignore[arg-type]
        (Message(topic="t", body=b"x", light_queues=["%LMQ%a/b"]), TopicConfigError, store_errors.InvalidTopicError),
    ]
    for message, core_error, store_error in cases:
        with pytest.raises(core_error) as raised:
            await broker.send(message)
        assert type(raised.value.__cause__) is store_error
        assert str(raised.value) == str(raised.value.__cause__)
        assert isinstance(raised.value, ValueError)  # the sender's mistake: a front door answers it to its client
        with pytest.raises(core_error):
            await broker.send_batch([Message(topic="t", body=b"fine"), message])
    broker.store.close()
    with pytest.raises(ServiceNotAvailableError, match="the store is not open") as raised:
        await broker.send(Message(topic="t", body=b"x"))
    assert isinstance(raised.value.__cause__, store_errors.StoreNotWritableError)
    assert not isinstance(raised.value, ValueError)  # the server's failure, not the sender's


def test_opening_a_store_another_process_holds_is_a_storage_error(tmp_path):
    config = StoreConfig(store_dir=tmp_path / "store")
    first = MessageStore(config)
    open_store(first)
    try:
        with pytest.raises(StorageError, match="is open in another process") as raised:
            open_store(MessageStore(config))
        assert isinstance(raised.value.__cause__, store_errors.StoreLockedError)
    finally:
        first.close()


def test_topic_names_are_checked_with_the_core_s_topic_error():
    assert validate_topic("orders_2-eu") == "orders_2-eu"
    with pytest.raises(TopicConfigError, match=r"topic 'a/b': '/' is not allowed in a topic name"):
        validate_topic("a/b")
    with pytest.raises(TopicConfigError, match="at most 127"):
        validate_topic("t" * (core.MAX_TOPIC_LENGTH + 1))


async def test_client_api_misuse_is_an_illegal_argument(make_broker):
    broker = await make_broker()
    with pytest.raises(IllegalArgumentError, match="needs consume_timestamp_ms"):
        PullConsumer(broker, "g", consume_from=ConsumeFromWhere.TIMESTAMP)
    with pytest.raises(IllegalArgumentError, match="subscribe to a topic before start"):
        await PushConsumer(broker, "g", lambda messages, context: None).start()
    broker.create_topic("other")
    with pytest.raises(IllegalArgumentError, match="not a write queue"):
        await Producer(broker).send("t", b"x", selector=lambda queues, message, arg: broker.write_queues("other")[0])
    with pytest.raises(CoreError):
        PullConsumer(broker, "g").compile("a >", "SQL92")
    assert issubclass(FilterExpressionError, ValueError)
