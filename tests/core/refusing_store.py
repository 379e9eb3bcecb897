"""A broker whose store really refuses writes, and takes them again: its store sits on a small tmpfs that a filler
file pushes over disk_refuse_ratio and back, with retention looking at the disk every 20 ms (the tests run as
root, as CI does; they are skipped where mount is refused)."""

import asyncio
import contextlib
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core import Broker, BrokerConfig
from core.clock import Clock

from .conftest import open_broker_store

FS_MB = 64
FILLER_MB = 40  # 62% of the file system: over the refuse ratio of 50%
RATIOS = {"disk_clean_ratio": 0.45, "disk_warn_ratio": 0.48, "disk_refuse_ratio": 0.5}


class Disk:
    """The broker's disk, filled over the refuse ratio and emptied again."""

    def __init__(self, directory: Path, broker: Broker) -> None:
        self.filler = directory / "filler"
        self.store = broker.store

    async def fill(self) -> None:
        with self.filler.open("wb") as out:
            for _ in range(FILLER_MB):
                out.write(b"\0" * (1024 * 1024))
        await self._until(lambda: not self.store.writable, "the store to refuse writes")

    async def empty(self) -> None:
        self.filler.unlink()
        await self._until(lambda: self.store.writable, "the store to take writes again")

    @staticmethod
    async def _until(condition, what: str) -> None:
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")


@contextlib.asynccontextmanager
async def refusing_broker(tmp_path: Path, clock: Clock | None = None) -> AsyncIterator[tuple[Broker, Disk]]:
    """A started broker on a small tmpfs, with the Disk that makes its store refuse writes; closed at the end."""
    mount_point = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(mount_point)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        store = open_broker_store(
            mount_point,
            segment_size=1024 * 1024,
            max_message_size=64 * 1024,
            write_ring_size=256 * 1024,  # its default (32 MiB) is half of this file system
            retention_check_interval_s=0.02,
            **RATIOS,
        )
        broker = Broker(store, mount_point / "config", BrokerConfig(), clock=clock)
        await broker.start()
        try:
            yield broker, Disk(mount_point, broker)
        finally:
            await broker.close()
            store.close()
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
