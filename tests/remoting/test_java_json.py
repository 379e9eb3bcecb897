"""fastjson's text, written and read: JSON, maps keyed by objects (a MessageQueue) and by numbers (broker ids),
against json.loads as the reference."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.java_json import JavaJsonError, body_with, loads, object_keyed, queue_key

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES, st.sampled_from([None, 2]))
def test_json_reads_as_json_loads_reads_it(value: object, indent: int | None):
    text = json.dumps(value, indent=indent)
    assert loads(text) == json.loads(text)


@given(st.dictionaries(st.tuples(st.text(min_size=1), st.text(min_size=1), st.integers(0, 99)), st.integers()))
def test_a_queue_keyed_map_reads_back_keyed_by_the_queues_json(table: dict[tuple[str, str, int], int]):
    text = body_with(
        {"consumeTps": 0.5}, offsetTable=object_keyed((queue_key(*key), value) for key, value in table.items())
    )
    read = loads(text)
    assert read["consumeTps"] == 0.5
    assert {tuple(json.loads(k).values()): v for k, v in read["offsetTable"].items()} == {
        (broker, queue_id, topic): value for (topic, broker, queue_id), value in table.items()
    }


def test_number_keys_as_a_java_nameserver_writes_them():
    assert loads('{"brokerAddrs":{0:"10.0.0.7:10911", 1 : "10.0.0.8:10911"}}') == {
        "brokerAddrs": {"0": "10.0.0.7:10911", "1": "10.0.0.8:10911"}
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [("", "the text ends at character 0"), ('{"a" 1}', "':' expected at character 5"),
     ('{"a":1 "b"}', "',' or '}' expected at character 7"), ("[1 2]", "',' or ']' expected at character 3"),
     ("{} x", "unexpected text at character 2"), ("{'a':1}", "no value at character 1")],
)  # fmt: skip
def test_what_is_not_fastjson_text_is_refused_saying_where(text: str, said: str):
    with pytest.raises(JavaJsonError, match=said):
        loads(text)
