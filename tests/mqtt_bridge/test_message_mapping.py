"""MqttMessage: an MQTT message to core properties and back."""

from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.message_mapping import MqttMessage

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
