"""EventBridge pattern matching benchmark: the same events against 10, 1,000 and 10,000 rules.

    python bench/eventbridge.py [--quick] [--rounds N]

Rule i (of N) asks for source ``svc-{i % 50}``, detail-type ``type-{i}``, ``detail.level >= i % 10`` and one
more condition on ``detail`` by i % 4: a region prefix, a path wildcard, a CIDR network or an anything-but list.
So every operator family sits in the indexes, many rules share conditions (as real rule sets do), and an event
built for rule j matches rule j when j < N. The events (built before the clock starts) are drawn for rules
0..9,999 with noise fields no pattern names, so the 10-rule run matches few of them and the 10,000-rule run nearly
all: the work the larger sets add is the matching they report.

The ratio events_per_s(10,000 rules) / events_per_s(10 rules) shows whether cost follows the number of rules (a
loop over rules gives about 0.001) or the event (about 1). The machine's speed drifts, so each figure is the median
of `--rounds` runs, and the ratio the median of per-round ratios. Prints key=value lines.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventbridge.matcher import Matcher
from eventbridge.pattern_compiler import compile_pattern

RULE_COUNTS = (10, 1_000, 10_000)
EVENT_RULE_SPACE = 10_000


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


def emit(key: str, value: float) -> None:
    text = f"{value:.3f}" if value < 100 else f"{value:.0f}"
    print(f"{key}={text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5,000 events a run (default 50,000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(6)
    count = 5_000 if args.quick else 50_000
    events = [event(rng.randrange(EVENT_RULE_SPACE), rng) for _ in range(count)]

    matchers: dict[int, Matcher[int]] = {}
    for rules in RULE_COUNTS:
        start = time.perf_counter()
        matchers[rules] = Matcher((i, compile_pattern(rule(i))) for i in range(rules))
        emit(f"eventbridge.compile.{rules}rules.seconds", time.perf_counter() - start)

    rates: dict[int, list[float]] = {rules: [] for rules in RULE_COUNTS}
    ratios: list[float] = []
    for _ in range(args.rounds):
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
