"""Routing at put time (eventbridge/router.py), on a real broker: each event put on a bus gets an entry in the
delivery queue of exactly the targets whose rule matches it (checked against the plain reference evaluator, with
many rules), once; copies for one rule or target go there only; a rule change applies to events put after it."""

from __future__ import annotations

import itertools
import random
from contextlib import AbstractContextManager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import Broker, Message, PullStatus
from eventbridge.bus import EventBuses, OnlyFor, bus_topic, decode_event, encode_event
from eventbridge.router import EventRouter, target_queue
from eventbridge.rules.rule_file import parse_rule_file
from tests.core.conftest import make_broker  # noqa: F401
from tests.eventbridge.observe import calls_of
from tests.eventbridge.patterns.pattern_reference import reference_matches
from tests.eventbridge.patterns.test_property import events, patterns

EXAMPLES = itertools.count()


def rules_text(rule_patterns: list[dict[str, Any]], targets: int = 2) -> str:
    import json

    lines = ["rules:"]
    for n, pattern in enumerate(rule_patterns):
        lines += [f"  - name: r{n}", f"    pattern: {json.dumps(pattern)}", "    targets:"]
        lines += [f"      - {{id: t{k}, type: http, url: 'http://x/'}}" for k in range(targets)]
    return "\n".join(lines) + "\n"


async def queue_ids(broker: Broker, queue: str) -> list[str]:
    """The event ids in a delivery queue, in order."""
    import json

    await broker.wait_visible()
    ids, offset = [], 0
    while True:
        got = await broker.pull("audit", queue, 0, offset, 256)
        if got.status is not PullStatus.FOUND:
            return ids
        ids += [json.loads(message.body)["id"] for message in got.messages]
        offset = got.next_begin_offset


async def routed_broker(make_broker, text: str, directory=None) -> tuple[Broker, EventRouter, EventBuses]:  # noqa: F811
    broker: Broker = await make_broker(directory)
    router = EventRouter()
    router.update(parse_rule_file("r.yaml", text))
    broker.add_send_hook(router.hook)
    buses = EventBuses(broker)
    buses.create("default")
    return broker, router, buses


def test_queue_names_are_core_names_and_distinct():
    long = "x" * 64
    names = {target_queue("b", "r.1", "t"), target_queue("b", "r", "1.t"), target_queue(long, long, long),
             target_queue(long, long, long[:-1] + "y")}  # fmt: skip
    assert len(names) == 4 and all(len(name) <= 127 and name.startswith("%LMQ%eb|") for name in names)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(patterns(), min_size=1, max_size=40), st.lists(events(), min_size=1, max_size=30))
async def test_each_event_reaches_exactly_the_targets_of_the_rules_that_match(
    make_broker,  # noqa: F811
    tmp_path,
    rule_patterns,
    sample,
):
    directory = tmp_path / f"example-{next(EXAMPLES)}"  # a store of its own per example
    broker, _, buses = await routed_broker(make_broker, rules_text(rule_patterns), directory)
    stamped = [{**event, "id": f"e{n}", "source": "s", "type": "t", "specversion": "1.0"} for n, event in
               enumerate(sample)]  # fmt: skip
    await buses.put("default", stamped)
    for n, pattern in enumerate(rule_patterns):
        expected = [event["id"] for event in stamped if reference_matches(pattern, event)]
        for k in range(2):
            assert await queue_ids(broker, target_queue("default", f"r{n}", f"t{k}")) == expected


async def test_a_thousand_rules_each_event_once_per_matching_target(make_broker):  # noqa: F811
    rng = random.Random(7)
    rule_patterns = [{"detail": {"device": [f"d{n}"]}} for n in range(1000)]
    rule_patterns[3] = {"source": ["s"]}  # matches everything
    broker, router, buses = await routed_broker(make_broker, rules_text(rule_patterns, targets=1))
    devices = [rng.randrange(1200) for _ in range(500)]
    events = [{"specversion": "1.0", "id": f"e{n}", "source": "s", "type": "t", "detail": {"device": f"d{d}"}}
              for n, d in enumerate(devices)]  # fmt: skip
    for start in range(0, len(events), 100):
        await buses.put("default", events[start : start + 100])
    assert await queue_ids(broker, target_queue("default", "r3", "t0")) == [e["id"] for e in events]
    for n in (0, 1, 2, 500, 999):
        expected = [e["id"] for e, d in zip(events, devices, strict=True) if d == n]
        assert await queue_ids(broker, target_queue("default", f"r{n}", "t0")) == expected
    assert router.routed == 500


