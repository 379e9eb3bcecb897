"""The recall handle (core/scheduling/recall_handle.py): RocketMQ's HandleV1 layout byte for byte, a round trip for
every handle the broker can issue, and any other text either decoded to what it says or refused with
RecallHandleError, never another exception."""

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.scheduling.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle

# Topic names as validate_topic allows them, broker names without a space, unique ids of any text.
topics = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=127)
brokers = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), min_size=1, max_size=40)
ids = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=64)
times = st.integers(min_value=0, max_value=10**19 - 1)


def reference_decode(handle: str) -> tuple[str, str, int, str] | None:
    """What a handle says, read as plainly as possible: Java's URL-safe decoder (padding optional), then the five
    fields; None where RocketMQ's decodeHandle (or its time parse) would refuse."""
    if any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=" for c in handle):
        return None
    body = handle.rstrip("=")
    if len(handle) - len(body) > 2 or "=" in body or not body or len(body) % 4 == 1:
        return None
    try:
        text = base64.b64decode(body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    parts = text.split(" ", 4)
    if len(parts) != 5 or parts[0] != "v1" or "" in parts or not parts[3].isascii() or not parts[3].isdigit():
        return None
    if len(parts[3]) > 19:
        return None
    return parts[1], parts[2], int(parts[3]), parts[4]


def test_the_layout_is_rocketmqs_handle_v1():
    handle = RecallHandle("orders", "broker-a", 1_800_000_000_123, "7F000001000100").encode()
    assert base64.urlsafe_b64decode(handle) == b"v1 orders broker-a 1800000000123 7F000001000100"
    # Java's Base64.getUrlEncoder pads with "="; its decoder (and ours) takes the handle with or without.
    assert handle.endswith("=")
    assert decode_recall_handle(handle.rstrip("=")) == decode_recall_handle(handle)


@given(topics, brokers, times, ids)
def test_every_handle_the_broker_issues_decodes_to_its_fields(topic, broker, due, unique_id):
    handle = RecallHandle(topic, broker, due, unique_id)
    assert decode_recall_handle(handle.encode()) == handle
    assert reference_decode(handle.encode()) == (topic, broker, due, unique_id)


@given(st.one_of(st.text(max_size=200), st.binary(max_size=150).map(lambda b: base64.urlsafe_b64encode(b).decode())))
def test_any_text_is_decoded_as_the_reference_reads_it_or_refused(text):
    expected = reference_decode(text)
    if expected is None:
        with pytest.raises(RecallHandleError):
            decode_recall_handle(text)
    else:
        decoded = decode_recall_handle(text)
        assert (decoded.topic, decoded.broker_name, decoded.due_ms, decoded.unique_id) == expected


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=7))
def test_fields_of_any_text_joined_by_spaces_decode_or_are_refused(fields):
    text = " ".join(fields)
    handle = base64.urlsafe_b64encode(text.encode()).decode()
    assert (reference_decode(handle) is None) == _refused(handle)


def _refused(handle: str) -> bool:
    try:
        decode_recall_handle(handle)
    except RecallHandleError:
        return True
    return False


@pytest.mark.parametrize(
    ("handle", "says"),
    [
        ("", "empty"),
        ("not a handle!", "not URL-safe base64"),
        ("dj+x", "not URL-safe base64"),
        ("A" * 5, "truncated"),
        ("A" * 5000, "at most 4096"),
        (base64.urlsafe_b64encode(b"v2 t b 1 id").decode(), "version v1"),
        (base64.urlsafe_b64encode(b"v1 t b 1").decode(), "lacks a field"),
        (base64.urlsafe_b64encode(b"v1 t  1 id").decode(), "lacks a field"),
        (base64.urlsafe_b64encode(b"v1 t b soon id").decode(), "milliseconds"),
        (base64.urlsafe_b64encode(b"v1 t b 1 \xff").decode(), "does not decode"),
    ],
)
def test_what_is_wrong_with_a_refused_handle_is_said(handle, says):
    with pytest.raises(RecallHandleError, match=says):
        decode_recall_handle(handle)


@pytest.mark.parametrize(
    "fields",
    [("a b", "broker-a", 1, "id"), ("t", "broker a", 1, "id"), ("", "b", 1, "id"), ("t", "b", -1, "id")],
)
def test_fields_a_handle_cannot_hold_are_refused_when_encoding(fields):
    with pytest.raises(ValueError):
        RecallHandle(*fields).encode()
