"""MQTT's session rules as a pure object (after h11's Connection): events in, actions out. No I/O, no clock, no store.

`SessionRules` knows every session by client id and which connection holds it. The gateway tells it what happened
(`connect`, `connection_lost`, `disconnect_received`, `timer_fired`, `plan_subscribe`/`subscribed`, `inbound_qos2`,
`inbound_stored`, `release`, `acknowledged`, `received`) and carries out what it returns, in order: accept or
refuse the CONNECT, close a connection that is taken over, attach a connection to its session's queues or detach
it, resend what was in flight, store or end a session, publish a will, start and cancel timers, make subscriptions
(only once a persistent session's record with them is stored) and send retained messages for them.

The rest of the session's rules are pure as well: delivery planning (overlapping subscriptions at the highest
granted QoS, no-local, retain-as-published, subscription identifiers) and the outbound QoS 1/2 flows with their
positions are Session's (session.py); the inflight window, packet ids and the client's Receive Maximum are the
connection's (protocol.py); shared subscriptions are SharedGroup's (shared_group.py); refusals of a PUBLISH are
publish_refusal.py's.

A session is in one of three states, and `TRANSITIONS` is every legal move between them; a move not in it is a bug
and raises `SessionRuleError` (the gateway drops that client with an internal error):

    (none)        --connect-->            CONNECTED
    (none)        --restore-->            DISCONNECTED    a persistent session read back when the gateway starts
    CONNECTED     --connect (takeover)--> CONNECTED       old connection closed with 0x8E, will rules below
    CONNECTED     --connection lost-->    DISCONNECTED    if the session expiry interval > 0 (kept, expiry timer)
    CONNECTED     --connection lost-->    ENDED           if it is 0
    DISCONNECTED  --connect-->            CONNECTED       session present unless clean start (then a new one)
    DISCONNECTED  --expiry timer-->       ENDED           subscriptions, positions, QoS 2 records deleted
    CONNECTED     --taken elsewhere-->    MOVED           on a cluster: its client connected to another node;
    DISCONNECTED  --taken elsewhere-->    MOVED             closed with 0x8E (will rules as a takeover), a
                                                            persistent session goes to that node with its positions
                                                            (nothing deleted), another ends

Wills ([MQTT-3.1.2-8], MQTT 5 3.1.3.2.2): published when the connection ends without a DISCONNECT (or with reason
0x04), after the Will Delay Interval (MQTT 5) or the session's end, whichever comes first; not published if a new
connection takes the session over before the delay ran out; never after a normal DISCONNECT.

Inbound QoS 2 ([MQTT-4.3.3]): a PUBLISH whose packet id the session awaits a PUBREL for is a resend: answered with
PUBREC again and not stored twice. After a broker restart the gateway's durable records stand in (a resend there
carries DUP and the same topic and payload). A PUBREL ends the flow; one the session did not await is answered
with PUBCOMP 0x92 (MQTT 5).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

import mqtt5

from mqtt_bridge.errors import MqttBridgeError, ProtocolError
from mqtt_bridge.sessions.session import NEVER_EXPIRES, Outgoing, Session, Subscription
from mqtt_bridge.topics.topic import TopicError, parse_subscription


class SessionState(enum.Enum):
    CONNECTED = "CONNECTED"
    DISCONNECTED = "DISCONNECTED"
    ENDED = "ENDED"
    MOVED = "MOVED"


class Move(enum.Enum):
    CONNECT = "connect"
    TAKEOVER = "connect (takeover)"
    CONNECTION_LOST = "connection lost"
    EXPIRED = "expiry timer"
    RESTORE = "restore"
    TAKEN_ELSEWHERE = "taken elsewhere"


# Every legal transition: (state before, or None for no session; move) -> states after (which one depends on the
# session's settings, said in the module docstring).
TRANSITIONS: dict[tuple[SessionState | None, Move], frozenset[SessionState]] = {
    (None, Move.CONNECT): frozenset({SessionState.CONNECTED}),
    (None, Move.RESTORE): frozenset({SessionState.DISCONNECTED}),
    (SessionState.CONNECTED, Move.TAKEOVER): frozenset({SessionState.CONNECTED}),
    (SessionState.CONNECTED, Move.CONNECTION_LOST): frozenset({SessionState.DISCONNECTED, SessionState.ENDED}),
    (SessionState.DISCONNECTED, Move.CONNECT): frozenset({SessionState.CONNECTED}),
    (SessionState.DISCONNECTED, Move.EXPIRED): frozenset({SessionState.ENDED}),
    (SessionState.CONNECTED, Move.TAKEN_ELSEWHERE): frozenset({SessionState.MOVED, SessionState.ENDED}),
    (SessionState.DISCONNECTED, Move.TAKEN_ELSEWHERE): frozenset({SessionState.MOVED}),
}


class SessionRuleError(MqttBridgeError, RuntimeError):
    """A move TRANSITIONS does not allow: a bug in the caller, not the client's fault."""


