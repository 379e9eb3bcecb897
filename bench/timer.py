"""Timer benchmark: scheduling timer messages against plain sends, and how late due messages reach consumers.

    python bench/timer.py [--quick] [--rounds N]

* schedule: N messages of 128 B sent with a Producer, each with TIMER_DELIVER_MS spread evenly over the next hour
  (parked in the timer topic and entered into the wheel), clock stopped when the last is dispatched; the baseline
  is the same N messages sent without a timer, to the same broker, in the same round. Ratio: timer / plain.
* fire lag: messages due 10,000 per second over the next seconds (scheduled before the first is due), read by four
  pull loops (one per queue, long polling) as they arrive; the lag of a message is the time it was read minus
  its TIMER_DELIVER_MS. p50, p99 and max of all messages.
In process, on the broker core with ASYNC_FLUSH (`mqgate serve`'s default store), uvloop if installed. Each
figure is the median of --rounds runs. Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import Broker, MessageStore, Producer, StoreConfig
from mqgate.process import run as run_on_event_loop

BODY = os.urandom(128)
QUEUES = 4


async def open_broker(directory: Path) -> Broker:
    store = MessageStore(StoreConfig(store_dir=directory / "store"))
    store.open()
    broker = Broker(store, directory / "config")
    await broker.start()
    for topic in ("plain", "timed"):
        broker.create_topic(topic, queue_nums=QUEUES)
    return broker


async def close_broker(broker: Broker, directory: Path) -> None:
    await broker.close()
    broker.store.close()
    shutil.rmtree(directory)


async def schedule_rates(directory: Path, count: int) -> tuple[float, float]:
    broker = await open_broker(directory)
    producer = Producer(broker)
    try:
        started = time.perf_counter()
        for n in range(count):
            await producer.send("plain", BODY)
            if n % 1024 == 0:
                await asyncio.sleep(0)
        await broker.wait_visible(timeout_s=600)
        plain = count / (time.perf_counter() - started)
        now = broker.clock.now_ms()
        hour_ms = 3600_000
        started = time.perf_counter()
        for n in range(count):
            due = now + 60_000 + n * hour_ms // count
            await producer.send("timed", BODY, properties={"TIMER_DELIVER_MS": str(due)})
            if n % 1024 == 0:
                await asyncio.sleep(0)
        await broker.wait_visible(timeout_s=600)
        timed = count / (time.perf_counter() - started)
        if len(broker.timers.wheel) != count:
            raise AssertionError(f"{len(broker.timers.wheel)} of {count} timer messages in the wheel")
        return timed, plain
    finally:
        await close_broker(broker, directory)


async def fire_lags(directory: Path, seconds: int, per_second: int) -> list[float]:
    broker = await open_broker(directory)
    producer = Producer(broker)
    total = seconds * per_second
    lags: list[float] = []
    try:
        lead_ms = 2000 + total // 20  # scheduling must be over before the first is due
        first = (broker.clock.now_ms() // 1000 + 1) * 1000 + lead_ms
        for n in range(total):
            due = first + n * 1000 // per_second
            await producer.send("timed", BODY, properties={"TIMER_DELIVER_MS": str(due)})
            if n % 1024 == 0:
                await asyncio.sleep(0)
        if broker.clock.now_ms() >= first:
            raise AssertionError("scheduling took longer than the lead; raise lead_ms")

        async def read(queue_id: int) -> None:
            offset = 0
            while len(lags) < total:
                got = await broker.pull("bench", "timed", queue_id, offset, 256, long_poll_ms=500)
                now = time.time_ns() / 1e6
                lags.extend(now - int(m.properties["TIMER_DELIVER_MS"]) for m in got.messages)
                offset = got.next_begin_offset

        await asyncio.wait_for(
            asyncio.gather(*(read(q) for q in range(QUEUES))), timeout=lead_ms / 1000 + seconds + 120
        )
        return lags
    finally:
        await close_broker(broker, directory)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30,000 scheduled and 3 s of firing a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent.parent / ".bench-tmp")
    args = parser.parse_args()
    count = 30_000 if args.quick else 100_000
    seconds = 3 if args.quick else 10
    args.dir.mkdir(parents=True, exist_ok=True)
    timed, plain, ratios, p50, p99, worst = [], [], [], [], [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        for round_ in range(args.rounds):
            t, p = run_on_event_loop(schedule_rates(Path(work) / f"s{round_}", count))
            timed.append(t)
            plain.append(p)
            ratios.append(t / p)
            lags = run_on_event_loop(fire_lags(Path(work) / f"f{round_}", seconds, 10_000))
            p50.append(percentile(lags, 0.50))
            p99.append(percentile(lags, 0.99))
            worst.append(max(lags))
    print(f"timer.schedule.msgs_per_s={statistics.median(timed):.0f}")
    print(f"timer.plain_send.msgs_per_s={statistics.median(plain):.0f}")
    print(f"timer.schedule.ratio_to_send={statistics.median(ratios):.3f}")
    print(f"timer.fire_lag_ms.p50={statistics.median(p50):.0f}")
    print(f"timer.fire_lag_ms.p99={statistics.median(p99):.0f}")
    print(f"timer.fire_lag_ms.max={statistics.median(worst):.0f}")


if __name__ == "__main__":
    main()
