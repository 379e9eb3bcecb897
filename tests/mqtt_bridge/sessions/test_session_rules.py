"""The session rules without a socket: events in, actions out (session_rules.py)."""

from __future__ import annotations

from types import SimpleNamespace

import mqtt5
import pytest

from mqtt_bridge.errors import ProtocolError
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sessions.session import NEVER_EXPIRES, Outgoing, Session
from mqtt_bridge.sessions.session_rules import (
    TRANSITIONS,
    Accept,
    Attach,
    CancelTimer,
    CloseTakenOver,
    CommitPositions,
    Detach,
    EndSession,
    MoveSession,
    PublishWill,
    Resend,
    SessionRuleError,
    SessionRules,
    SessionState,
    StartDelivery,
    StartTimer,
    StoreSession,
    Timer,
)

NOW = 1_000_000


class Conn:
    """A connection as the rules see it: any object, compared by identity."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Conn({self.name})"


def connect(rules: SessionRules, conn: Conn, client_id: str = "c", *, version: int = 5, clean: bool = True,
            expiry: int = 0, will: mqtt5.Will | None = None, now: int = NOW):  # fmt: skip
    return rules.connect(conn, client_id, version=version, clean_start=clean, session_expiry=expiry, will=will,
                         username="u", now_ms=now)  # fmt: skip


def kinds(actions) -> list[str]:
    return [type(action).__name__ for action in actions]


def will(delay: int = 0) -> mqtt5.Will:
    return mqtt5.Will("/TopicA", payload=b"gone", will_delay_interval=delay)


def test_a_new_session_is_attached_accepted_and_delivered_to():
    rules = SessionRules()
    conn = Conn("1")
    actions = connect(rules, conn)
    assert kinds(actions) == ["CancelTimer", "Attach", "Accept", "Resend", "StartDelivery"]
    accept = actions[2]
    assert isinstance(accept, Accept) and accept.session_present is False and accept.connection is conn
    assert rules.state("c") is SessionState.CONNECTED and rules.holds(conn, "c")


def test_a_clean_session_ends_with_its_connection_and_its_will_is_published():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, will=will())
    actions = rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW)
    assert kinds(actions) == ["Detach", "PublishWill", "EndSession"]
    published = actions[1]
    assert isinstance(published, PublishWill) and published.will.topic == "/TopicA" and published.username == "u"
    assert rules.state("c") is None


def test_a_normal_disconnect_publishes_no_will():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, will=will())
    assert kinds(rules.connection_lost(conn, "c", publish_will=False, now_ms=NOW)) == ["Detach", "EndSession"]


def test_a_persistent_session_is_kept_until_it_expires():
    rules = SessionRules()
    conn = Conn("1")
    actions = connect(rules, conn, clean=False, expiry=60)
    assert StoreSession in map(type, actions)
    lost = rules.connection_lost(conn, "c", publish_will=False, now_ms=NOW)
    assert kinds(lost) == ["Detach", "CommitPositions", "StoreSession", "StartTimer"]
    assert lost[3] == StartTimer(Timer.EXPIRY, "c", 60.0)
    assert rules.state("c") is SessionState.DISCONNECTED
    ended = rules.timer_fired(Timer.EXPIRY, "c", NOW + 60_000)
    assert kinds(ended) == ["EndSession"] and rules.state("c") is None


def test_reconnecting_resumes_the_session_or_starts_clean():
    rules = SessionRules()
    first = Conn("1")
    connect(rules, first, clean=False, expiry=60)
    session = rules.sessions["c"]
    session.awaiting_release.add(5)
    rules.connection_lost(first, "c", publish_will=False, now_ms=NOW)
    resumed = connect(rules, Conn("2"), clean=False, expiry=60)
    assert CancelTimer(Timer.EXPIRY, "c") in resumed
    accept = next(action for action in resumed if isinstance(action, Accept))
    assert accept.session_present and accept.session is session
    rules.connection_lost(accept.connection, "c", publish_will=False, now_ms=NOW)
    fresh = connect(rules, Conn("3"), clean=True)
    assert isinstance(fresh[0], EndSession) and fresh[0].session is session
    accept = next(action for action in fresh if isinstance(action, Accept))
    assert not accept.session_present and accept.session is not session and not accept.session.awaiting_release


def test_a_v311_persistent_session_expires_after_the_configured_maximum():
    rules = SessionRules(session_expiry_max_s=3600)
    conn = Conn("1")
    connect(rules, conn, version=4, clean=False)
    assert rules.sessions["c"].expiry_interval == 3600
    lost = rules.connection_lost(conn, "c", publish_will=False, now_ms=NOW)
    assert lost[-1] == StartTimer(Timer.EXPIRY, "c", 3600.0)


def test_a_v5_expiry_over_the_maximum_is_cut_and_said_in_connack():
    rules = SessionRules(session_expiry_max_s=100)
    accept = next(a for a in connect(rules, Conn("1"), expiry=10**6) if isinstance(a, Accept))
    assert accept.session_expiry == 100
    accept = next(a for a in connect(rules, Conn("2"), "d", expiry=50) if isinstance(a, Accept))
    assert accept.session_expiry is None  # granted as asked: no property


def test_a_session_that_never_expires_gets_no_timer():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, expiry=NEVER_EXPIRES)
    assert not any(isinstance(a, StartTimer) for a in rules.connection_lost(conn, "c", False, NOW))


def test_a_delayed_will_is_published_when_its_delay_runs_out():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, clean=False, expiry=600, will=will(delay=30))
    lost = rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW)
    assert StartTimer(Timer.WILL, "c", 30.0) in lost and not any(isinstance(a, PublishWill) for a in lost)
    assert rules.will_pending("c")
    fired = rules.timer_fired(Timer.WILL, "c", NOW + 30_000)
    assert kinds(fired) == ["PublishWill"] and not rules.will_pending("c")


def test_a_delayed_will_is_not_published_if_the_client_comes_back_in_time():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, clean=False, expiry=600, will=will(delay=30))
    rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW)
    back = connect(rules, Conn("2"), clean=False, expiry=600)
    assert CancelTimer(Timer.WILL, "c") in back and not any(isinstance(a, PublishWill) for a in back)
    assert rules.timer_fired(Timer.WILL, "c", NOW + 30_000) == []


def test_the_will_delay_is_capped_by_the_session_expiry():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, clean=False, expiry=10, will=will(delay=300))
    assert StartTimer(Timer.WILL, "c", 10.0) in rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW)


def test_a_session_ending_with_its_will_still_delayed_publishes_it():
    # MQTT 5 3.1.3.2.2: at the delay or the session's end, whichever comes first.
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, clean=False, expiry=10, will=will(delay=10))
    rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW)
    ended = rules.timer_fired(Timer.EXPIRY, "c", NOW + 10_000)
    assert kinds(ended) == ["EndSession", "CancelTimer", "PublishWill"]
    assert rules.timer_fired(Timer.WILL, "c", NOW + 10_000) == []  # not twice


def test_v311_wills_are_never_delayed():
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, version=4, clean=False, will=will(delay=30))
    assert any(isinstance(a, PublishWill) for a in rules.connection_lost(conn, "c", publish_will=True, now_ms=NOW))


def test_a_takeover_closes_the_old_connection_once_and_keeps_the_session():
    rules = SessionRules()
    old, new = Conn("old"), Conn("new")
    connect(rules, old, clean=False, expiry=60, will=will())
    session = rules.sessions["c"]
    actions = connect(rules, new, clean=False, expiry=60)
    assert kinds(actions)[:3] == ["CloseTakenOver", "Detach", "PublishWill"]
    assert actions[0] == CloseTakenOver(old) and isinstance(actions[1], Detach) and actions[1].connection is old
    assert not any(isinstance(a, EndSession | CommitPositions | StartTimer) for a in actions)
    accept = next(a for a in actions if isinstance(a, Accept))
    assert accept.session is session and accept.session_present
    assert rules.holds(new, "c") and not rules.holds(old, "c")
    # The old connection's transport closing afterwards changes nothing.
    assert rules.connection_lost(old, "c", publish_will=True, now_ms=NOW) == []


def test_a_takeover_with_a_delayed_will_does_not_publish_it():
    rules = SessionRules()
    connect(rules, Conn("old"), clean=False, expiry=60, will=will(delay=5))
    actions = connect(rules, Conn("new"), clean=False, expiry=60)
    assert not any(isinstance(a, PublishWill) for a in actions)
    assert StartTimer(Timer.WILL, "c", 5.0) in actions and CancelTimer(Timer.WILL, "c") in actions


def test_disconnect_may_change_the_expiry_but_not_from_zero():
    rules = SessionRules(session_expiry_max_s=1000)
    connect(rules, Conn("1"), expiry=0)
    with pytest.raises(ProtocolError, match="Session Expiry"):
        rules.disconnect_received("c", 30)
    connect(rules, Conn("2"), "d", expiry=30)
    rules.disconnect_received("d", 5000)
    assert rules.sessions["d"].expiry_interval == 1000


def test_restored_sessions_expire_from_when_they_were_disconnected():
    rules = SessionRules()
    session = Session("c", expiry_interval=60, disconnected_at_ms=NOW - 45_000)
    assert rules.restore(session, NOW) == [StartTimer(Timer.EXPIRY, "c", 15.0)]
    assert rules.state("c") is SessionState.DISCONNECTED
    with pytest.raises(SessionRuleError, match="restore is not a legal move from DISCONNECTED"):
        rules.restore(Session("c", expiry_interval=60), NOW)


def test_qos2_resends_are_recognised_and_releases_end_the_flow():
    rules = SessionRules()
    connect(rules, Conn("1"), clean=False, expiry=60)
    assert rules.inbound_qos2("c", 7, duplicate=False, digest=lambda: "d1", recorded=None) is False
    rules.inbound_stored("c", 7)
    # A resend before the PUBREL, DUP or not: PUBREC again, not stored twice.
    assert rules.inbound_qos2("c", 7, duplicate=True, digest=lambda: "d1", recorded=None) is True
    assert rules.release("c", 7, recorded=False) is True
    assert rules.release("c", 7, recorded=False) is False  # no such flow any more: PUBCOMP 0x92
    # After a restart the durable record decides: DUP and the same digest is a resend, anything else is new.
    assert rules.inbound_qos2("c", 8, duplicate=True, digest=lambda: "d2", recorded="d2") is True
    assert rules.inbound_qos2("c", 9, duplicate=False, digest=lambda: "d3", recorded="d3") is False
    assert rules.inbound_qos2("c", 10, duplicate=True, digest=lambda: "new", recorded="old") is False
    assert rules.release("c", 11, recorded=True) is True


def test_every_transition_the_rules_make_is_in_the_table():
    rules = SessionRules()
    seen = []
    real_move = rules._move

    def move(client_id, kind):
        before = rules.state(client_id)
        real_move(client_id, kind)
        seen.append((before, kind))

    rules._move = move  # type: ignore[method-assign]
    one, two = Conn("1"), Conn("2")
    connect(rules, one, clean=False, expiry=60)
    connect(rules, two, clean=False, expiry=60)
    rules.connection_lost(two, "c", False, NOW)
    connect(rules, Conn("3"), clean=False, expiry=60)
    rules.connection_lost(rules.connection("c"), "c", False, NOW)
    rules.timer_fired(Timer.EXPIRY, "c", NOW)
    rules.restore(Session("r", expiry_interval=5), NOW)
    rules.taken_elsewhere("r", NOW)
    connect(rules, Conn("4"), "m", clean=False, expiry=60)
    rules.taken_elsewhere("m", NOW)
    assert set(seen) == set(TRANSITIONS)


def test_a_session_taken_over_on_another_node_leaves_this_one():
    # Connected here, persistent: its connection is closed as by a takeover, and the session moves (nothing ended).
    rules = SessionRules()
    conn = Conn("1")
    connect(rules, conn, clean=False, expiry=60, will=will(delay=30))
    actions = rules.taken_elsewhere("c", NOW)
    assert kinds(actions) == ["CloseTakenOver", "Detach", "StartTimer", "CancelTimer", "CancelTimer", "MoveSession"]
    assert rules.state("c") is None and not rules.will_pending("c")  # connected again elsewhere in time: no will
    # A clean session ends here (its will, without delay, goes as on a takeover).
    connect(rules, Conn("2"), "d", will=will())
    actions = rules.taken_elsewhere("d", NOW)
    assert kinds(actions) == ["CloseTakenOver", "Detach", "PublishWill", "CancelTimer", "EndSession"]
    assert not any(isinstance(action, MoveSession) for action in actions)
    # Disconnected and waiting here: it moves; a session it does not have is nothing to it.
    connect(rules, conn, "e", clean=False, expiry=60)
    rules.connection_lost(conn, "e", False, NOW)
    assert kinds(rules.taken_elsewhere("e", NOW)) == ["CancelTimer", "MoveSession"]
    assert rules.taken_elsewhere("nobody", NOW) == []


def test_actions_name_the_connection_they_are_for():
    rules = SessionRules()
    conn = Conn("1")
    actions = connect(rules, conn)
    for action in actions:
        if isinstance(action, Attach | Accept | Resend | StartDelivery):
            assert action.connection is conn


def subscribe_packet(*options: tuple[str, int, dict], subscription_id: int | None = None) -> mqtt5.SubscribePacket:
    """A SUBSCRIBE as the codec hands it over. mqtt5.TopicFilter refuses to build an invalid filter ('a/#/b') that
    its decoder does hand over (codec_v5.py), so such options are plain records of the same fields."""
    filters = []
    for pattern, qos, extra in options:
        try:
            filters.append(mqtt5.TopicFilter(pattern, max_qos=mqtt5.QoS(qos), **extra))
        except ValueError:
            fields = {"no_local": False, "retain_as_published": False, "retain_handling": 0, **extra}
            filters.append(SimpleNamespace(pattern=pattern, max_qos=qos, **fields))
    return SimpleNamespace(packet_id=1, topic_filters=filters, subscription_id=subscription_id)  # type: ignore[return-value]


def test_subscribe_plans_codes_and_changes_nothing_until_applied():
    rules = SessionRules()
    connect(rules, Conn("1"))
    packet = subscribe_packet(("a/+", 1, {}), ("a/#/b", 0, {}), ("secret/#", 2, {}), ("$share/g/x", 2, {}))
    plan = rules.plan_subscribe("c", packet, 5, allowed=lambda pattern: not pattern.startswith("secret"))
    assert [int(code) for code in plan.codes] == [1, 0x8F, 0x87, 2]
    assert [reason for _, reason in plan.refusals][1] == "refused by the ACL"
    assert rules.sessions["c"].subscriptions == {}  # planned, not made
    retained = rules.subscribed("c", plan)
    assert set(rules.sessions["c"].subscriptions) == {"a/+", "$share/g/x"}
    assert [sub.topic_filter for sub in retained] == ["a/+"]  # never for a shared subscription


def test_a_refused_record_turns_the_plan_into_failures():
    rules = SessionRules()
    connect(rules, Conn("1"), clean=False, expiry=60)
    plan = rules.plan_subscribe("c", subscribe_packet(("a", 1, {}), ("b", 0, {})), 5, allowed=lambda _: True)
    plan.refused()
    assert [int(code) for code in plan.codes] == [0x80, 0x80]
    assert rules.subscribed("c", plan) == [] and rules.sessions["c"].subscriptions == {}


def test_retain_handling_decides_which_subscriptions_get_retained_messages():
    rules = SessionRules()
    connect(rules, Conn("1"))
    handling = [{"retain_handling": mqtt5.RetainHandling(value)} for value in (0, 1, 2)]
    packet = subscribe_packet(("h0", 1, handling[0]), ("h1", 1, handling[1]), ("h2", 1, handling[2]))
    first = rules.plan_subscribe("c", packet, 5, allowed=lambda _: True)
    assert [sub.topic_filter for sub in rules.subscribed("c", first)] == ["h0", "h1"]
    queue = rules.sessions["c"].subscriptions["h1"].queue
    again = rules.plan_subscribe(
        "c", subscribe_packet(("h0", 0, {}), ("h1", 2, {"retain_handling": mqtt5.RetainHandling(1)})), 5,
        allowed=lambda _: True)  # fmt: skip
    # A subscription that exists is replaced (same light queue); with retain handling 1 it gets none again.
    assert [sub.topic_filter for sub in rules.subscribed("c", again)] == ["h0"]
    assert rules.sessions["c"].subscriptions["h1"].queue == queue and rules.sessions["c"].subscriptions["h1"].qos == 2


def test_subscribe_errors_that_end_the_connection():
    rules = SessionRules()
    connect(rules, Conn("1"))
    with pytest.raises(ProtocolError, match="SUBSCRIBE"):
        rules.plan_subscribe("c", subscribe_packet(("a/#/b", 0, {})), 4, allowed=lambda _: True)  # 3.1.1: no 0x8F
    with pytest.raises(ProtocolError, match="no-local on a shared"):
        rules.plan_subscribe("c", subscribe_packet(("$share/g/a", 0, {"no_local": True})), 5, allowed=lambda _: True)


def test_outbound_qos2_flows_resend_the_pubrel_once_received_and_end_when_acknowledged():
    rules = SessionRules()
    first = Conn("1")
    connect(rules, first, clean=False, expiry=60)
    session = rules.sessions["c"]
    session.sent(3, Outgoing(MqttMessage("a", b"x", 2, False), 2, False, [], [("q", 0)]))
    rules.received("c", 3)
    assert session.inflight[3].released  # a reconnect resends the PUBREL, not the PUBLISH
    rules.connection_lost(first, "c", False, NOW)
    resumed = connect(rules, Conn("2"), clean=False, expiry=60)
    resend = next(action for action in resumed if isinstance(action, Resend))
    assert resend.session.inflight[3].released
    outgoing = rules.acknowledged("c", 3)
    assert outgoing is not None and outgoing.positions == [("q", 0)] and not session.inflight
    assert rules.acknowledged("c", 3) is None  # a duplicate PUBCOMP
    rules.received("c", 99)  # an unknown PUBREC changes nothing
    assert not session.inflight
