"""Routing at put time: each event put on a bus is matched once against one compiled machine holding all of the
bus's enabled rules (matcher.Matcher, aws/event-ruler's design: the cost follows the event, not the rule count),
and stored once with a consume-queue entry in the delivery queue of every target of every rule it matched.

A target's delivery queue is a light queue of the core (`%LMQ%eb|<bus>|<rule>|<target>`, `target_queue`): the
store writes the event once and an entry per matching target, in the same append, so routing is exactly once by
construction (no reader to crash between reading the bus and writing the queues), and a slow target's backlog is
entries in the store, not memory. Each target reads its own queue with its own committed offset.

The router is a send hook (core.Broker.add_send_hook): it sees every message sent to a bus topic, whoever sends it
(PutEvents, event sources, replays, redrives, a core producer). An event put through EventBuses.put comes with its
message, as it was put (bus.event_being_put), and is not decoded again; another message's body is decoded here,
once. A copy restricted to one rule or one target of it (EB_ONLY_RULE / EB_ONLY_TARGET: replays, redrives and
scheduled rules' events) goes to those targets' queues only, unmatched and unread. A rule with only a schedule has
no pattern: it is in no machine and gets only such copies. A message that is not an event (not a JSON object with
an id) goes nowhere; it stays in the bus topic.

Rules change by `update`, which builds the new machines and then swaps them in whole: a message is routed by the
rules before or after a change, never by half of each; the targets' queues and positions are untouched.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from core import LIGHT_QUEUE_PREFIX, MAX_TOPIC_LENGTH, Broker, Message
from eventbridge.bus import (
    PROPERTY_ONLY_RULE,
    PROPERTY_ONLY_TARGET,
    BusError,
    bus_topic,
    decode_event,
    event_being_put,
)
from eventbridge.patterns.matcher import Matcher
from eventbridge.rules.model import Rule

log = logging.getLogger(__name__)

TARGET_QUEUE_PREFIX = LIGHT_QUEUE_PREFIX + "eb|"
# The core's sys_flag bit of a compressed body (a core producer compresses bodies over 4 KiB).
_COMPRESSED = 0x1
_HASH_HEX = 16


def target_name(bus: str, rule: str, target: str) -> str:
    """`<bus>|<rule>|<target>` in the characters core names take ('.' of rule and target names becomes '%'; neither
    name can hold '%' itself, so no two targets share a name)."""
    return "|".join((bus, rule.replace(".", "%"), target.replace(".", "%")))


def target_queue(bus: str, rule: str, target: str) -> str:
    """The light queue a target's events are routed to. A name too long for the core (a topic holds 127
    characters; three names hold up to 64 each) keeps its head and ends in a hash of the whole."""
    name = TARGET_QUEUE_PREFIX + target_name(bus, rule, target)
    if len(name) <= MAX_TOPIC_LENGTH:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_HEX]
    return name[: MAX_TOPIC_LENGTH - _HASH_HEX - 1] + "|" + digest


@dataclass(frozen=True, slots=True)
class _BusRoutes:
    matcher: Matcher[str]
    queues: dict[str, tuple[str, ...]]  # rule name -> its targets' queues
    by_target: dict[tuple[str, str], str]  # (rule name, target id) -> queue


class EventRouter:
    def __init__(self) -> None:
        self._routes: dict[str, _BusRoutes] = {}  # by bus topic
        self.routed = 0
        self.unroutable = 0

    @classmethod
    def of(cls, broker: Broker) -> EventRouter:
        """The broker's router, its send hook installed on first use: one per broker, however many runtimes are
        started on it one after another (a hook cannot be taken back, and two routers would route twice)."""

        def make() -> EventRouter:
            router = cls()
            broker.add_send_hook(router.hook)
            return router

        return broker.shared(cls, make)

    def update(self, rules: Iterable[Rule]) -> None:
        """Route by these rules from now on (the enabled ones with targets)."""
        by_bus: dict[str, list[Rule]] = {}
        for rule in rules:
            if rule.enabled and rule.targets:
                by_bus.setdefault(rule.bus, []).append(rule)
        routes = {}
        for bus, bus_rules in by_bus.items():
            queues = {rule.name: tuple(target_queue(bus, rule.name, t.id) for t in rule.targets) for rule in bus_rules}
            by_target = {
                (rule.name, target.id): target_queue(bus, rule.name, target.id)
                for rule in bus_rules
                for target in rule.targets
            }
            # A rule without a pattern (only a schedule) is matched by no event; its queues stay routable, for the
            # copies restricted to it (its schedule's events, replays, redrives).
            matcher = Matcher([(rule.name, rule.pattern.value) for rule in bus_rules if rule.pattern is not None])
            routes[bus_topic(bus)] = _BusRoutes(matcher, queues, by_target)
        self._routes = routes

    def queues_of(self, bus: str) -> set[str]:
        routes = self._routes.get(bus_topic(bus))
        return set(routes.by_target.values()) if routes is not None else set()

    def hook(self, message: Message) -> list[str] | tuple[str, ...] | None:
        """The send hook: the delivery queues of the targets `message` (sent to a bus topic) goes to."""
        routes = self._routes.get(message.topic)
        if routes is None:
            return None
        properties = message.properties
        only_rule = properties.get(PROPERTY_ONLY_RULE)
        if only_rule is not None:
            return self._only(routes, message.topic, only_rule, properties.get(PROPERTY_ONLY_TARGET))
        event = event_being_put(message)
        if event is None:  # sent otherwise than by EventBuses.put (a core producer): decoded here, once
            body = message.body
            if message.sys_flag & _COMPRESSED:
                body = zlib.decompress(body)
            try:
                event = decode_event(body)
            except BusError as exc:
                self.unroutable += 1
                log.warning("bus topic %r: a message that is not an event goes to no target: %s", message.topic, exc)
                return None
        matched = routes.matcher.matches(event)
        if not matched:
            return None
        self.routed += 1
        if len(matched) == 1:
            return routes.queues[next(iter(matched))]
        found: list[str] = []
        for rule in matched:
            found += routes.queues[rule]
        return found

    @staticmethod
    def _only(routes: _BusRoutes, topic: str, only_rule: str, only_target: str | None) -> tuple[str, ...]:
        bus_name, _, rule = only_rule.partition("/")
        if bus_topic(bus_name) != topic:
            return ()
        if only_target is None:
            return routes.queues.get(rule, ())
        queue = routes.by_target.get((rule, only_target))
        return (queue,) if queue is not None else ()
