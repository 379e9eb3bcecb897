"""hypothesis against `mqgate serve`: generated valid topic names and filters (empty levels, '$' topics, non-ASCII,
the store's separator characters, long names) published by paho-mqtt 3.1.1 and 5.0 reach exactly the subscribers
whose filters match by a plain matcher written from the specification, topic and payload unchanged; retained
messages and persistent sessions keep doing so through a restart."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import paho.mqtt.client as paho
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mqtt_bridge.conftest import Client, Server, connect_properties, start_server

# Level text: what devices use (letters, digits, spaces, dots, '-', '_', non-ASCII letters) and what the core
# cannot hold in a property (U+0001, U+0002), but never '/', '+', '#' or U+0000.
level_text = st.text(st.sampled_from("aAz09 ._-é\u00dfЖ水\x01\x02%|"), max_size=6)
names = st.lists(level_text, min_size=1, max_size=5).map("/".join).filter(lambda name: len(name) > 0)
dollar_names = names.map(lambda name: "$" + name)
long_names = st.tuples(level_text, st.integers(300, 3000)).map(lambda pair: "long/" + (pair[0] or "x") * pair[1])
topic_names = st.one_of(names, names, dollar_names, long_names)


def filters_for(topics: list[str]) -> st.SearchStrategy[str]:
    """Filters: wildcards over levels of the generated names (so that many match), or other names."""

    def wildcarded(draw_levels: tuple[list[str], list[int]]) -> str:
        levels, choice = draw_levels
        out = []
        for level, pick in zip(levels, choice, strict=False):
            if pick == 1:
                out.append("+")
            elif pick == 2:
                out.append("#")
                break
            else:
                out.append(level)
        return "/".join(out) or "#"

    # By index: a strategy over the topics themselves would carry (and print) names of thousands of characters.
    source = st.sampled_from(range(len(topics))).map(lambda index: topics[index].split("/"))
    return st.one_of(
        st.tuples(source, st.lists(st.integers(0, 2), min_size=1, max_size=6)).map(wildcarded),
        st.sampled_from(["#", "+", "+/+", "$dev/#", "/#", "+/#"]),
        names,
    )


def reference_matches(topic_filter: str, topic: str) -> bool:
    """MQTT 4.7, level by level: '+' one level (empty too), '#' the rest including the parent; '$' topics are not
    matched by a first-level wildcard ([MQTT-4.7.2-1])."""
    filter_levels = topic_filter.split("/")
    topic_levels = topic.split("/")
    if topic.startswith("$") and filter_levels[0] in ("+", "#"):
        return False
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index == len(topic_levels):
            return False
        if level != "+" and level != topic_levels[index]:
            return False
    return len(filter_levels) == len(topic_levels)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("topic-property") / "data"
    directory.mkdir()
    started = start_server(directory)
    yield started
    started.stop()


_ids = itertools.count()
VERSIONS = (paho.MQTTv311, paho.MQTTv5)


def sentinel(client_id: str) -> str:
    return f"sentinel/{client_id}"


def receive_until_sentinel(client: Client, client_id: str) -> list[tuple[str, bytes]]:
    got = []
    while True:
        message = client.receive(1, timeout=20)[0]
        if message.topic == sentinel(client_id):
            return got
        if message.topic.startswith("sentinel/"):  # another subscriber's, matched by a wide filter ('#')
            continue
        got.append((message.topic, message.payload))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_published_topics_reach_exactly_the_matching_subscribers(shared_server: Server, data: st.DataObject) -> None:
    topics = data.draw(st.lists(topic_names, min_size=1, max_size=6), label="topics")
    filters = data.draw(st.lists(filters_for(topics), min_size=1, max_size=4, unique=True), label="filters")
    run = next(_ids)
    subscribers = []
    for number, topic_filter in enumerate(filters):
        client_id = f"s{run}-{number}"
        client = Client(shared_server, client_id, VERSIONS[number % 2])
        assert client.subscribe([(topic_filter, 1), (sentinel(client_id), 1)]) is not None
        subscribers.append((client_id, topic_filter, client))
    publisher = Client(shared_server, f"p{run}", VERSIONS[run % 2])
    sent = [(topic, f"{run}:{index}".encode()) for index, topic in enumerate(topics)]
    try:
        for topic, payload in sent:
            info = publisher.publish(topic, payload, qos=1)
            assert info.is_published()
        for client_id, _, _ in subscribers:
            publisher.publish(sentinel(client_id), b"", qos=1)
        for client_id, topic_filter, client in subscribers:
            expected = [(topic, payload) for topic, payload in sent if reference_matches(topic_filter, topic)]
            assert receive_until_sentinel(client, client_id) == expected, topic_filter
    finally:
        publisher.disconnect()
        for _, _, client in subscribers:
            client.disconnect()


def persistent(server: Server, client_id: str, version: int) -> Client:
    if version != paho.MQTTv5:
        return Client(server, client_id, version, clean=False)
    return Client(server, client_id, version, clean=False, properties=connect_properties(SessionExpiryInterval=3600))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_retained_messages_and_persistent_sessions_keep_topics_through_a_restart(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    topics = data.draw(st.lists(topic_names, min_size=1, max_size=5, unique=True), label="topics")
    filters = data.draw(st.lists(filters_for(topics), min_size=1, max_size=3, unique=True), label="filters")
    directory = tmp_path_factory.mktemp("topic-restart") / "data"
    directory.mkdir()
    server = start_server(directory)
    try:
        # Persistent sessions subscribe, then go away; messages are published while they are gone, retained.
        for number, topic_filter in enumerate(filters):
            client = persistent(server, f"ps{number}", VERSIONS[number % 2])
            client.subscribe(topic_filter, 1)
            client.disconnect()
        publisher = Client(server, f"pub-{uuid.uuid4().hex[:6]}", paho.MQTTv5)
        sent = [(topic, f"r{index}".encode()) for index, topic in enumerate(topics)]
        for topic, payload in sent:
            assert publisher.publish(topic, payload, qos=1, retain=True).is_published()
        publisher.disconnect()
        server.stop()
        server = start_server(directory)
        for number, topic_filter in enumerate(filters):
            client_id = f"ps{number}"
            client = persistent(server, client_id, VERSIONS[number % 2])
            assert client.flags.session_present  # type: ignore[attr-defined]
            client.subscribe(sentinel(client_id), 1)
            Client(server, "poke", paho.MQTTv5).publish(sentinel(client_id), b"", qos=1)
            queued = [(topic, payload) for topic, payload in sent if reference_matches(topic_filter, topic)]
            assert receive_until_sentinel(client, client_id) == queued, topic_filter
            client.disconnect()
            # A new subscriber of the filter gets the matching retained messages, topics unchanged.
            fresh = Client(server, f"fresh{number}", VERSIONS[(number + 1) % 2])
            fresh.subscribe(topic_filter, 1)
            if queued:
                got = fresh.receive(len(queued), timeout=20)
                assert sorted((m.topic, m.payload) for m in got) == sorted(queued)
                assert all(m.retain for m in got)
            assert fresh.nothing_more(0.3)
            fresh.disconnect()
    finally:
        server.stop()
