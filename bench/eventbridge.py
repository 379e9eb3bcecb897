"""EventBridge benchmarks: pattern matching against 10, 1,000 and 10,000 rules, and delivery to an HTTP target.

    python bench/eventbridge.py [--quick] [--rounds N] [--only match|deliver|serve]

Matching: the same events against 10, 1,000 and 10,000 rules.

Rule i (of N) asks for source ``svc-{i % 50}``, detail-type ``type-{i}``, ``detail.level >= i % 10`` and one
more condition on ``detail`` by i % 4: a region prefix, a path wildcard, a CIDR network or an anything-but list.
So every operator family sits in the indexes, many rules share conditions (as real rule sets do), and an event
built for rule j matches rule j when j < N. The events (built before the clock starts) are drawn for rules
0..9,999 with noise fields no pattern names, so the 10-rule run matches few of them and the 10,000-rule run nearly
all: the work the larger sets add is the matching they report.

The ratio events_per_s(10,000 rules) / events_per_s(10 rules) shows whether cost follows the number of rules (a
loop over rules gives about 0.001) or the event (about 1). The machine's speed drifts, so each figure is the median
of `--rounds` runs, and the ratio the median of per-round ratios.

Delivery: N CloudEvents (structured JSON form, about 200 bytes of JSON data each, built before the clock starts)
go through mqgate's path: `EventBridgeRuntime.buses.put("default", ...)` in batches of PUT_BATCH appends them to
the bus topic of an in-process broker (a store in a temporary directory, ASYNC_FLUSH), and the one rule, matching
every event, delivers them with `HttpTargetClient` to its one HTTP target: binary mode, ORIGINAL transform (the
body is the whole event's JSON), concurrency 8. The clock starts before the first put and stops when the target
has counted all N. The baseline, in the same round: a bare aiohttp loop POSTing the same bodies with the same
CloudEvents binary-mode headers to the same kind of target, 8 requests in flight on one ClientSession, clock
stopped the same way. The target is one aiohttp server (answers 204, counts requests) in a child process, so
it does not share the measured event loop; both measurements use it. The benchmark's loop is mqgate's (uvloop
when installed), with serve's interpreter settings (GC threshold, GIL switch interval). Each figure is the median
of `--rounds` runs, the ratio the median of per-round ratios.

End to end (`serve`): PutEvents through `mqgate serve` with 10 and 10,000 rules, each to its own target
(bench/eventbridge_serve.py).

Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compiled_report import compiled_state
from core.broker import Broker
from core.store.config import FlushMode, StoreConfig
from core.store.message_store import MessageStore
from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.matcher import Matcher
from eventbridge.rules.rule_file import parse_rule_file
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.targets.http_target import HttpTargetClient, outgoing_request
from mqgate.process import run as run_on_event_loop
from mqgate.server import apply_interpreter_settings

RULE_COUNTS = (10, 1_000, 10_000)
EVENT_RULE_SPACE = 10_000

# Events per runtime.buses.put: a producer batching its events, as the HTTP ingress and connectors do.
PUT_BATCH = 100
# Requests in flight, for the target (its `concurrency`, the rule model's default) and for the baseline.
CONCURRENCY = 8
# Nothing should take this long; a stuck delivery fails the run instead of hanging it.
DELIVERY_TIMEOUT_S = int(os.environ.get("MQGATE_BENCH_DELIVERY_TIMEOUT_S", "300"))


def rules_yaml(url: str) -> str:
    return f"""
rules:
  - name: bench
    pattern: {{type: [sensor.reading]}}
    targets:
      - id: sink
        type: http
        url: {url}
        mode: binary
        concurrency: {CONCURRENCY}
        transform: {{kind: ORIGINAL}}
