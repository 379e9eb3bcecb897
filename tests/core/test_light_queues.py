"""Light queues through the broker: send hooks and senders name them, pull and offsets work on them without topic
configs."""

import asyncio

import pytest

from core import BrokerError, IllegalMessageError, Message, Producer, PullStatus
from core.store.message import PROPERTY_MULTI_DISPATCH


async def test_a_send_hook_routes_every_producer_s_messages_into_light_queues(make_broker):
    broker = await make_broker()
    seen = []

    def hook(message: Message) -> list[str] | None:
        seen.append(message.topic)
        return ["%LMQ%all"] if message.topic == "sensors" else None

    broker.add_send_hook(hook)
    producer = Producer(broker)
    await producer.send("sensors", b"one")
    await producer.send("other", b"two")
    await broker.send_batch([Message(topic="sensors", body=b"three"), Message(topic="sensors", body=b"four")])
    assert seen == ["sensors", "other", "sensors", "sensors"]
    got = await broker.pull("mqtt-session", "%LMQ%all", 0, 0, max_count=10, long_poll_ms=2000)
    assert got.status is PullStatus.FOUND
    while len(got.messages) < 3:  # the batch may be dispatched a round later
        more = await broker.pull("mqtt-session", "%LMQ%all", 0, got.next_begin_offset, long_poll_ms=2000)
        got.messages += more.messages
        got.next_begin_offset = more.next_begin_offset
    assert [m.body for m in got.messages] == [b"one", b"three", b"four"]
    assert broker.groups.get("mqtt-session") is None  # readers of light queues are not registered groups


async def test_a_hook_that_raises_refuses_the_message(make_broker):
    broker = await make_broker()

    def refuse(message: Message) -> None:
        raise ValueError("no")

    broker.add_send_hook(refuse)
    with pytest.raises(ValueError, match="no"):
        await Producer(broker).send("sensors", b"x")
    assert broker.store.end_offset == 0


async def test_a_batch_gets_unique_ids_once_its_hooks_ran_and_a_refused_batch_reaches_no_hook(make_broker):
    broker = await make_broker()
    seen = []
    broker.add_send_hook(lambda message: seen.append(dict(message.properties)))
    given = Message(topic="t", body=b"b", properties={"UNIQ_KEY": "mine"})
    results = await broker.send_batch([Message(topic="t", body=b"a"), given, Message(topic="t", body=b"c")])
    assert [s.get("UNIQ_KEY") for s in seen] == [None, "mine", None]  # hooks run before ids are given
    assert results[1].msg_id == "mine" and len({r.msg_id for r in results}) == 3
    seen.clear()
    with pytest.raises(IllegalMessageError, match="queue 9 does not exist"):
        await broker.send_batch([Message(topic="t", body=b"x", queue_id=9), Message(topic="t", body=b"y", queue_id=9)])
    assert seen == []


async def test_long_poll_on_a_light_queue_wakes_on_arrival(make_broker):
    broker = await make_broker()
    waiter = asyncio.create_task(broker.pull("g", "%LMQ%late", 0, 0, long_poll_ms=5000))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await broker.send(Message(topic="t", body=b"late", light_queues=["%LMQ%late"]))
    got = await asyncio.wait_for(waiter, 5)
    assert [m.body for m in got.messages] == [b"late"]


async def test_offsets_and_deletion_of_a_light_queue(make_broker):
    broker = await make_broker()
    await broker.send(Message(topic="t", body=b"x", light_queues=["%LMQ%q"]))
    # Dispatched (in the queue) before it is deleted: on a loaded machine the dispatcher thread could otherwise put
    # the entry in after the deletion, which is right for a message stored before it, but not what is tested here.
    assert await broker.store.wait_visible()
    broker.commit_offset("session-1", "%LMQ%q", 0, 1)
    assert broker.query_offset("session-1", "%LMQ%q", 0) == 1
    with pytest.raises(BrokerError, match="one queue"):
        await broker.pull("g", "%LMQ%q", 1, 0)
    broker.delete_light_queue("%LMQ%q")
    assert broker.query_offset("session-1", "%LMQ%q", 0) == -1
    assert broker.max_offset("%LMQ%q", 0) == 0
    with pytest.raises(BrokerError, match="not a light queue"):
        broker.delete_light_queue("t")


async def test_arrival_listeners_hear_which_queues_got_messages(make_broker):
    broker = await make_broker()
    heard: list[set[tuple[str, int]]] = []
    arrived = asyncio.Event()

    def listener(queues: set[tuple[str, int]]) -> None:
        heard.append(queues)
        arrived.set()

    broker.add_arrival_listener(listener)
    await broker.send(Message(topic="t", body=b"x", light_queues=["%LMQ%heard"]))
    await asyncio.wait_for(arrived.wait(), 5)
    assert {("t", 0), ("%LMQ%heard", 0)} <= set().union(*heard)


