"""Store benchmark: appends against the raw disk, in one run, on one directory.

    python bench/store.py [--quick] [--rounds N] [--dir DIR]

Measures on the same file system:
  * raw disk: os.write of 1 MiB chunks then fsync, the same volume as the 4 KiB run (the physical limit);
  * ASYNC_FLUSH appends of 128 B and 4 KiB bodies with 1, 8 and 64 concurrent writers (asyncio tasks calling
    `await store.put(message)`, which under async flush returns without awaiting anything); the clock stops when
    the last record is flushed to disk and, for the `visible` figures, dispatched into its consume queue;
  * SYNC_FLUSH appends of 128 B and 4 KiB with 1, 8 and 64 writers, each waiting for its acknowledgement.
Every message carries a unique id (UNIQ_KEY), as a RocketMQ producer sets, so every message is indexed.
Messages are built before the clock starts (they are the producer's work) and the pool is frozen out of the
garbage collector's scans (it is the harness's data, not the store's). The event loop is the one `mqgate serve`
runs (uvloop when installed), with serve's interpreter settings (GC threshold, GIL switch interval).

This machine is a VM whose speed drifts by 2x within minutes, so each figure is the median of `--rounds` runs,
and the raw-disk baseline is measured right before each 4 KiB run: a ratio is the median of per-round ratios.
Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compiled_report import compiled_state
from core.store.config import FlushMode, StoreConfig
from core.store.message import Message
from core.store.message_id import UniqueIdGenerator
from core.store.message_store import MessageStore
from mqgate.process import run as run_on_event_loop
from mqgate.server import apply_interpreter_settings

MiB = 1024 * 1024


def emit(key: str, value: float) -> None:
    text = f"{value:.3f}" if isinstance(value, float) and value < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


def raw_disk(directory: Path, volume: int) -> float:
    """MB/s of os.write in 1 MiB chunks plus one fsync, into a new file in `directory`."""
    path = directory / "raw-disk.bin"
    chunk = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for _ in range(volume // MiB):
            os.write(fd, chunk)
        os.fsync(fd)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return volume / MiB / elapsed


def messages(count: int, size: int) -> list[Message]:
    ids = UniqueIdGenerator()
    bodies = [os.urandom(size) for _ in range(64)]
    pool = [
        Message(topic="bench", body=bodies[n % 64], queue_id=n % 4, properties={"UNIQ_KEY": ids.next_id()})
        for n in range(count)
    ]
    gc.collect()
    gc.freeze()
    return pool


async def run_appends(store: MessageStore, pool: list[Message], writers: int) -> tuple[float, float]:
    """(seconds until the last record is durable, seconds until it is visible)."""
    share = len(pool) // writers

    async def writer(k: int) -> None:
        put = store.put
        for message in pool[k * share : (k + 1) * share]:
            await put(message)

    started = time.perf_counter()
    await asyncio.gather(*(writer(k) for k in range(writers)))
    store.flush()
    durable = time.perf_counter() - started
    await store.wait_visible(timeout=120)
    visible = time.perf_counter() - started
    return durable, visible


def measure(
    directory: Path, mode: FlushMode, size: int, writers: int, count: int, index_process: bool
) -> tuple[float, float]:
    store_dir = directory / f"store-{mode.value}-{size}-{writers}"
    store = MessageStore(StoreConfig(store_dir=store_dir, flush_mode=mode, index_process=index_process))
    store.open()
    try:
        pool = messages(count, size)
        durable, visible = run_on_event_loop(run_appends(store, pool, writers))
        sent = (len(pool) // writers) * writers
    finally:
        store.close()
        gc.unfreeze()
        shutil.rmtree(store_dir, ignore_errors=True)
    return sent / durable, sent / visible


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller volumes (finishes in under a minute)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per figure; the median is printed")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent.parent / ".bench-tmp")
    parser.add_argument(
        "--index-in-process",
        action="store_true",
        help="build the index in the appending process, as a store embedded in a program does (default: in a"
        " process of its own, as `mqgate serve` does: [store] index_process)",
    )
    args = parser.parse_args()
    apply_interpreter_settings()  # mqgate serve's: GC threshold, GIL switch interval
    index_process = not args.index_in_process
    args.dir.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    rounds = args.rounds
    volume = (256 if quick else 1024) * MiB
    small_async = 100_000 if quick else 1_000_000
    sync_counts = {1: 500, 8: 3_000, 64: 20_000} if quick else {1: 3_000, 8: 20_000, 64: 150_000}
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        directory = Path(work)
        disk: list[float] = []
        ratios: dict[int, list[float]] = {1: [], 8: [], 64: []}
        rates: dict[int, list[float]] = {1: [], 8: [], 64: []}
        for _ in range(rounds):
            for writers in (1, 8, 64):
                baseline = raw_disk(directory, volume)
                rate, _ = measure(directory, FlushMode.ASYNC_FLUSH, 4096, writers, volume // 4096, index_process)
                disk.append(baseline)
                rates[writers].append(rate * 4096 / MiB)
                ratios[writers].append(rate * 4096 / MiB / baseline)
        print(f"store.compiled={compiled_state('core.store')}", flush=True)
        print(f"store.index_process={int(index_process)}", flush=True)
        emit("store.raw_disk.mb_per_s", median(disk))
        for writers in (1, 8, 64):
            suffix = "" if writers == 1 else f".{writers}w"
            emit(f"store.append.4k.async{suffix}.mb_per_s", median(rates[writers]))
            emit(f"store.append.4k.async{suffix}.ratio_to_disk", median(ratios[writers]))
        for writers in (1, 8, 64):
            runs = [
                measure(directory, FlushMode.ASYNC_FLUSH, 128, writers, small_async, index_process)
                for _ in range(rounds)
            ]
            suffix = "" if writers == 1 else f".{writers}w"
            emit(f"store.append.128b.async{suffix}.msgs_per_s", median([r[0] for r in runs]))
            emit(f"store.append.128b.async{suffix}.visible_msgs_per_s", median([r[1] for r in runs]))
        for size, label in ((128, "128b"), (4096, "4k")):
            sync: dict[int, list[float]] = {1: [], 8: [], 64: []}
            group_ratio: list[float] = []
            for _ in range(rounds):
                for writers, count in sync_counts.items():
                    sync[writers].append(
                        measure(directory, FlushMode.SYNC_FLUSH, size, writers, count, index_process)[0]
                    )
                group_ratio.append(sync[64][-1] / sync[1][-1])
            for writers in sync_counts:
                emit(f"store.append.{label}.sync{writers}.msgs_per_s", median(sync[writers]))
            emit(f"store.append.{label}.sync64.ratio_to_sync1", median(group_ratio))


if __name__ == "__main__":
    main()
