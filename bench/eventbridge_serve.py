"""EventBridge through `mqgate serve`, as a user runs it: N rules, each asking for its own device and delivering
to its own HTTP target, then PutEvents over HTTP in batches of 100; the clock stops when the targets have counted
every event. Run with 10 and with 10,000 rules; the ratio shows whether the rule count costs.

    python bench/eventbridge_serve.py [--quick] [--rounds N]

Each event names one device drawn at random among the N rules' devices, so it matches exactly one rule. A first
pass puts one event per rule (each target's delivery queue gets its first entry: its files are made); it is
reported on its own (`first_pass_events_per_s`), and the measured pass runs on that warm data directory. The
targets are one aiohttp server in a child process (bench/eventbridge.py's), told apart by a query string; it
answers 204 and counts. `mqgate serve` is a child process with its own data directory (ASYNC_FLUSH, the default).
Figures: events per second for 10 and for 10,000 rules, their ratio, and the resident memory of the serve
process after the run with 10,000 rules. The clock starts once the serve process idles after its ready line
(its targets' runners start just after it: a one-time cost at start, not a rate).
Each figure is the median of `--rounds` runs. Prints key=value lines.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.eventbridge import TargetCounter, emit, serve_target  # noqa: E402
from bench.serve_child import START_TIMEOUT_S, ServeChild  # noqa: E402
from mqgate.process import run as run_on_event_loop  # noqa: E402

RULE_COUNTS = (10, 10_000)
PUT_BATCH = 100
# MQGATE_BENCH_PROFILE=FILE runs the serve process under cProfile (bench.serve_child).


# Rules per file: a rule file holds at most 1 MiB.
RULES_PER_FILE = 1_000


def rules_yaml(first: int, count: int, base_url: str) -> str:
    lines = ["rules:"]
    for i in range(first, first + count):
        lines += [
            f"  - name: r{i}",
            f"    pattern: {{type: [sensor.reading], data: {{device: [d{i}]}}}}",
            "    targets:",
            f"      - {{id: t, type: http, url: '{base_url}/events?t={i}', mode: binary}}",
        ]
    return "\n".join(lines) + "\n"


def events(count: int, rules: int, rng: random.Random) -> list[dict[str, object]]:
    return [
        {
            "specversion": "1.0",
            "id": f"e{n}",
            "source": "bench/devices",
            "type": "sensor.reading",
            "datacontenttype": "application/json",
            "data": {"device": f"d{rng.randrange(rules)}", "temperature": rng.random() * 40, "note": "x" * 120},
        }
        for n in range(count)
    ]


class Serve(ServeChild):
    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.url = f"http://{self.ready['http']}"

    def settle(self) -> None:
        """Wait until the process idles (under 5% of a core over half a second): with thousands of targets, each
        one's runner starts after the ready line, a one-time cost the measurement must not count."""
        deadline = time.monotonic() + START_TIMEOUT_S
        before = self.cpu_s()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.cpu_s()
            if now - before < 0.025:
                return
            before = now


async def put_all(url: str, batches: list[bytes], counter: TargetCounter, total: int) -> float:
    headers = {"Content-Type": "application/cloudevents-batch+json"}
    async with aiohttp.ClientSession() as session:
        await counter.expect(total)
        started = time.perf_counter()
        for body in batches:
            async with session.post(f"{url}/buses/default/events", data=body, headers=headers) as response:
                answer = await response.json()
                assert response.status == 200 and answer["FailedEntryCount"] == 0, answer
        put_done = time.perf_counter() - started
        counted = await counter.counted()
        elapsed = time.perf_counter() - started
        if os.environ.get("MQGATE_BENCH_VERBOSE"):
            print(f"# puts took {put_done:.2f} s of {elapsed:.2f} s", file=sys.stderr)
    assert counted == total, (counted, total)
    return total / elapsed


def run(work: Path, rules: int, count: int, base_url: str) -> tuple[float, float, float]:
    """(first pass events/s, steady events/s, resident MB) for `rules` rules."""
    data_dir = work / f"serve-{rules}-{time.monotonic_ns()}"
    (data_dir / "rules").mkdir(parents=True)
    for first in range(0, rules, RULES_PER_FILE):
        text = rules_yaml(first, min(RULES_PER_FILE, rules - first), base_url)
        (data_dir / "rules" / f"bench-{first}.yaml").write_text(text)
    rng = random.Random(rules)
    # The first pass puts one event per rule: each target's delivery queue gets its first entry (its files are
    # made then); the measured pass runs on a warm data directory, as a service that has been up for a while.
    first_pass = [{**event, "id": f"w{n}", "data": {**event["data"], "device": f"d{n}"}}  # type: ignore[dict-item]
                  for n, event in enumerate(events(rules, rules, rng))]  # fmt: skip
    sample = events(count, rules, rng)
    serve = Serve(data_dir)
    serve.settle()
    try:

        async def measure(items: list[dict[str, object]]) -> float:
            batches = [json.dumps(items[i : i + PUT_BATCH]).encode() for i in range(0, len(items), PUT_BATCH)]
            counter = TargetCounter(base_url)
            try:
                return await put_all(serve.url, batches, counter, len(items))
            finally:
                await counter.close()

        cold = run_on_event_loop(measure(first_pass))
        serve.settle()
        rate = run_on_event_loop(measure(sample))
        return cold, rate, serve.rss_mb()
    finally:
        serve.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 events a run (10,000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    serve_rounds(2_000 if args.quick else 10_000, args.rounds)


def serve_rounds(count: int, rounds: int) -> None:
    spawn = multiprocessing.get_context("spawn")
    control, child_end = spawn.Pipe()
    server = spawn.Process(target=serve_target, args=(child_end,), name="eventbridge bench targets")
    server.start()
    child_end.close()
    rates: dict[int, list[float]] = {rules: [] for rules in RULE_COUNTS}
    first_rates: dict[int, list[float]] = {rules: [] for rules in RULE_COUNTS}
    rss: list[float] = []
    ratios: list[float] = []
    try:
        base_url = f"http://127.0.0.1:{control.recv()}"
        with tempfile.TemporaryDirectory(prefix="mqgate-bench-eventbridge-serve-") as work:
            for _ in range(rounds):
                for rules in RULE_COUNTS:
                    cold, rate, memory = run(Path(work), rules, count, base_url)
                    first_rates[rules].append(cold)
                    rates[rules].append(rate)
                    if rules == RULE_COUNTS[-1]:
                        rss.append(memory)
                ratios.append(rates[RULE_COUNTS[-1]][-1] / rates[RULE_COUNTS[0]][-1])
    finally:
        control.close()
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
    for rules in RULE_COUNTS:
        emit(f"eventbridge.serve.first_pass_events_per_s.{rules}rules", statistics.median(first_rates[rules]))
    for rules in RULE_COUNTS:
        emit(f"eventbridge.serve.events_per_s.{rules}rules", statistics.median(rates[rules]))
    emit(f"eventbridge.serve.ratio_{RULE_COUNTS[-1]}_to_{RULE_COUNTS[0]}_rules", statistics.median(ratios))
    emit(f"eventbridge.serve.rss_mb.{RULE_COUNTS[-1]}rules", statistics.median(rss))


if __name__ == "__main__":
    main()
