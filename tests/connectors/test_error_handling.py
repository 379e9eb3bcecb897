"""Kafka Connect's error-handling keys on a real broker and worker (file sink; a body with a newline fails):
the trace of a task that failed names the record, errors.log.enable logs each failure,
errors.deadletterqueue.context.headers.enable=false leaves the error out of the dead letter, and a dead-letter
topic that would never be written, or would be read, is refused."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from connectors import api
from connectors.errors import InvalidConfig
from connectors.plugins import PluginRegistry
from connectors.validation import validate_config
from connectors.worker import Worker
from core import Producer
from tests.connectors.test_worker import drain, eventually, lines

PLUGINS = PluginRegistry.load()


@pytest.fixture
async def broker_and_worker(make_broker, tmp_path):
    broker = await make_broker()
    worker = Worker(broker, tmp_path / "connect", PLUGINS)
    await worker.start()
    yield broker, worker
    await worker.close()


async def produce(broker, *bodies: bytes) -> None:
    producer = Producer(broker)
    for body in bodies:
        await producer.send("in", body, sharding_key="k")  # one queue: offsets 0, 1, 2
    # All in the consume queue before a task reads: its first batch holds every record (a read while the
    # dispatcher lags could take the first alone, and flush it before the bad one fails the task).
    assert await broker.wait_visible()


async def dead_letters(broker, topic: str) -> list:
    for _ in range(200):
        if broker.topics.get(topic) is not None and (dead := await drain(broker, topic)):
            return dead
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing in {topic}")


async def test_a_task_failed_by_a_record_names_it_and_what_to_do(broker_and_worker, tmp_path: Path):
    broker, worker = broker_and_worker
    await produce(broker, b"a", b"b\nb", b"c")
    await worker.create("dst", {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "in"})
    await eventually(lambda: worker.status("dst").tasks[0].state == "FAILED", what="FAILED")
    trace = worker.status("dst").tasks[0].trace
    assert trace is not None
    [queue] = {line.split("record in/")[1].split("/")[0] for line in trace.splitlines() if "record in/" in line}
    assert f"connector 'dst' task 0: record in/{queue}/1 (topic/queue/offset) failed: ValueError: " in trace
    assert "a body holding a newline cannot be one line" in trace
    assert "set errors.tolerance=all" in trace and "/connectors/dst/restart?includeTasks=true&onlyFailed=true" in trace
    assert lines(tmp_path / "out.txt") == []  # the batch a was in was not flushed


async def test_errors_log_enable_logs_each_failing_record(broker_and_worker, tmp_path: Path, caplog):
    broker, worker = broker_and_worker
    await produce(broker, b"a", b"b\nb", b"c")
    with caplog.at_level(logging.ERROR, logger="connectors.sink_runner"):
        await worker.create(
            "dst",
            {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "in",
             "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq", "errors.log.enable": "true",
             "errors.log.include.messages": "true"},
        )  # fmt: skip
        await eventually(lambda: lines(tmp_path / "out.txt") == ["a", "c"], what="a and c written")
    [line] = [r.getMessage() for r in caplog.records if r.name == "connectors.sink_runner"]
    assert line.startswith("connector 'dst' task 0: record in/")
    assert "/1 failed (sent to 'dlq'): ValueError: " in line
    assert "; body b'b\\nb', properties {'__SHARDINGKEY': 'k', " in line


async def test_without_errors_log_enable_a_tolerated_failure_is_not_logged(broker_and_worker, tmp_path, caplog):
    broker, worker = broker_and_worker
    await produce(broker, b"a", b"b\nb", b"c")
    with caplog.at_level(logging.WARNING, logger="connectors.sink_runner"):
        await worker.create(
            "dst",
            {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "in",
             "errors.tolerance": "all"},
        )  # fmt: skip
        await eventually(lambda: lines(tmp_path / "out.txt") == ["a", "c"], what="a and c written")
    assert [r.getMessage() for r in caplog.records if r.name == "connectors.sink_runner"] == []


async def test_dead_letters_without_context_keep_only_their_own_properties(broker_and_worker, tmp_path: Path):
    broker, worker = broker_and_worker
    await produce(broker, b"a", b"b\nb")
    await worker.create(
        "dst",
        {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "in",
         "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
         "errors.deadletterqueue.context.headers.enable": "false"},
    )  # fmt: skip
    [dead] = await dead_letters(broker, "dlq")
    assert dead.body == b"b\nb"
    assert not any(key.startswith("CONNECT_ERROR") for key in dead.properties)


async def test_dead_letters_carry_their_context_by_default(broker_and_worker, tmp_path: Path):
    broker, worker = broker_and_worker
    await produce(broker, b"b\nb")
    await worker.create(
        "dst",
        {"connector.class": "file-sink", "file": str(tmp_path / "out.txt"), "topics": "in",
         "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"},
    )  # fmt: skip
    [dead] = await dead_letters(broker, "dlq")
    assert dead.properties[api.PROPERTY_ERROR_CONNECTOR] == "dst"
    assert dead.properties[api.PROPERTY_ERROR_ORIGIN].endswith("/0")
    assert "a body holding a newline cannot be one line" in dead.properties[api.PROPERTY_ERROR]


def errors_of(config: dict[str, str]) -> dict[str, str]:
    base = {"name": "dst", "connector.class": "file-sink", "file": "/tmp/x", "topics": "in,orders"}
    return {error.key: error.message for error in validate_config(PLUGINS, {**base, **config})}


def test_a_dead_letter_topic_that_would_never_be_written_is_refused():
    assert errors_of({"errors.deadletterqueue.topic.name": "dlq"}) == {
        "errors.deadletterqueue.topic.name": "'dlq' would never be written: with errors.tolerance=none the first"
        " failing record fails the task; set errors.tolerance=all, or remove this key"
    }
    assert errors_of({"errors.deadletterqueue.topic.name": "dlq", "errors.tolerance": "all"}) == {}


def test_a_dead_letter_topic_the_connector_reads_is_refused():
    assert errors_of({"errors.deadletterqueue.topic.name": "orders", "errors.tolerance": "all"}) == {
        "errors.deadletterqueue.topic.name": "'orders' is also in topics: the connector would read its own failures"
    }


def test_a_source_with_a_dead_letter_topic_is_refused():
    config = {"name": "src", "connector.class": "file-source", "file": "/tmp/x", "topic": "in",
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}  # fmt: skip
    errors = {error.key: error.message for error in validate_config(PLUGINS, config)}
    assert errors == {
        "errors.deadletterqueue.topic.name": "'dlq' would never be written: dead letters are records a sink could"
        " not write; a source task that cannot store its records fails after errors.retry.timeout; remove this key"
    }


def test_error_handling_flags_take_booleans_only():
    assert errors_of({"errors.log.enable": "sometimes"}).keys() == {"errors.log.enable"}


async def test_the_worker_refuses_such_a_config(broker_and_worker):
    _, worker = broker_and_worker
    refused = re.escape("errors.deadletterqueue.topic.name: 'dlq' would never be written")
    with pytest.raises(InvalidConfig, match=refused):
        await worker.create(
            "dst", {"connector.class": "file-sink", "file": "/tmp/x", "topics": "in",
                    "errors.deadletterqueue.topic.name": "dlq"},
        )  # fmt: skip
