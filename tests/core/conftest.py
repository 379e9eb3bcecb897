from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from core import Broker, BrokerConfig, MessageStore, StoreConfig
from core.clock import Clock

SMALL_STORE = {
    "segment_size": 4 * 1024 * 1024,
    "max_message_size": 1024 * 1024,
    "cq_entries_per_file": 1000,
    "index_slots": 1024,
    "index_entries": 8192,
}


def open_broker_store(directory: Path, **overrides: object) -> MessageStore:
    store = MessageStore(StoreConfig(store_dir=directory / "store", **{**SMALL_STORE, **overrides}))  # type: ignore[arg-type]
    store.open()
    return store


@pytest.fixture
async def make_broker(tmp_path: Path) -> AsyncIterator[Callable[..., object]]:
    """Start brokers on real stores in tmp_path; all are closed at the end of the test."""
    started: list[tuple[Broker, MessageStore]] = []

    async def _make(
        directory: Path | None = None,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        **store_overrides: object,
    ):
        directory = directory or tmp_path
        store = open_broker_store(directory, **store_overrides)
        broker = Broker(store, directory / "config", config, clock=clock)
        await broker.start()
        started.append((broker, store))
        return broker

    yield _make
    for broker, store in started:
        await broker.close()
        store.close()
