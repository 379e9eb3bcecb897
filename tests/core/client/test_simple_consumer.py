import asyncio

import pytest

from core.client import Producer
from core.client.simple_consumer import MessageView, SimpleConsumer
from core.errors import TopicNotFoundError
from core.filter import FilterExpressionError, UnsupportedExpressionTypeError
from core.pop.errors import PopRequestError, ReceiptHandleError, ReceiptHandleProblem
from core.pop.service import PROPERTY_MESSAGE_GROUP, PopService
from core.tables.topic_config import MessageType

INVISIBLE_S = 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def send_all(broker, topic, bodies, **options):
    producer = Producer(broker)
    for body in bodies:
        await producer.send(topic, body, **options)
    await broker.store.wait_visible()


async def test_receive_gives_the_message_fields_and_ack_finishes_it(make_broker):
    broker = await make_broker()
    broker.create_topic("orders", queue_nums=2, message_type=MessageType.FIFO)
    await Producer(broker).send(
        "orders",
        b"hello",
        tags="created",
        keys=["o-1", "shop-9"],
        properties={"a": "1", PROPERTY_MESSAGE_GROUP: "shop-9"},
        sharding_key="shop-9",
    )
    await broker.store.wait_visible()
    consumer = SimpleConsumer(broker, "g", {"orders": "created"}, await_duration_s=0)
    [view] = await consumer.receive(16, INVISIBLE_S)
    assert isinstance(view, MessageView)
    assert (view.topic, view.body, view.tags, view.keys, view.properties["a"]) == (
        "orders",
        b"hello",
        "created",
        ["o-1", "shop-9"],
        "1",
    )
    assert view.message_group == "shop-9"
    assert view.delivery_attempt == 1 and view.message_id is not None
    await consumer.ack(view)
    await consumer.ack(view)  # harmless
    assert broker.query_offset("g", "orders", view.message.queue_id) == 1
    assert await consumer.receive(16, INVISIBLE_S) == []


async def test_consumers_of_one_group_never_share_an_invisible_message(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=4)
    await send_all(broker, "t", [b"%d" % n for n in range(40)])
    first = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0)
    second = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0)
    assert first.pop_service is second.pop_service is PopService.of(broker)
    seen: list[bytes] = []
    for consumer in [first, second] * 10:
        seen += [view.body for view in await consumer.receive(3, INVISIBLE_S)]
    assert len(seen) == len(set(seen)) == 40
    other = SimpleConsumer(broker, "h", {"t": "*"}, await_duration_s=0)
    got: list[bytes] = []
    while views := await other.receive(32, INVISIBLE_S):
        got += [view.body for view in views]
    assert sorted(got) == sorted(seen)


async def test_an_unacked_message_comes_back_and_the_old_view_is_refused(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    await send_all(broker, "t", [b"x"])
    clock = FakeClock()
    consumer = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0, pop_service=PopService(broker, clock))
    [first] = await consumer.receive(1, INVISIBLE_S)
    clock.advance(INVISIBLE_S)
    [second] = await consumer.receive(1, INVISIBLE_S)
    assert (second.body, second.delivery_attempt, second.message.reconsume_times) == (b"x", 2, 1)
    with pytest.raises(ReceiptHandleError, match="delivered again"):
        await consumer.ack(first)
    await consumer.ack(second)


async def test_change_invisible_duration_returns_a_view_with_the_new_handle(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    await send_all(broker, "t", [b"x"])
    clock = FakeClock()
    consumer = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0, pop_service=PopService(broker, clock))
    [view] = await consumer.receive(1, 10)
    longer = await consumer.change_invisible_duration(view, 120)
    assert longer.invisible_until == clock.now + 120 and longer.receipt_handle != view.receipt_handle
    clock.advance(60)
    assert await consumer.receive(1, 10) == []  # not back at the first deadline
    with pytest.raises(ReceiptHandleError) as refused:
        await consumer.ack(view)
    assert refused.value.problem is ReceiptHandleProblem.SUPERSEDED
    shorter = await consumer.change_invisible_duration(longer, 0)
    [again] = await consumer.receive(1, 10)
    assert again.delivery_attempt == 2
    with pytest.raises(ReceiptHandleError):
        await consumer.ack(shorter)
    await consumer.ack(again)


