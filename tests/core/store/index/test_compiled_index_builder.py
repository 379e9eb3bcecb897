"""The compiled index builder (core/store/index/builder.py, the index process's work) against its pure twin, the same
.py interpreted (tests/compiled_modules.py): over one commit log of several segments, with records that carry keys,
a unique id, both or neither, a corrupt record in the middle and a segment deleted by retention, indexing in any
chunks ends at the same position with the same answers to the same queries."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.store.index.builder as compiled
from core.store.log.mapped_file import file_name
from core.store.message import Message
from tests.compiled_modules import pure_twin
from tests.core.store.conftest import SMALL, small_config

pure = pure_twin("core.store.index.builder")
SEGMENT = SMALL["segment_size"]


def message(n: int) -> Message:
    properties = {}
    if n % 3 != 2:
        properties["KEYS"] = f"key-{n} batch-{n // 50}"
    if n % 4 != 3:
        properties["UNIQ_KEY"] = f"id-{n}"
    return Message(f"topic-{n % 3}", b"b" * (n % 7 * 1000), n % 2, properties)


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> tuple[Path, int]:
    """A commit log of about 4 segments, the store closed; returns (commit-log directory, end of the log)."""
    from core.store.message_store import MessageStore

    directory = tmp_path_factory.mktemp("log")
    store = MessageStore(small_config(directory / "store", index_process=False))
    store.open()
    try:
        for n in range(1500):
            store.append(message(n))
        store.flush()
        end = store.commit_log.write_pos
    finally:
        store.close()
    commit_log = directory / "store" / "commitlog"
    assert end > 3 * SEGMENT
    # The first record of the second segment corrupted in its topic: both builders skip it and go on.
    with (commit_log / file_name(SEGMENT)).open("r+b") as segment:
        segment.seek(112)
        topic_byte = 116 + int.from_bytes(segment.read(4), "big") + 2
        segment.seek(topic_byte)
        first = segment.read(1)
        segment.seek(topic_byte)
        segment.write(bytes([first[0] ^ 0xFF]))
    return commit_log, end


def answers(module, log_dir: Path, end: int, index_dir: Path, chunks: list[int]) -> tuple[object, ...]:
    builder = module.IndexBuilder(str(index_dir), 64, 512, str(log_dir), SEGMENT, 0)
    try:
        for chunk in chunks:
            builder.index_until(end, chunk)
        builder.index_until(end)
        queries = [
            builder.answer(("query", f"topic-{n % 3}", key, 64, 0, 2**62, end))
            for n in range(0, 1500, 37)
            for key in (f"key-{n}", f"id-{n}", f"batch-{n // 50}")
        ]
        return builder.position, builder.failures, queries
    finally:
        builder.stop(end)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.integers(1, 700), max_size=4))
def test_indexing_gives_the_answers_of_the_pure_twin(log, tmp_path_factory, chunks):
    log_dir, end = log
    assert compiled.IndexBuilder is not pure.IndexBuilder
    results = [answers(module, log_dir, end, tmp_path_factory.mktemp("index"), chunks) for module in (compiled, pure)]
    assert results[0] == results[1]
    position, failures, queries = results[0]
    assert position == end and failures == 0
    assert any(found[1] for found in queries) and any(not found[1] for found in queries)


def test_a_corrupt_record_is_skipped_and_reading_goes_on(log, tmp_path, caplog):
    log_dir, end = log
    for module in (compiled, pure):
        builder = module.IndexBuilder(str(tmp_path / module.__name__), 64, 512, str(log_dir), SEGMENT, 0)
        try:
            builder.index_until(end)
            assert builder.position == end
        finally:
            builder.stop(end)
    skipped = [record.getMessage() for record in caplog.records if "not indexed" in record.getMessage()]
    assert len(skipped) == 2 and all(f"offset {SEGMENT}:" in text for text in skipped)


def test_a_segment_deleted_under_the_builder_is_stepped_over(log, tmp_path):
    log_dir, end = log
    copy = tmp_path / "commitlog"
    copy.mkdir()
    for segment in sorted(log_dir.iterdir())[1:]:  # the first segment is gone (retention)
        (copy / segment.name).write_bytes(segment.read_bytes())
    for module in (compiled, pure):
        builder = module.IndexBuilder(str(tmp_path / module.__name__), 64, 512, str(copy), SEGMENT, 0)
        try:
            builder.index_until(end)
            assert builder.position == end
            found = builder.answer(("query", "topic-0", "id-1497", 64, 0, 2**62, end))[1]
            assert len(found) == 1 and found[0] >= SEGMENT
            assert builder.answer(("query", "topic-0", "id-0", 64, 0, 2**62, end))[1] == []
        finally:
            builder.stop(end)
