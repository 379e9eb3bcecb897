"""MqttMessage: an MQTT message to core properties and back."""

from hypothesis import given
from hypothesis import strategies as st

from core.store.message import Message, encode_properties
from mqtt_bridge.message_mapping import (
    PROPERTY_HEADER,
    PROPERTY_TOPIC,
    MqttMessage,
    mqtt_client_of,
    mqtt_view,
)

_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), max_size=20)


@given(
    topic=_text.filter(bool),
    payload=st.binary(max_size=64),
    qos=st.integers(0, 2),
    retain=st.booleans(),
    client_id=st.none() | _text,
    expires=st.none() | st.integers(0, 2**40),
    payload_format=st.integers(0, 1),
    content_type=st.none() | _text,
    response_topic=st.none() | _text,
    correlation=st.none() | st.binary(max_size=16),
    user=st.none() | st.lists(st.tuples(_text, _text), min_size=1, max_size=3),
)
def test_a_stored_message_reads_back_equal_to_the_one_the_gateway_keeps(
    topic, payload, qos, retain, client_id, expires, payload_format, content_type, response_topic, correlation, user
):
    # The gateway keeps the message it stored for its sessions (message_cache.py): it must be what they would
    # read back from the record.
    kept = MqttMessage(
        topic, payload, qos, retain, client_id, expires, payload_format, content_type, response_topic, correlation, user
    )
    assert MqttMessage.from_core(kept.to_core("t", 0)) == kept


def test_empty_correlation_data_is_kept_not_dropped():
    # MQTT 5 3.3.2.3.6: the server sends the Correlation Data unaltered, and empty is a value.
    message = MqttMessage("t", b"", 1, False, correlation_data=b"")
    assert MqttMessage.from_core(message.to_core("t", 0)).correlation_data == b""  # type: ignore[union-attr]


# Any MQTT text but U+0000 (which MQTT forbids in UTF-8 strings), the store's separators U+0001 and U+0002 included.
_any_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20)


@given(
    topic=_any_text.filter(bool) | st.builds(lambda part, n: part * n, _any_text.filter(bool), st.integers(1, 20_000)),
    payload=st.binary(max_size=64),
    client_id=st.none() | _any_text,
    content_type=st.none() | _any_text,
    response_topic=st.none() | _any_text,
    user=st.none() | st.lists(st.tuples(_any_text, _any_text), min_size=1, max_size=3),
)
def test_text_the_properties_cannot_carry_travels_in_a_header_and_reads_back(
    topic, payload, client_id, content_type, response_topic, user
):
    kept = MqttMessage(topic, payload, 1, True, client_id, None, 0, content_type, response_topic, None, user)
    core = kept.to_core("t", 0)
    encode_properties(core.properties)  # the store takes them: no separator, within the record's limit
    assert MqttMessage.from_core(core) == kept
    assert mqtt_view(core.properties, core.body) == (topic, payload)
    assert mqtt_client_of(core.properties, core.body) == client_id
    if kept.needs_header():
        assert PROPERTY_HEADER in core.properties and PROPERTY_TOPIC not in core.properties
    else:
        assert core.properties[PROPERTY_TOPIC] == topic and core.body == payload


def test_a_topic_with_a_separator_or_too_long_for_properties_needs_the_header():
    assert not MqttMessage("a/b", b"x", 0, False).needs_header()
    assert MqttMessage("a\x01b", b"x", 0, False).needs_header()
    assert MqttMessage("a", b"x", 0, False, client_id="c\x02").needs_header()
    assert MqttMessage("a" * 65_535, b"x", 0, False).needs_header()


def test_a_broken_header_is_not_an_mqtt_message():
    assert mqtt_view({PROPERTY_HEADER: "5"}, b"{not json") is None
    assert mqtt_view({PROPERTY_HEADER: "99"}, b"{}") is None
    assert mqtt_view({PROPERTY_HEADER: "2"}, b"{}payload") is None  # no topic in it
    assert MqttMessage.from_core(Message(topic="t", body=b"{}", properties={PROPERTY_HEADER: "2"})) is None
