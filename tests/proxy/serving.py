"""`mqgate serve` for tests of the gRPC endpoint, driven by the official RocketMQ 5 Python client: a data directory
with the topics and groups a test needs written before the start (as an operator writes topics.json and
subscriptionGroup.json), the process, and client configurations pointing at its gRPC port."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rocketmq import ClientConfiguration, Credentials

from tests.serve_process import ServeProcess

# Long enough for a loaded CI machine; every wait ends as soon as its condition holds.
WAIT_S = 60.0


def write_topics(data_dir: Path, topics: Mapping[str, str], queues: int = 4) -> None:
    """topics.json with each topic of the given message type (NORMAL, FIFO, DELAY, TRANSACTION, MIXED)."""
    table = {
        name: {
            "topicName": name,
            "readQueueNums": queues,
            "writeQueueNums": queues,
            "perm": 6,
            "attributes": {"message.type": kind},
        }
        for name, kind in topics.items()
    }
    config = data_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "topics.json").write_text(json.dumps({"topicConfigTable": table}))


def write_groups(data_dir: Path, groups: Mapping[str, Mapping[str, Any]]) -> None:
    """subscriptionGroup.json with the given members of each group (RocketMQ's names)."""
    table = {name: {"groupName": name, **members} for name, members in groups.items()}
    config = data_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "subscriptionGroup.json").write_text(json.dumps({"subscriptionGroupTable": table}))


def start(data_dir: Path, *args: str | Path, config: str | None = None) -> ServeProcess:
    """`mqgate serve` on free ports; `config` is the text of DATA_DIR/mqgate.toml."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (data_dir / "mqgate.toml").write_text(config)
    return ServeProcess(data_dir, *args)


def grpc_port(serve: ServeProcess) -> int:
    return int(serve.ready["grpc"].rpartition(":")[2])


def client_config(serve: ServeProcess, ak: str = "", sk: str = "", request_timeout: int = 10) -> ClientConfiguration:
    return ClientConfiguration(f"127.0.0.1:{grpc_port(serve)}", Credentials(ak, sk), request_timeout=request_timeout)


def receive_all(consumer: Any, count: int, invisible_s: int = 30, ack: bool = True) -> list[Any]:
    """Receive (and ack) until `count` messages came, or WAIT_S passed."""
    got: list[Any] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.receive(32, invisible_s):
            got.append(message)
            if ack:
                consumer.ack(message)
    return got


def eventually(check: Callable[[], bool], timeout_s: float = WAIT_S, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval_s)
    return check()


def by_key(messages: Iterable[Any]) -> dict[str, Any]:
    return {next(iter(m.keys)): m for m in messages}