async def test_queue_entries_say_where_a_light_queue_s_messages_are_without_reading_them(make_broker):
    broker = await make_broker()
    results = [
        await broker.send(Message(topic="t", body=body, light_queues=["%LMQ%where"])) for body in (b"a", b"b", b"c")
    ]
    assert broker.store.wait_dispatched()
    entries = broker.queue_entries("%LMQ%where", 0, 1, 10)
    assert [offset for offset, _, _ in entries] == [r.commit_log_offset for r in results[1:]]
    assert all(size > 0 for _, size, _ in entries)
    assert [offset for offset, _, _ in broker.queue_entries("%LMQ%where", 0, 0, 1)] == [results[0].commit_log_offset]
    assert broker.queue_entries("%LMQ%where", 0, 3, 10) == []  # past the end
    assert broker.queue_entries("%LMQ%nowhere", 0, 0, 10) == []  # no such queue


async def read_all(broker, queue: str) -> list[bytes]:
    assert await broker.wait_visible()
    got = await broker.pull("reader", queue, 0, 0, max_count=100)
    return [m.body for m in got.messages]


async def test_the_broker_merges_the_sender_s_and_every_hook_s_light_queues_in_order_without_repeats(make_broker):
    broker = await make_broker()
    broker.add_send_hook(lambda message: ["%LMQ%b", "%LMQ%c"])
    broker.add_send_hook(lambda message: None)
    broker.add_send_hook(lambda message: iter(["%LMQ%c", "%LMQ%d"]))  # any iterable
    message = Message(topic="t", body=b"one", light_queues=["%LMQ%a", "%LMQ%b"])
    await broker.send(message)
    batch = [Message(topic="t", body=b"two"), Message(topic="t", body=b"three", light_queues=("%LMQ%e",))]
    await broker.send_batch(batch)
    assert message.properties[PROPERTY_MULTI_DISPATCH] == "%LMQ%a,%LMQ%b,%LMQ%c,%LMQ%d"
    assert batch[1].properties[PROPERTY_MULTI_DISPATCH] == "%LMQ%e,%LMQ%b,%LMQ%c,%LMQ%d"
    assert message.light_queues == ["%LMQ%a", "%LMQ%b"]  # what the sender gave is left as it was
    for queue, bodies in {
        "%LMQ%a": [b"one"],
        "%LMQ%b": [b"one", b"two", b"three"],
        "%LMQ%d": [b"one", b"two", b"three"],
        "%LMQ%e": [b"three"],
    }.items():
        assert await read_all(broker, queue) == bodies, queue
    got = await broker.pull("reader", "t", 0, 0, max_count=10)
    assert [m.light_queues for m in got.messages] == [
        ["%LMQ%a", "%LMQ%b", "%LMQ%c", "%LMQ%d"],
        ["%LMQ%b", "%LMQ%c", "%LMQ%d"],
        ["%LMQ%e", "%LMQ%b", "%LMQ%c", "%LMQ%d"],
    ]


async def test_a_sender_names_light_queues_without_any_hook_and_a_store_property_given_is_kept(make_broker):
    broker = await make_broker()
    await broker.send(Message(topic="t", body=b"own", light_queues=["%LMQ%own"]))
    await broker.send(Message(topic="t", body=b"nothing", light_queues=[]))
    # A caller that writes the store's property itself (as the store's own tests do) keeps its names, first.
    given = Message(
        topic="t", body=b"given", properties={PROPERTY_MULTI_DISPATCH: "%LMQ%given"}, light_queues=["%LMQ%own"]
    )
    await broker.send(given)
    assert given.properties[PROPERTY_MULTI_DISPATCH] == "%LMQ%given,%LMQ%own"
    assert await read_all(broker, "%LMQ%own") == [b"own", b"given"]
    assert await read_all(broker, "%LMQ%given") == [b"given"]


async def test_a_name_without_the_light_queue_prefix_refuses_the_message(make_broker):
    broker = await make_broker()
    broker.add_send_hook(lambda message: ["%LMQ%ok", "orders"] if message.body == b"bad" else None)
    with pytest.raises(IllegalMessageError, match="'orders' is not a light queue name") as refused:
        await broker.send(Message(topic="t", body=b"bad"))
    assert isinstance(refused.value, ValueError)
    with pytest.raises(IllegalMessageError, match="not a light queue name"):
        await broker.send_batch([Message(topic="t", body=b"fine"), Message(topic="t", body=b"x", light_queues=["t"])])
    assert broker.store.end_offset == 0  # nothing of either was stored
