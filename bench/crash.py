"""Crash harness: SIGKILL a store writing under SYNC_FLUSH at random moments; check every acknowledged message.

    python bench/crash.py --kills 20 [--writers 8] [--seed 1] [--dir DIR]

A child process appends from several concurrent writers (asyncio tasks) and, after each acknowledgement,
appends a line to an ack file. The parent kills it with SIGKILL after a random delay, opens the store (which
recovers), and checks that:
  * every acknowledged message reads back byte for byte at its commit-log offset, in its queue, at its queue
    offset (acked_lost counts those that do not);
  * every consume-queue entry points at a whole, CRC-valid record of that topic, queue and queue offset
    (torn_visible counts entries whose record fails its checks, cq_mismatch those pointing at the wrong record);
  * every record in the commit log has its consume-queue entry (cq_missing).
then closes it and starts the next child on the same directory. Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.store.config import FlushMode, StoreConfig
from core.store.log.scan import ScanResult
from core.store.message import Message
from core.store.message_store import MessageStore, PutStatus

SEGMENT_SIZE = 2 * 1024 * 1024
QUEUES = 4
TOPICS = 3


def config(directory: Path) -> StoreConfig:
    return StoreConfig(
        store_dir=directory,
        flush_mode=FlushMode.SYNC_FLUSH,
        segment_size=SEGMENT_SIZE,
        max_message_size=512 * 1024,
        cq_entries_per_file=500,
        index_slots=512,
        index_entries=2048,
        logic_flush_interval_ms=200,
    )


def body_for(writer: int, sequence: int) -> bytes:
    rng = random.Random(writer * 1_000_003 + sequence)
    size = rng.choice((rng.randint(1, 300), rng.randint(300, 4000), rng.randint(20_000, 200_000)))
    return rng.randbytes(size)


def message_for(writer: int, sequence: int) -> Message:
    return Message(
        topic=f"crash{writer % TOPICS}",
        body=body_for(writer, sequence),
        queue_id=sequence % QUEUES,
        properties={"KEYS": f"w{writer}-s{sequence}", "UNIQ_KEY": f"{writer:08X}{sequence:024X}"},
        born_timestamp=int(time.time() * 1000),
    )


# --- the child ---------------------------------------------------------------------------------------------


async def child(directory: Path, writers: int, round_number: int, ack_path: Path) -> None:
    store = MessageStore(config(directory))
    store.open()
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)

    async def write(writer: int) -> None:
        sequence = 0
        while True:
            result = await store.put(message_for(writer, sequence))
            if result.status is PutStatus.PUT_OK:
                line = f"{writer} {sequence} {result.commit_log_offset} {result.queue_id} {result.queue_offset}\n"
                os.write(ack, line.encode())
            sequence += 1

    await asyncio.gather(*(write(round_number * 1000 + w) for w in range(writers)))


# --- the parent --------------------------------------------------------------------------------------------


def read_acks(ack_path: Path) -> list[tuple[int, int, int, int, int]]:
    acks = []
    if not ack_path.exists():
        return acks
    for line in ack_path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:  # the last line may be cut by the kill; it was not an acknowledgement yet
            acks.append(tuple(int(p) for p in parts))  # type: ignore[arg-type]
    return acks


def verify(directory: Path, acks: list[tuple[int, int, int, int, int]]) -> dict[str, int]:
    store = MessageStore(config(directory))
    report = store.open()
    counts = {"acked_lost": 0, "torn_visible": 0, "cq_mismatch": 0, "cq_missing": 0, "unclean": int(not report.clean)}
    try:
        for writer, sequence, offset, queue_id, queue_offset in acks:
            expected = message_for(writer, sequence)
            try:
                got = store.read_message(offset)
            except Exception:
                counts["acked_lost"] += 1
                continue
            entry = store.queues.get(expected.topic, queue_id)
            if (
                got.body != expected.body
                or got.topic != expected.topic
                or got.queue_offset != queue_offset
                or entry is None
                or entry.get(queue_offset) != (offset, got.store_size, 0)
            ):
                counts["acked_lost"] += 1
        pointed = set()
        for queue in store.queues.all():
            for queue_offset in range(queue.min_offset, queue.max_offset):
                entry = queue.get(queue_offset)
                if entry is None:
                    counts["cq_mismatch"] += 1
                    continue
                try:
                    got = store.read_message(entry[0])
                except Exception:
                    counts["torn_visible"] += 1
                    continue
                if (got.topic, got.queue_id, got.queue_offset, got.store_size) != (
                    queue.topic,
                    queue.queue_id,
                    queue_offset,
                    entry[1],
                ):
                    counts["cq_mismatch"] += 1
                pointed.add(entry[0])
        scan = ScanResult(end=0, records=0, corrupt=[], truncated=0)
        for record in store.commit_log.scan(store.commit_log.min_offset, scan):
            if record.commit_log_offset not in pointed:
                counts["cq_missing"] += 1
        counts["torn_visible"] += len(scan.corrupt)
    finally:
        store.close()
    return counts


def run(kills: int, writers: int, seed: int, directory: Path) -> dict[str, int]:
    rng = random.Random(seed)
    ack_path = directory / "acks.txt"
    store_dir = directory / "store"
    totals = {"kills": 0, "acked": 0, "acked_lost": 0, "torn_visible": 0, "cq_mismatch": 0, "cq_missing": 0}
    totals["unclean_recoveries"] = 0
    for round_number in range(kills):
        process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                str(store_dir),
                "--writers",
                str(writers),
                "--round",
                str(round_number),
                "--acks",
                str(ack_path),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        ready = process.stdout.readline()
        if ready.strip() != "ready":
            process.kill()
            raise RuntimeError(f"round {round_number}: child did not start: {ready!r}")
        time.sleep(rng.uniform(0.05, 1.0))
        process.send_signal(signal.SIGKILL)
        process.wait()
        totals["kills"] += 1
        acks = read_acks(ack_path)
        counts = verify(store_dir, acks)
        totals["acked"] = len(acks)
        for key in ("acked_lost", "torn_visible", "cq_mismatch", "cq_missing"):
            totals[key] = max(totals[key], counts[key])
        totals["unclean_recoveries"] += counts["unclean"]
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--quick", action="store_true", help="5 kills")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--acks", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(child(args.child, args.writers, args.round, args.acks))
        return
    kills = 5 if args.quick else args.kills
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        totals = run(kills, args.writers, args.seed, Path(work))
    for key, value in totals.items():
        print(f"store.crash.{key}={value}")


if __name__ == "__main__":
    main()
