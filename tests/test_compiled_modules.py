"""The modules of pyproject.toml [tool.mqgate] compiled are compiled (`make test` builds them: the suite runs on
them), and each behaves as its pure twin, the same .py interpreted: the same bytes out for the same input."""

from __future__ import annotations

import os
from zlib import crc32

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.store.message import encode_host, encode_properties
from tests.compiled_modules import compiled_sources, is_compiled, module_name, pure_twin

# Set by whoever runs the suite on the interpreted modules on purpose (`make uncompiled`, or no C compiler).
PURE_ENV = "MQGATE_PURE"


@pytest.mark.skipif(os.environ.get(PURE_ENV) == "1", reason=f"{PURE_ENV}=1: the interpreted modules are tested")
@pytest.mark.parametrize("source", compiled_sources(), ids=lambda source: source.name)
def test_each_listed_module_is_compiled(source):
    name = module_name(source)
    assert is_compiled(name), f"{name} runs interpreted: `make compiled` builds it (see .venv/mypyc.log)"


def test_a_pure_twin_is_interpreted_from_the_same_source():
    twin = pure_twin("core.store.log.record_codec")
    assert twin.__file__.endswith("record_codec.py") and twin.__name__ == "core.store.log.record_codec__pure"
    assert twin.HEADER_SIZE == 116


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(0, 2**62)
hosts = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(lambda address: encode_host(str(address)))
properties = st.dictionaries(
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=20),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20),
    max_size=5,
)


@settings(max_examples=200)
@given(
    body=st.binary(max_size=1000),
    topic=st.text(alphabet="abcXYZ019%|_-", min_size=1, max_size=127),
    props=properties,
    numbers=st.tuples(int32, int32, int64, int64, int32, int64, st.integers(0, 65535), int64, st.integers(0, 65535)),
    born_host=hosts,
    store_host=hosts,
    extra=st.tuples(st.integers(0, 1000), int64),
)
def test_record_codec_encodes_and_decodes_as_its_pure_twin(body, topic, props, numbers, born_host, store_host, extra):
    import core.store.log.record_codec as compiled

    pure = pure_twin("core.store.log.record_codec")
    queue_id, flag, queue_offset, physical, sys_flag, born, born_port, stored, store_port = numbers
    sys_flag &= 0x7FFFFFFF
    records = []
    for codec in (compiled, pure):
        tail = codec.encode_tail(codec.encode_topic(topic.encode()), encode_properties(props))
        records.append(
            codec.encode_record(
                body,
                crc32(body),
                tail,
                queue_id,
                flag,
                queue_offset,
                physical,
                sys_flag,
                born,
                born_host,
                born_port,
                stored,
                store_host,
                store_port,
                extra[0],
                extra[1],
            )
        )
    assert records[0] == records[1]
    record = records[0]
    decoded = [codec.decode_record(record, 0, len(record)) for codec in (compiled, pure)]
    fields = ("topic", "body", "queue_id", "flag", "queue_offset", "commit_log_offset", "store_size", "born_host",
              "store_host", "store_timestamp", "born_timestamp", "reconsume_times", "properties")  # fmt: skip
    assert [getattr(decoded[0], f) for f in fields] == [getattr(decoded[1], f) for f in fields]
    assert compiled.record_size_at(record, 0) == pure.record_size_at(record, 0) == (len(record), compiled.RECORD_MAGIC)


# Classes of compiled modules built for every message (or every delivery, acknowledgement or listener call). mypyc
# compiles a class's own methods, while those the dataclass decorator generates run interpreted: each of these
# writes out its __init__ (dataclass init=False), which the decorator would otherwise make, 2-4 times slower.
PER_MESSAGE_CLASSES = (
    ("core.store.put_result", "PutResult"),
    ("core.store.stored_message", "StoredMessage"),
    ("core.results", "SendResult"),
    ("mqtt_bridge.wire.protocol_events", "CachedMessage"),
    ("mqtt_bridge.message_cache", "Pulled"),
    ("mqtt_bridge.wire.protocol_events", "Delivered"),
    ("mqtt_bridge.sessions.session", "Outgoing"),
    ("core.client.push_consumer", "ConsumeContext"),
)


@pytest.mark.skipif(os.environ.get(PURE_ENV) == "1", reason=f"{PURE_ENV}=1: the interpreted modules are tested")
@pytest.mark.parametrize(("module", "name"), PER_MESSAGE_CLASSES, ids=lambda value: value)
def test_classes_built_per_message_have_a_compiled_init(module, name):
    import importlib
    import types

    cls = getattr(importlib.import_module(module), name)
    assert not isinstance(cls.__init__, types.FunctionType), f"{module}.{name}.__init__ runs interpreted"
