from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.store.config import StoreConfig
from core.store.message_store import MessageStore

SMALL = {
    "segment_size": 1024 * 1024,
    "max_message_size": 256 * 1024,
    "cq_entries_per_file": 1000,
    "index_slots": 1024,
    "index_entries": 4096,
}


def small_config(directory: Path, **overrides: object) -> StoreConfig:
    return StoreConfig(store_dir=directory, **{**SMALL, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., MessageStore]]:
    """Open stores on small files; every store opened is closed at the end of the test."""
    opened: list[MessageStore] = []

    def _open(directory: Path | None = None, **overrides: object) -> MessageStore:
        store = MessageStore(small_config(directory or tmp_path / "store", **overrides))
        store.open()
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()