async def test_fifo_groups_come_in_order_through_the_consumer(make_broker):
    broker = await make_broker()
    broker.create_topic("f", queue_nums=1, message_type=MessageType.FIFO)
    producer = Producer(broker)
    for n in range(3):
        for group in ("A", "B"):
            await producer.send("f", f"{group}{n}".encode(), properties={PROPERTY_MESSAGE_GROUP: group})
    await broker.store.wait_visible()
    consumer = SimpleConsumer(broker, "g", {"f": "*"}, await_duration_s=0)
    received: list[bytes] = []
    while views := await consumer.receive(32, INVISIBLE_S):
        assert len({view.message_group for view in views}) == len(views)  # one per message group at a time
        for view in views:
            received.append(view.body)
            await consumer.ack(view)
    assert [body for body in received if body.startswith(b"A")] == [b"A0", b"A1", b"A2"]
    assert [body for body in received if body.startswith(b"B")] == [b"B0", b"B1", b"B2"]


async def test_tag_and_sql92_subscriptions_filter(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    broker.create_topic("u", queue_nums=1)
    producer = Producer(broker)
    for n, tag in enumerate(["a", "b", "c"]):
        await producer.send("t", b"t%d" % n, tags=tag)
        await producer.send("u", b"u%d" % n, properties={"n": str(n)})
    await broker.store.wait_visible()
    consumer = SimpleConsumer(broker, "g", {"t": "a || c", "u": ("SQL92", "n >= 1")}, await_duration_s=0)
    assert consumer.subscriptions == {"t": ("TAG", "a || c"), "u": ("SQL92", "n >= 1")}
    got = [view.body for view in await consumer.receive(32, INVISIBLE_S)]
    assert sorted(got) == [b"t0", b"t2", b"u1", b"u2"]


async def test_malformed_subscriptions_fail_at_construction(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    with pytest.raises(FilterExpressionError, match="position"):
        SimpleConsumer(broker, "g", {"t": "a || || b"})
    with pytest.raises(FilterExpressionError):
        SimpleConsumer(broker, "g", {"t": ("SQL92", "n >")})
    with pytest.raises(UnsupportedExpressionTypeError):
        SimpleConsumer(broker, "g", {"t": ("REGEX", "a.*")})
    with pytest.raises(ValueError, match="expression type, expression"):
        SimpleConsumer(broker, "g", {"t": ("SQL92",)})
    with pytest.raises(TopicNotFoundError):
        SimpleConsumer(broker, "g", {"missing": "*"})


async def test_receive_arguments_are_checked(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=1)
    consumer = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0)
    with pytest.raises(PopRequestError, match="max_message_num 0"):
        await consumer.receive(0, INVISIBLE_S)
    with pytest.raises(PopRequestError, match="invisible duration 5"):
        await consumer.receive(1, 5)
    consumer.unsubscribe("t")
    with pytest.raises(PopRequestError, match="no subscription"):
        await consumer.receive(1, INVISIBLE_S)


async def test_receive_waits_for_a_message_on_any_subscribed_topic(make_broker):
    broker = await make_broker()
    broker.create_topic("t", queue_nums=2)
    broker.create_topic("u", queue_nums=2)
    consumer = SimpleConsumer(broker, "g", {"t": "*", "u": "*"}, await_duration_s=15)
    for topic in ("u", "t"):
        waiting = asyncio.ensure_future(consumer.receive(8, INVISIBLE_S))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await Producer(broker).send(topic, b"late-" + topic.encode())
        views = await asyncio.wait_for(waiting, 10)
        assert [(view.topic, view.body) for view in views] == [(topic, b"late-" + topic.encode())]


async def test_unacked_messages_come_back_after_a_restart(make_broker, tmp_path):
    broker = await make_broker(tmp_path)
    broker.create_topic("t", queue_nums=4)
    await send_all(broker, "t", [b"%d" % n for n in range(20)])
    consumer = SimpleConsumer(broker, "g", {"t": "*"}, await_duration_s=0)
    views = await consumer.receive(10, INVISIBLE_S)
    assert len(views) == 10
    for view in views:
        await consumer.ack(view)
    acked = {view.body for view in views}
    await broker.close()
    broker.store.close()

    reopened = await make_broker(tmp_path)
    consumer = SimpleConsumer(reopened, "g", {"t": "*"}, await_duration_s=0)
    again: list[bytes] = []
    while batch := await consumer.receive(32, INVISIBLE_S):
        again += [view.body for view in batch]
        assert all(view.delivery_attempt == 1 for view in batch)  # attempts are counted per run
    assert len(again) == 10
    assert set(again) == {b"%d" % n for n in range(20)} - acked
    with pytest.raises(ReceiptHandleError, match="broker restarted"):
        await consumer.ack(views[0])