async def test_copies_for_one_rule_or_target_go_there_only_and_non_events_nowhere(make_broker):  # noqa: F811
    broker, router, buses = await routed_broker(make_broker, rules_text([{"source": ["s"]}, {"source": ["s"]}]))
    event = {"specversion": "1.0", "id": "x", "source": "s", "type": "t"}
    await buses.put("default", [event], OnlyFor("default/r1"))
    await buses.put("default", [{**event, "id": "y"}], OnlyFor("default/r0", "t1"))
    await buses.put("default", [{**event, "id": "z"}], OnlyFor("other/r0"))
    await broker.send(__import__("core").Message("%EVENTBUS%default", b"not json"))
    assert await queue_ids(broker, target_queue("default", "r0", "t0")) == []
    assert await queue_ids(broker, target_queue("default", "r0", "t1")) == ["y"]
    assert await queue_ids(broker, target_queue("default", "r1", "t0")) == ["x"]
    assert await queue_ids(broker, target_queue("default", "r1", "t1")) == ["x"]
    assert router.unroutable == 1


async def test_a_rule_change_applies_to_events_put_after_it(make_broker):  # noqa: F811
    broker, router, buses = await routed_broker(make_broker, rules_text([{"type": ["a"]}], targets=1))
    queue = target_queue("default", "r0", "t0")
    await buses.put("default", [{"specversion": "1.0", "id": "1", "source": "s", "type": "a"}])
    router.update(parse_rule_file("r.yaml", rules_text([{"type": ["b"]}], targets=1)))
    await buses.put("default", [{"specversion": "1.0", "id": n, "source": "s", "type": n and "ab"[int(n) % 2]}
                                for n in ("2", "3")])  # fmt: skip
    assert await queue_ids(broker, queue) == ["1", "3"]


async def test_a_rule_without_a_pattern_gets_only_the_copies_restricted_to_it(make_broker):  # noqa: F811
    text = rules_text([{"source": ["s"]}], targets=1) + (
        "  - name: ticks\n    schedule: rate(5 minutes)\n    targets:\n      - {id: t0, type: http, url: 'http://x/'}\n"
    )
    broker, router, buses = await routed_broker(make_broker, text)
    event = {"specversion": "1.0", "id": "a", "source": "s", "type": "t"}
    await buses.put("default", [event])
    await buses.put("default", [{**event, "id": "b"}], OnlyFor("default/ticks"))
    assert await queue_ids(broker, target_queue("default", "ticks", "t0")) == ["b"]
    assert await queue_ids(broker, target_queue("default", "r0", "t0")) == ["a"]
    assert router.queues_of("default") == {target_queue("default", "ticks", "t0"), target_queue("default", "r0", "t0")}


def router_decodes() -> AbstractContextManager[list[bytes]]:
    """The bodies the router decodes while the block runs (tests/eventbridge/observe.py)."""
    return calls_of(decode_event, "eventbridge/router.py")


async def test_an_event_put_on_a_bus_is_routed_as_it_was_put_and_a_core_message_decoded_once(
    make_broker,  # noqa: F811
):
    broker, router, buses = await routed_broker(make_broker, rules_text([{"data": {"n": [1]}}], targets=1))
    event = {"specversion": "1.0", "id": "a", "source": "s", "type": "t", "data": {"n": 1}}
    with router_decodes() as decoded:
        await buses.put("default", [event, {**event, "id": "b"}, {**event, "id": "x", "data": {"n": 2}}])
    assert decoded == []  # the events themselves reached the send hook with their messages
    body = encode_event({**event, "id": "c"})
    with router_decodes() as decoded:
        await broker.send(Message(bus_topic("default"), body))  # a core producer's message: only its body
    assert decoded == [body]
    assert await queue_ids(broker, target_queue("default", "r0", "t0")) == ["a", "b", "c"]
    assert router.routed == 3


async def test_a_number_past_the_float_range_is_routed_as_it_is_stored_as_null(make_broker):  # noqa: F811
    # Python's json reads 1e400 as infinity; orjson writes infinity as null. The router matches what is stored.
    broker, _, buses = await routed_broker(make_broker, rules_text([{"data": {"x": [None]}}], targets=1))
    event = {"specversion": "1.0", "id": "big", "source": "s", "type": "t", "data": {"x": float("inf")}}
    with router_decodes() as decoded:
        await buses.put("default", [event])
    assert [decode_event(body)["data"] for body in decoded] == [{"x": None}]
    assert await queue_ids(broker, target_queue("default", "r0", "t0")) == ["big"]
