"""Delivery planning and outbound QoS 1/2 flows of a session, without a socket (session.py)."""

from __future__ import annotations

from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sessions.session import Outgoing, Session, Subscription


def session_with(*subs: Subscription) -> Session:
    session = Session("me")
    for sub in subs:
        session.subscriptions[sub.key] = sub
        session.read_offsets.setdefault(sub.queue, 0)
    return session


def message(qos: int = 2, retain: bool = False, client_id: str = "other") -> MqttMessage:
    return MqttMessage("a/b", b"x", qos, retain, client_id)


def test_overlapping_subscriptions_deliver_once_at_the_highest_granted_qos_capped_by_the_published_qos():
    low = Subscription("a/#", 0, subscription_id=1)
    high = Subscription("a/+", 1, subscription_id=2)
    session = session_with(low, high)
    positions = [(low.queue, 5), (high.queue, 9)]
    assert session.delivery(message(qos=2), session.matching(positions)) == (1, False, [1, 2])
    assert session.delivery(message(qos=0), session.matching(positions)) == (0, False, [1, 2])


def test_no_local_skips_the_clients_own_messages_on_that_subscription_only():
    mine = Subscription("a/#", 2, no_local=True)
    other = Subscription("a/+", 1)
    session = session_with(mine, other)
    assert session.delivery(message(client_id="me"), [mine]) is None
    assert session.delivery(message(client_id="me"), [mine, other]) == (1, False, [])


def test_retain_as_published_keeps_the_flag_only_where_asked():
    plain = Subscription("a/#", 1)
    kept = Subscription("a/+", 1, retain_as_published=True)
    session = session_with(plain, kept)
    assert session.delivery(message(retain=True), [plain]) == (1, False, [])
    assert session.delivery(message(retain=True), [plain, kept]) == (1, True, [])


def test_shared_subscriptions_are_not_read_from_the_sessions_own_positions():
    own = Subscription("a/#", 1)
    shared = Subscription("a/#", 1, share_group="g")
    session = session_with(own, shared)
    assert session.own_queues() == {own.queue} and session.queues() == {own.queue, shared.queue}
    assert session.matching([(own.queue, 1), (shared.queue, 1)]) == [own]


def test_the_committed_position_is_the_lowest_unacknowledged_in_flight():
    sub = Subscription("a/#", 1)
    session = session_with(sub)
    for offset, packet_id in ((0, 1), (1, 2), (2, 3)):
        session.sent(packet_id, Outgoing(message(), 1, False, [], [(sub.queue, offset)]))
        session.advance([(sub.queue, offset)])
    assert session.read_offsets[sub.queue] == 3 and session.committed(sub.queue) == 0
    assert session.acknowledged(2) is not None and session.committed(sub.queue) == 0  # 0 still in flight
    assert session.acknowledged(1) is not None and session.committed(sub.queue) == 2
    assert session.acknowledged(1) is None  # an unknown id changes nothing
    session.acknowledged(3)
    assert session.committed(sub.queue) == 3 and not session.inflight


def test_a_record_planned_before_a_subscribe_holds_the_new_subscription_and_its_start():
    sub = Subscription("a/#", 1)
    session = session_with(sub)
    new = Subscription("b", 0)
    record = session.to_json({**session.subscriptions, new.key: new}, {new.queue: 42})
    assert [item["filter"] for item in record["subscriptions"]] == ["a/#", "b"]  # type: ignore[index]
    assert record["positions"] == {sub.queue: 0, new.queue: 42}
    assert Session.from_json("me", record).read_offsets[new.queue] == 42
    assert set(session.subscriptions) == {"a/#"}  # the session itself unchanged