"""


def rule(i: int) -> dict[str, Any]:
    detail: dict[str, Any] = {"level": [{"numeric": [">=", i % 10]}]}
    kind = i % 4
    if kind == 0:
        detail["region"] = [{"prefix": f"eu-{i % 7}-"}]
    elif kind == 1:
        detail["path"] = [{"wildcard": f"/logs/{i}/*.json"}]
    elif kind == 2:
        detail["ip"] = [{"cidr": f"10.{i % 256}.0.0/16"}]
    else:
        detail["status"] = [{"anything-but": ["error", f"x{i % 5}"]}]
    return {"source": [f"svc-{i % 50}"], "detail-type": [f"type-{i}"], "detail": detail}


def event(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "version": "0",
        "id": f"{rng.getrandbits(64):016x}",
        "source": f"svc-{i % 50}",
        "detail-type": f"type-{i}",
        "time": "2026-11-22T15:00:00Z",
        "resources": [f"arn:mqgate:thing/{i}", "arn:mqgate:bus/default"],
        "detail": {
            "level": 9,
            "region": f"eu-{i % 7}-west",
            "path": f"/logs/{i}/part-{rng.randrange(100)}.json",
            "ip": f"10.{i % 256}.{rng.randrange(256)}.{rng.randrange(256)}",
            "status": "ok",
            "payload": {"temperature": rng.random() * 40, "tags": ["a", "b", "c"], "note": "x" * 40},
        },
    }


def events_per_s(matcher: Matcher[int], events: list[dict[str, Any]]) -> tuple[float, int]:
    matches = matcher.matches
    matched = 0
    start = time.perf_counter()
    for item in events:
        matched += len(matches(item))
    return len(events) / (time.perf_counter() - start), matched


# --- delivery --------------------------------------------------------------------------------------------------


def cloud_event(n: int, rng: random.Random) -> dict[str, Any]:
    data = {
        "room": f"building-{n % 7}/floor-{n % 5}/room-{n % 100}",
        "temperature": round(rng.uniform(-5, 35), 2),
        "humidity": round(rng.uniform(20, 80), 1),
        "battery": rng.randrange(100),
        "sensor": f"{rng.getrandbits(64):016x}",
        "tags": ["hvac", "bench", f"zone-{n % 9}"],
        "note": "x" * 30,
    }
    return {
        "specversion": "1.0",
        "id": f"{n:08d}-{rng.getrandbits(64):016x}",
        "source": "mqgate/bench",
        "type": "sensor.reading",
        "subject": f"room/{n % 100}",
        "time": "2026-11-22T15:00:00Z",
        "datacontenttype": "application/json",
        "data": data,
    }


def binary_request(event: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    """What the target receives for `event` in binary mode with the ORIGINAL transform: ce-* headers and the
    whole event's JSON as the body. Written out here so the baseline does not run mqgate's code."""
    headers = {f"ce-{name}": event[name] for name in ("id", "source", "type", "subject", "time", "specversion")}
    headers["content-type"] = "application/json"
    headers["Accept-Encoding"] = "identity"
    return headers, json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def serve_target(control: Connection) -> None:
    """The target, in a child process: POST /events answers 204 and counts; POST /expect (body: N) resets the
    count; GET /wait answers once N requests have been counted. Sends its port, serves until `control` closes."""
    run_on_event_loop(_serve_target(control))


async def _serve_target(control: Connection) -> None:
    count, expected = 0, 0
    reached = asyncio.Event()

    async def events(request: web.Request) -> web.Response:
        nonlocal count
        await request.read()
        count += 1
        if count >= expected:
            reached.set()
        return web.Response(status=204)

    async def expect(request: web.Request) -> web.Response:
        nonlocal count, expected
        count, expected = 0, int(await request.text())
        reached.clear()
        return web.Response(status=204)

    async def wait(request: web.Request) -> web.Response:
        await reached.wait()
        return web.Response(text=str(count))

    app = web.Application()
    app.router.add_post("/events", events)
    app.router.add_post("/expect", expect)
    app.router.add_get("/wait", wait)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    control.send(runner.addresses[0][1])
    closed = asyncio.Event()
    asyncio.get_running_loop().add_reader(control.fileno(), closed.set)
    await closed.wait()
    await runner.cleanup()


class TargetCounter:
    """The measuring side's view of the target: arm it for N requests, then wait until it has counted them."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.session = aiohttp.ClientSession()  # its own connection: the measured session only carries events
        self._waiting: asyncio.Task[str] | None = None

    async def expect(self, count: int) -> None:
        async with self.session.post(f"{self.base_url}/expect", data=str(count)) as response:
            response.raise_for_status()
        self._waiting = asyncio.get_running_loop().create_task(self._wait())
        await asyncio.sleep(0.05)  # let the /wait request reach the server before the clock starts

    async def _wait(self) -> str:
        async with self.session.get(f"{self.base_url}/wait") as response:
            return await response.text()

    async def counted(self) -> int:
        assert self._waiting is not None
        async with asyncio.timeout(DELIVERY_TIMEOUT_S):
            return int(await self._waiting)

    async def close(self) -> None:
        await self.session.close()


async def raw_post_rate(base_url: str, requests: list[tuple[dict[str, str], bytes]]) -> float:
    counter = TargetCounter(base_url)
    url = f"{base_url}/events"
    pending: Iterator[tuple[dict[str, str], bytes]] = iter(requests)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def worker() -> None:
            for headers, body in pending:
                async with session.post(url, data=body, headers=headers, allow_redirects=False) as response:
                    await response.read()
                    assert response.status == 204, response.status

        try:
            await counter.expect(len(requests))
            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            counted = await counter.counted()
            elapsed = time.perf_counter() - started
        finally:
            await counter.close()
    assert counted == len(requests), (counted, len(requests))
    return len(requests) / elapsed


