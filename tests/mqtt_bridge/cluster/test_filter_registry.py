"""The cluster's filter registry (pure) against a plain reference: which groups use which light queue, and which
queues a topic name's message goes to (every filter used by any group that matches it, by topic.matches); and the
registry's records, encoded and read back, and refused with what is wrong when malformed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import Message
from mqtt_bridge.cluster.filter_records import (
    FILTERS_TOPIC,
    PROPERTY_GROUP,
    PROPERTY_SET,
    Delta,
    GroupSet,
    Hello,
    decode_change,
    delta_message,
    hello_message,
    set_message,
)
from mqtt_bridge.cluster.filter_registry import FilterRegistry
from mqtt_bridge.sessions.session import light_queue_name
from mqtt_bridge.topics.topic import matches

GROUPS = ["broker-a", "broker-b", "broker-c"]
FILTERS = ["a/b", "a/+", "a/#", "#", "+/b", "b/+/c", "$SYS/#", "a/b/c"]
TOPICS = ["a/b", "a/c", "a", "b/x/c", "a/b/c", "$SYS/x", "b"]

operations = st.lists(
    st.tuples(st.sampled_from(["add", "remove", "replace"]), st.sampled_from(GROUPS),
              st.lists(st.sampled_from(FILTERS), max_size=3)),
    max_size=40,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_registry_routes_to_every_filter_some_group_uses(ops):
    registry = FilterRegistry()
    reference: dict[str, set[str]] = {}  # filter -> groups
    for kind, group, filters in ops:
        if kind == "add":
            for topic_filter in filters:
                registry.add(group, light_queue_name(topic_filter), topic_filter, None)
                reference.setdefault(topic_filter, set()).add(group)
        elif kind == "remove":
            for topic_filter in filters:
                registry.remove(group, light_queue_name(topic_filter))
                reference.get(topic_filter, set()).discard(group)
        else:
            registry.replace_group(group, {light_queue_name(f): (f, None) for f in filters})
            for groups in reference.values():
                groups.discard(group)
            for topic_filter in filters:
                reference.setdefault(topic_filter, set()).add(group)
    used = {topic_filter for topic_filter, groups in reference.items() if groups}
    for topic in TOPICS:
        expected = {light_queue_name(f) for f in used if matches(f, topic)}
        assert set(registry.queues_for(topic)) == expected
    for topic_filter in FILTERS:
        for group in GROUPS:
            assert registry.used_by(group, light_queue_name(topic_filter)) == (group in reference.get(topic_filter, ()))
    # A snapshot reads back the same registry.
    again = FilterRegistry()
    again.load_json(json.loads(json.dumps(registry.to_json())))
    assert {q: (u.topic_filter, u.share_group, u.groups) for q, u in again.uses.items()} == {
        q: (u.topic_filter, u.share_group, u.groups) for q, u in registry.uses.items()
    }


def test_records_read_back():
    uses = {light_queue_name("a/+"): ("a/+", None), light_queue_name("x/#", "g1"): ("x/#", "g1")}
    assert decode_change(delta_message("broker-a", uses, ["%LMQ%gone"])) == Delta("broker-a", uses, ("%LMQ%gone",))
    assert decode_change(set_message("broker-b", uses)) == GroupSet("broker-b", uses)
    assert decode_change(hello_message("broker-c")) == Hello("broker-c")
    assert decode_change(Message(FILTERS_TOPIC, b"{}")) is None  # no group: not a registry record


@pytest.mark.parametrize(
    "body, properties, phrase",
    [
        (b"not json", {}, "not JSON"),
        (b"[]", {}, "expected an object"),
        (b'{"uses": {"q": "a/b"}}', {}, "expected [filter, share group]"),
        (b'{"releases": [1]}', {}, "'releases' must be a list"),
        (b'{"uses": []}', {PROPERTY_SET: "1"}, "'uses' must be an object"),
    ],
)
def test_a_malformed_record_is_refused_with_what_is_wrong(body, properties, phrase):
    message = Message(FILTERS_TOPIC, body, properties={PROPERTY_GROUP: "broker-x", **properties})
    with pytest.raises(ValueError, match=phrase.replace("[", r"\[").replace("]", r"\]")):
        decode_change(message)
