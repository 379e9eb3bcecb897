"""The compiled append path against its pure twins, the same .py files interpreted (tests/compiled_modules.py):
property encoding and decoding (core/store/log/property_codec.py), the checks and encoding of a message before the
commit log places it (core/store/log/appender.py) and the put result (core/store/put_result.py). Callers' messages can
carry fields of any type: both twins refuse them with the same store error, never a compiled module's TypeError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import core.store.log.property_codec as compiled_codec
import core.store.put_result as compiled_result
from core.store.config import StoreConfig
from core.store.message import Message
from core.store.message_store import MessageStore
from tests.compiled_modules import is_compiled, outcome, pure_twin

pure_codec = pure_twin("core.store.log.property_codec")
pure_appender = pure_twin("core.store.log.appender")
pure_result = pure_twin("core.store.put_result")


def test_the_twins_are_what_they_say():
    for name in ("core.store.log.property_codec", "core.store.log.appender", "core.store.put_result"):
        assert is_compiled(name)
    assert pure_codec.__name__.endswith("__pure") and pure_appender.__name__.endswith("__pure")


# Names and values of any kind: the usual strings, separators inside them, empty names, and non-strings.
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
names = st.one_of(texts, st.sampled_from(["", "a\x01b", "c\x02", "UNIQ_KEY", "TAGS"]), st.integers(), st.none())
values = st.one_of(texts, st.sampled_from(["", "x\x01", "\x02y"]), st.integers(), st.binary(max_size=4))
property_dicts = st.one_of(
    st.dictionaries(names, values, max_size=6),
    st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=40_000), min_size=1, max_size=3),
)


@settings(max_examples=400)
@given(property_dicts)
def test_properties_encode_or_are_refused_alike(properties):
    result = outcome(compiled_codec.encode_properties, properties)
    assert result == outcome(pure_codec.encode_properties, properties)
    if result[0] == "result":
        assert outcome(compiled_codec.decode_properties, result[1]) == ("result", properties)


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=60), st.text(max_size=30).map(str.encode)))
def test_any_bytes_decode_or_are_refused_alike(data):
    assert outcome(compiled_codec.decode_properties, data) == outcome(pure_codec.decode_properties, data)


# Messages as callers might build them: legal and illegal topics, bodies of several types, any queue id, and
# properties with good and bad tag codes and light-queue lists.
topics = st.one_of(st.sampled_from(["orders", "a" * 200, "bad topic", "", "%LMQ%x"]), st.integers(), st.none())
bodies = st.one_of(st.binary(max_size=64), st.binary(max_size=64).map(bytearray), st.text(max_size=5), st.integers())
queue_ids = st.one_of(st.integers(-3, 8), st.none())
special = st.fixed_dictionaries(
    {},
    optional={
        "__TAG_CODE": st.sampled_from(["12", "-7", "x", "1" * 30, ""]),
        "INNER_MULTI_DISPATCH": st.sampled_from(
            ["%LMQ%a", "%LMQ%a,%LMQ%b,%LMQ%a", "orders", "%LMQ%a,", "%LMQ%bad name"]
        ),
        "TAGS": st.text(max_size=5),
    },
)
messages = st.builds(
    lambda topic, body, queue_id, properties, extra: (topic, body, queue_id, {**properties, **extra}),
    topics,
    bodies,
    queue_ids,
    st.one_of(st.dictionaries(names, values, max_size=3), st.just({})),
    special,
)


def prepared(appender: Any, fields: tuple[Any, ...]) -> tuple[Any, ...]:
    message = Message.__new__(Message)  # no checks of its own: what a careless caller may hand over
    for name, value in zip(("topic", "body", "queue_id", "properties"), fields, strict=True):
        object.__setattr__(message, name, value)
    got = outcome(appender.prepare, message)
    if got[0] == "result":
        _, topic, queue_id, body_out, *rest = got[1]
        return ("result", topic, queue_id, bytes(body_out), *rest)
    return got


def test_prepare_checks_and_encodes_as_its_pure_twin(tmp_path: Path):
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store", max_message_size=300))
    compiled = store.appender
    pure = pure_appender.Appender(None, None, 300, ("127.0.0.1", 10911), str(tmp_path / "store"))

    @settings(max_examples=400)
    @given(messages)
    def check(fields):
        assert prepared(compiled, fields) == prepared(pure, fields)

    check()
    assert compiled.topics.keys() == pure.topics.keys()
    assert compiled.light_lists == pure.light_lists


def test_a_refused_store_refuses_appends_alike(tmp_path: Path):
    store = MessageStore(StoreConfig(store_dir=tmp_path / "store"))
    pure = pure_appender.Appender(None, None, 1000, ("127.0.0.1", 10911), str(tmp_path / "store"))
    message = Message("orders", b"x")
    assert outcome(store.appender.append, message) == outcome(pure.append, message)
    assert outcome(store.appender.append_batch, [message]) == outcome(pure.append_batch, [message])
    assert outcome(store.appender.append, message)[1] == "StoreNotWritableError"


@given(st.integers(0, 2**40), st.integers(1, 2**20), st.sampled_from(["PUT_OK", "FLUSH_DISK_TIMEOUT"]))
def test_put_results_answer_as_their_pure_twin(offset, size, status):
    fields = ("orders", 3, 17, offset, size, 1_700_000_000_000, ("10.0.0.1", 10911))
    ours = compiled_result.PutResult(compiled_result.PutStatus.PUT_OK, *fields)
    theirs = pure_result.PutResult(pure_result.PutStatus.PUT_OK, *fields)
    assert (ours.end_offset, ours.offset_msg_id) == (theirs.end_offset, theirs.offset_msg_id)
    changed = ours.with_status(compiled_result.PutStatus[status])
    assert changed.status.value == status and changed.end_offset == offset + size
    assert (
        repr(ours).replace("PutStatus.PUT_OK", "").split("(", 1)[1]
        == repr(theirs).replace("PutStatus.PUT_OK", "").split("(", 1)[1]
    )