class Timer(enum.Enum):
    EXPIRY = "session expiry"
    WILL = "will delay"


# --- actions: what the gateway carries out, in the order given ---------------------------------------------


@dataclass(slots=True, frozen=True)
class Accept:
    """CONNACK success. `assigned_client_id` / `session_expiry`: MQTT 5 CONNACK properties to set (None: absent)."""

    connection: object
    session: Session
    session_present: bool
    assigned_client_id: str | None = None
    session_expiry: int | None = None


@dataclass(slots=True, frozen=True)
class Refuse:
    connection: object
    reason: mqtt5.ConnAckReasonCode


@dataclass(slots=True, frozen=True)
class CloseTakenOver:
    """Close a connection whose session a new connection took over (MQTT 5: DISCONNECT 0x8E)."""

    connection: object


@dataclass(slots=True, frozen=True)
class Attach:
    """The connection now holds the session: it reads the session's queues."""

    connection: object
    session: Session


@dataclass(slots=True, frozen=True)
class Detach:
    """The connection no longer holds the session: it stops reading; what it took of shared subscriptions goes
    back to the group."""

    connection: object
    session: Session


@dataclass(slots=True, frozen=True)
class Resend:
    """Send again what was in flight when the session's last connection went, with DUP and the same packet ids."""

    connection: object
    session: Session


@dataclass(slots=True, frozen=True)
class StartDelivery:
    connection: object


@dataclass(slots=True, frozen=True)
class CommitPositions:
    """Write the session's read positions as core consumer offsets (a persistent session that disconnects)."""

    session: Session


@dataclass(slots=True, frozen=True)
class StoreSession:
    session: Session


@dataclass(slots=True, frozen=True)
class MoveSession:
    """The session went to another node: commit its positions and let go of what it holds here, deleting nothing
    (its positions and record are the other node's now)."""

    session: Session


@dataclass(slots=True, frozen=True)
class EndSession:
    """Delete the session and all it holds: subscriptions, positions, QoS 2 records, its stored record."""

    session: Session


@dataclass(slots=True, frozen=True)
class PublishWill:
    client_id: str
    will: mqtt5.Will
    username: str | None


@dataclass(slots=True, frozen=True)
class StartTimer:
    timer: Timer
    client_id: str
    delay_s: float


@dataclass(slots=True, frozen=True)
class CancelTimer:
    timer: Timer
    client_id: str


Action = (
    Accept
    | Refuse
    | CloseTakenOver
    | Attach
    | Detach
    | Resend
    | StartDelivery
    | CommitPositions
    | StoreSession
    | EndSession
    | MoveSession
    | PublishWill
    | StartTimer
    | CancelTimer
)


@dataclass(slots=True)
class SubscribePlan:
    """What a SUBSCRIBE makes: a SUBACK code per filter, and the subscriptions to make (with the one each replaces,
    and the index of its code). Nothing is changed until `SessionRules.subscribed` applies it, once the session's
    record (for a persistent session) is stored; if it is not, `refused` turns the codes into failures."""

    codes: list[mqtt5.SubAckReasonCode]
    made: list[tuple[Subscription, Subscription | None, int]] = field(default_factory=list)
    # Filters refused, for the log: (filter, why).
    refusals: list[tuple[str, str]] = field(default_factory=list)

    def refused(self) -> None:
        for _, _, index in self.made:
            self.codes[index] = mqtt5.SubAckReasonCode.UNSPECIFIED_ERROR
        self.made = []


@dataclass(slots=True)
class _Holder:
    """Who holds a connected session, and what its will needs."""

    connection: object
    version: int
    username: str | None