async def deliver_rate(directory: Path, base_url: str, events: list[dict[str, Any]]) -> float:
    rules = directory / "rules"
    rules.mkdir(parents=True)
    (rules / "bench.yaml").write_text(rules_yaml(f"{base_url}/events"))
    store = MessageStore(StoreConfig(store_dir=directory / "store", flush_mode=FlushMode.ASYNC_FLUSH))
    store.open()
    broker = Broker(store, directory / "config")
    client = HttpTargetClient()
    counter = TargetCounter(base_url)
    runtime: EventBridgeRuntime | None = None
    try:
        await broker.start()
        runtime = EventBridgeRuntime(broker, rules, client)
        await runtime.start()
        (task,) = runtime.target_tasks().values()
        assert runtime.target_tasks().keys() == {TargetKey("default", "bench", "sink")}
        batches = [events[i : i + PUT_BATCH] for i in range(0, len(events), PUT_BATCH)]
        await counter.expect(len(events))
        started = time.perf_counter()
        for batch in batches:
            await runtime.buses.put("default", batch)
        counted = await counter.counted()
        elapsed = time.perf_counter() - started
        assert counted == len(events), (counted, len(events))
        assert (task.stats.delivered, task.stats.retries, task.stats.dead_lettered) == (len(events), 0, 0), task.stats
        return len(events) / elapsed
    finally:
        if runtime is not None:
            await runtime.close()
        await counter.close()
        await client.close()
        await broker.close()
        store.close()


def deliver(count: int, rounds: int) -> None:
    rng = random.Random(7)
    events = [cloud_event(n, rng) for n in range(count)]
    requests = [binary_request(item) for item in events]
    # The baseline must send what mqgate sends, or the ratio compares different requests.
    (rule,) = parse_rule_file("bench.yaml", rules_yaml("http://127.0.0.1:1/events"))
    sent = outgoing_request(rule.targets[0], events[0])
    assert (dict(sent.headers), sent.body) == requests[0], (sent, requests[0])
    spawn = multiprocessing.get_context("spawn")
    control, child_end = spawn.Pipe()
    server = spawn.Process(target=serve_target, args=(child_end,), name="eventbridge bench target")
    server.start()
    child_end.close()
    try:
        base_url = f"http://127.0.0.1:{control.recv()}"
        mqgate_rates: list[float] = []
        raw_rates: list[float] = []
        ratios: list[float] = []
        with tempfile.TemporaryDirectory(prefix="mqgate-bench-eventbridge-") as work:
            for round_ in range(rounds):
                raw_rates.append(run_on_event_loop(raw_post_rate(base_url, requests)))
                directory = Path(work) / f"round-{round_}"
                mqgate_rates.append(run_on_event_loop(deliver_rate(directory, base_url, events)))
                ratios.append(mqgate_rates[-1] / raw_rates[-1])
    finally:
        control.close()
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
    emit("eventbridge.deliver.events_per_s", statistics.median(mqgate_rates))
    emit("eventbridge.deliver.raw_post_per_s", statistics.median(raw_rates))
    emit("eventbridge.deliver.ratio_to_raw_post", statistics.median(ratios))


def emit(key: str, value: float) -> None:
    text = f"{value:.3f}" if value < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="5,000 events a matching run, 3,000 a delivery run (50,000; 20,000)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("match", "deliver", "serve"), help="run one part (default: all)")
    args = parser.parse_args()
    apply_interpreter_settings()  # mqgate serve's: GC threshold, GIL switch interval
    # The `serve` part's `mqgate serve` runs from this tree and venv: it imports the same files this process finds.
    print(f"eventbridge.compiled={compiled_state()}", flush=True)
    if args.only in (None, "match"):
        match(5_000 if args.quick else 50_000, args.rounds)
    if args.only in (None, "deliver"):
        deliver(3_000 if args.quick else 20_000, args.rounds)
    if args.only in (None, "serve"):
        from bench.eventbridge_serve import serve_rounds  # it imports this module's target

        serve_rounds(2_000 if args.quick else 10_000, args.rounds)


def match(count: int, rounds: int) -> None:
    rng = random.Random(6)
    events = [event(rng.randrange(EVENT_RULE_SPACE), rng) for _ in range(count)]

    matchers: dict[int, Matcher[int]] = {}
    for rules in RULE_COUNTS:
        start = time.perf_counter()
        matchers[rules] = Matcher((i, compile_pattern(rule(i))) for i in range(rules))
        emit(f"eventbridge.compile.{rules}rules.seconds", time.perf_counter() - start)

    rates: dict[int, list[float]] = {rules: [] for rules in RULE_COUNTS}
    ratios: list[float] = []
    for _ in range(rounds):
        for rules in RULE_COUNTS:
            rate, matched = events_per_s(matchers[rules], events)
            rates[rules].append(rate)
            if rules == RULE_COUNTS[-1]:
                # Every event was built for one rule of the largest set: it must match exactly that one.
                assert matched == count, (matched, count)
        ratios.append(rates[RULE_COUNTS[-1]][-1] / rates[RULE_COUNTS[0]][-1])
    for rules in RULE_COUNTS:
        emit(f"eventbridge.match.events_per_s.{rules}rules", statistics.median(rates[rules]))
    emit(f"eventbridge.match.ratio_{RULE_COUNTS[-1]}_to_{RULE_COUNTS[0]}_rules", statistics.median(ratios))


if __name__ == "__main__":
    main()