class SessionRules:
    def __init__(self, session_expiry_max_s: int = NEVER_EXPIRES) -> None:
        self.session_expiry_max_s = session_expiry_max_s
        self.sessions: dict[str, Session] = {}
        self._holders: dict[str, _Holder] = {}
        # Wills waiting for their delay: client id -> (will, username).
        self._delayed_wills: dict[str, tuple[mqtt5.Will, str | None]] = {}

    # --- queries --------------------------------------------------------------------------------------------

    def state(self, client_id: str) -> SessionState | None:
        session = self.sessions.get(client_id)
        if session is None:
            return None
        return SessionState.CONNECTED if client_id in self._holders else SessionState.DISCONNECTED

    def connection(self, client_id: str) -> object | None:
        holder = self._holders.get(client_id)
        return holder.connection if holder is not None else None

    def holds(self, connection: object, client_id: str) -> bool:
        holder = self._holders.get(client_id)
        return holder is not None and holder.connection is connection

    def will_pending(self, client_id: str) -> bool:
        return client_id in self._delayed_wills

    # --- events ---------------------------------------------------------------------------------------------

    def restore(self, session: Session, now_ms: int) -> list[Action]:
        """A persistent session read back at start: disconnected since its record says (or now)."""
        self._move(session.client_id, Move.RESTORE)
        self.sessions[session.client_id] = session
        session.connected = False
        if session.disconnected_at_ms is None:
            session.disconnected_at_ms = now_ms
        return self._expiry_timer(session, now_ms)

    def connect(
        self,
        connection: object,
        client_id: str,
        *,
        version: int,
        clean_start: bool,
        session_expiry: int,
        will: mqtt5.Will | None,
        username: str | None,
        assigned: bool = False,
        now_ms: int,
    ) -> list[Action]:
        """An authenticated CONNECT. `client_id` is the client's, or one the gateway assigned (`assigned`);
        `session_expiry` is what the CONNECT asked (MQTT 5), ignored for 3.1.1 (clean session decides)."""
        actions: list[Action] = []
        asked = session_expiry
        expiry = (0 if clean_start else NEVER_EXPIRES) if version == 4 else session_expiry
        expiry = min(expiry, self.session_expiry_max_s)
        holder = self._holders.get(client_id)
        if holder is not None:
            # Session takeover ([MQTT-3.1.4-3]): the older connection goes; its will follows the will rules (a
            # delayed one is cancelled just below, as the session lives on).
            self._move(client_id, Move.TAKEOVER)
            actions.append(CloseTakenOver(holder.connection))
            actions += self._lose(holder, client_id, publish_will=True, now_ms=now_ms, taken_over=True)
        else:
            self._move(client_id, Move.CONNECT)
        if client_id in self._delayed_wills:
            # MQTT 5 3.1.3.2.2: a new connection before the Will Delay ran out: the will is not published.
            del self._delayed_wills[client_id]
            actions.append(CancelTimer(Timer.WILL, client_id))
        session = self.sessions.get(client_id)
        present = session is not None and not clean_start
        if session is not None and clean_start:
            actions += self._end(session)
            session = None
        if session is None:
            session = Session(client_id)
            self.sessions[client_id] = session
        actions.append(CancelTimer(Timer.EXPIRY, client_id))
        was_persistent = session.persistent
        session.expiry_interval = expiry
        session.will = will
        session.connected = True
        session.disconnected_at_ms = None
        self._holders[client_id] = _Holder(connection, version, username)
        if session.persistent or was_persistent:
            actions.append(StoreSession(session))
        actions.append(Attach(connection, session))
        actions.append(
            Accept(
                connection,
                session,
                present,
                client_id if assigned else None,
                expiry if version == 5 and expiry != asked else None,
            )
        )
        actions.append(Resend(connection, session))
        actions.append(StartDelivery(connection))
        return actions

    def taken_elsewhere(self, client_id: str, now_ms: int) -> list[Action]:
        """On a cluster, the client connected to another node, which takes the session over: a connection here is
        closed as by a takeover, a will delay running here is cancelled (a new connection came in time), and the
        session leaves this node (MoveSession: positions committed, nothing deleted)."""
        session = self.sessions.get(client_id)
        if session is None:
            return []
        self._move(client_id, Move.TAKEN_ELSEWHERE)
        actions: list[Action] = []
        holder = self._holders.get(client_id)
        if holder is not None:
            actions.append(CloseTakenOver(holder.connection))
            actions += self._lose(holder, client_id, publish_will=True, now_ms=now_ms, taken_over=True)
        if self._delayed_wills.pop(client_id, None) is not None:
            actions.append(CancelTimer(Timer.WILL, client_id))
        actions.append(CancelTimer(Timer.EXPIRY, client_id))
        if not session.persistent:
            return actions + self._end(session)  # nothing outlives its connection: nothing moves
        del self.sessions[client_id]
        return [*actions, MoveSession(session)]

    def refuse(self, connection: object, reason: mqtt5.ConnAckReasonCode) -> list[Action]:
        return [Refuse(connection, reason)]

    def disconnect_received(self, client_id: str, session_expiry: int | None) -> None:
        """A DISCONNECT from the client, before its connection is lost: it may change the Session Expiry Interval,
        but not from 0 to more ([MQTT-3.14.2-2], a protocol error)."""
        session = self.sessions.get(client_id)
        if session is None or session_expiry is None:
            return
        if session.expiry_interval == 0 and session_expiry > 0:
            raise ProtocolError("DISCONNECT: Session Expiry set after CONNECT said 0")
        session.expiry_interval = min(session_expiry, self.session_expiry_max_s)

    def connection_lost(self, connection: object, client_id: str, publish_will: bool, now_ms: int) -> list[Action]:
        """The connection ended (DISCONNECT, protocol error, keepalive, transport). `publish_will`: not a normal
        DISCONNECT. Nothing happens for a connection that does not hold its session (taken over already)."""
        holder = self._holders.get(client_id)
        if holder is None or holder.connection is not connection:
            return []
        self._move(client_id, Move.CONNECTION_LOST)
        return self._lose(holder, client_id, publish_will, now_ms, taken_over=False)

    def timer_fired(self, timer: Timer, client_id: str, now_ms: int) -> list[Action]:
        if timer is Timer.WILL:
            will = self._delayed_wills.pop(client_id, None)
            return [PublishWill(client_id, *will)] if will is not None else []
        session = self.sessions.get(client_id)
        if session is None or session.connected:
            return []
        self._move(client_id, Move.EXPIRED)
        return self._end(session)

    def inbound_qos2(
        self, client_id: str, packet_id: int, duplicate: bool, digest: Callable[[], str], recorded: str | None
    ) -> bool:
        """True if this QoS 2 PUBLISH is a resend of one stored and PUBREC'd (answer PUBREC, store nothing).
        `digest`: gives the digest of its topic and payload (asked for only when a record could match);
        `recorded`: the durable record's digest for this packet id, if any."""
        session = self.sessions[client_id]
        if packet_id in session.awaiting_release:
            return True
        # After a broker restart only the durable record knows: a resend has DUP set and the same topic and
        # payload; a new publish reusing a completed packet id has DUP clear, or differs.
        if duplicate and recorded is not None and recorded == digest():
            session.awaiting_release.add(packet_id)
            return True
        return False

    def inbound_stored(self, client_id: str, packet_id: int) -> None:
        """A QoS 2 PUBLISH was stored: PUBREC goes out and the session awaits the PUBREL."""
        self.sessions[client_id].awaiting_release.add(packet_id)

    def release(self, client_id: str, packet_id: int, recorded: bool) -> bool:
        """The client's PUBREL: True if the flow was awaited (PUBCOMP success), False for 0x92. `recorded`: a durable
        record of the publish exists (stored before a restart)."""
        session = self.sessions.get(client_id)
        known = recorded
        if session is not None and packet_id in session.awaiting_release:
            session.awaiting_release.discard(packet_id)
            known = True
        return known

    def plan_subscribe(
        self, client_id: str, packet: mqtt5.SubscribePacket, version: int, allowed: Callable[[str], bool]
    ) -> SubscribePlan:
        """A SUBSCRIBE, checked filter by filter (`allowed`: the ACL's answer for a filter). Raises ProtocolError
        for what ends the connection: an invalid filter in 3.1.1 (MQTT 5: SUBACK 0x8F), no-local on a shared
        subscription ([MQTT-3.8.3-4]), a QoS above 2."""
        session = self.sessions[client_id]
        plan = SubscribePlan([])
        for option in packet.topic_filters:
            try:
                shared = parse_subscription(option.pattern)
            except TopicError as exc:
                if version == 4:
                    raise ProtocolError(f"SUBSCRIBE: {exc}") from None
                plan.refusals.append((option.pattern, str(exc)))
                plan.codes.append(mqtt5.SubAckReasonCode.TOPIC_FILTER_INVALID)
                continue
            if shared.group is not None and option.no_local and version == 5:
                raise ProtocolError("SUBSCRIBE: no-local on a shared subscription (MQTT 5 3.8.3.1)")
            if not allowed(option.pattern):
                plan.refusals.append((option.pattern, "refused by the ACL"))
                plan.codes.append(mqtt5.SubAckReasonCode.NOT_AUTHORIZED)
                continue
            sub = Subscription.from_packet(option, shared.group, shared.filter, packet.subscription_id)
            if sub.qos > 2:
                raise ProtocolError(f"SUBSCRIBE: QoS {sub.qos}")
            old = session.subscriptions.get(sub.key)
            if old is not None:
                sub.queue = old.queue  # the same filter: the same light queue, the same position
            plan.made.append((sub, old, len(plan.codes)))
            plan.codes.append(mqtt5.SubAckReasonCode(sub.qos))
        return plan

    def subscribed(self, client_id: str, plan: SubscribePlan) -> list[Subscription]:
        """Make the planned subscriptions; returns those that get the retained messages of their filter now: retain
        handling 0, or 1 for a new subscription (MQTT 5 3.8.3.1), never a shared one (MQTT 5 4.8.2)."""
        session = self.sessions[client_id]
        retained = []
        for sub, old, _ in plan.made:
            session.subscriptions[sub.key] = sub
            if sub.share_group is not None or sub.retain_handling == 2:
                continue
            if sub.retain_handling == 1 and old is not None:
                continue
            retained.append(sub)
        return retained

    def acknowledged(self, client_id: str, packet_id: int) -> Outgoing | None:
        """The client's PUBACK (QoS 1) or PUBCOMP (QoS 2) for an outbound publish: the flow ends and its packet id is
        free. Returns what it stood for (its light-queue positions move on), None for an id not in flight (a
        duplicate acknowledgement after a resend)."""
        session = self.sessions.get(client_id)
        return session.acknowledged(packet_id) if session is not None else None

    def received(self, client_id: str, packet_id: int) -> None:
        """The client's PUBREC for an outbound QoS 2 publish: from now on the PUBREL is what a reconnect resends
        (MQTT 4.4), not the PUBLISH."""
        session = self.sessions.get(client_id)
        outgoing = session.inflight.get(packet_id) if session is not None else None
        if outgoing is not None:
            outgoing.released = True

    # --- rules shared by the events -------------------------------------------------------------------------

    def _lose(self, holder: _Holder, client_id: str, publish_will: bool, now_ms: int, taken_over: bool) -> list[Action]:
        session = self.sessions[client_id]
        del self._holders[client_id]
        session.connected = False
        session.disconnected_at_ms = now_ms
        actions: list[Action] = [Detach(holder.connection, session)]
        will, session.will = session.will, None
        if will is not None and publish_will:
            delay = min(will.will_delay_interval, session.expiry_interval) if holder.version == 5 else 0
            if delay > 0:
                self._delayed_wills[client_id] = (will, holder.username)
                actions.append(StartTimer(Timer.WILL, client_id, float(delay)))
            else:
                actions.append(PublishWill(client_id, will, holder.username))
        if taken_over:
            return actions  # the session goes on with the new connection (or is ended by its clean start)
        if session.persistent:
            actions.append(CommitPositions(session))
            actions.append(StoreSession(session))
            actions += self._expiry_timer(session, now_ms)
        else:
            actions += self._end(session)
        return actions

    def _expiry_timer(self, session: Session, now_ms: int) -> list[Action]:
        if session.expiry_interval >= NEVER_EXPIRES:
            return []
        since = (now_ms - (session.disconnected_at_ms or now_ms)) / 1000
        return [StartTimer(Timer.EXPIRY, session.client_id, max(0.0, session.expiry_interval - since))]

    def _end(self, session: Session) -> list[Action]:
        client_id = session.client_id
        if self.sessions.get(client_id) is session:
            del self.sessions[client_id]
        actions: list[Action] = [EndSession(session)]
        if client_id in self._delayed_wills and client_id not in self._holders:
            # MQTT 5 3.1.3.2.2: the will goes when the session ends, if its delay has not run out before.
            will, username = self._delayed_wills.pop(client_id)
            actions += [CancelTimer(Timer.WILL, client_id), PublishWill(client_id, will, username)]
        return actions

    def _move(self, client_id: str, move: Move) -> None:
        before = self.state(client_id)
        if (before, move) not in TRANSITIONS:
            state = before.value if before is not None else "no session"
            raise SessionRuleError(f"session {client_id!r}: {move.value} is not a legal move from {state}")
