"""`NumericIndex`: the numeric ranges of one field path, indexed so that a number finds the ones it lies in by
bisection, whatever their count.

- One-sided bounds (``> b``, ``>= b``, ``< b``, ``<= b``), one sorted array per comparison: the bounds a number
  satisfies are a prefix (``>``, ``>=``) or a suffix (``<``, ``<=``) of the array. Their ids are laid out flat in
  the same order, with the offset where each bound's ids end, so the satisfied ones are one slice.
- Two-sided ranges over the elementary segments their bounds cut the number line into (see `_Segments`).

``numeric =`` is not here: it is an exact value, indexed with the others (`eventbridge.patterns.leaf_index`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Final

from eventbridge.patterns.operators import Range

# Adds to the set the ids of the ranges holding the number.
NumberProbe = Callable[[float, set[int]], None]

# Ranges that nest or overlap heavily would fill the segment lists quadratically (10,000 nested ranges: 10^8
# entries). Past this many entries per range on average, a path's ranges are scanned instead: sorted by lower
# bound, those at or below the number are checked against their upper bound.
SEGMENT_ENTRIES_PER_RANGE: Final = 64


class _Bounds:
    """One-sided bounds, sorted, with the ids of all of them in that order: the ids of `values[:k]` are
    `flat[: ends[k]]`."""

    __slots__ = ("ends", "flat", "values")

    def __init__(self, pairs: list[tuple[float, int]]) -> None:
        grouped: dict[float, list[int]] = {}
        for value, ident in pairs:
            grouped.setdefault(value, []).append(ident)
        self.values = sorted(grouped)
        self.flat: list[int] = []
        self.ends = [0]
        for value in self.values:
            self.flat.extend(grouped[value])
            self.ends.append(len(self.flat))


class _Segments:
    """Two-sided ranges over the elementary segments their bounds cut the number line into: (-inf, b0), [b0],
    (b0, b1), [b1], ... (bk, inf). A number finds its segment by bisection; each segment lists the ranges
    covering it (or, past SEGMENT_ENTRIES_PER_RANGE, the fallback scan described there)."""

    __slots__ = ("bounds", "ids", "lows", "sorted_ranges")

    def __init__(self, ranges: list[tuple[float, bool, float, bool, int]]) -> None:
        self.bounds = sorted({b for low, _, high, _, _ in ranges for b in (low, high)})
        spans = []
        for low, low_closed, high, high_closed, ident in ranges:
            first = 2 * bisect.bisect_left(self.bounds, low) + (1 if low_closed else 2)
            last = 2 * bisect.bisect_left(self.bounds, high) + (1 if high_closed else 0)
            spans.append((first, last, ident))
        self.sorted_ranges = sorted(ranges)
        self.lows = [r[0] for r in self.sorted_ranges]
        self.ids: list[list[int]] | None = None
        if sum(last - first + 1 for first, last, _ in spans) <= SEGMENT_ENTRIES_PER_RANGE * len(ranges):
            ids: list[list[int]] = [[] for _ in range(2 * len(self.bounds) + 1)]
            for first, last, ident in spans:
                for segment in range(first, last + 1):
                    ids[segment].append(ident)
            self.ids = ids

    def lookup(self, number: float) -> list[int]:
        if self.ids is None:
            candidates = self.sorted_ranges[: bisect.bisect_right(self.lows, number)]
            return [
                ident
                for low, low_closed, high, high_closed, ident in candidates
                if (number > low or low_closed) and (number < high or (number == high and high_closed))
            ]
        index = bisect.bisect_left(self.bounds, number)
        if index < len(self.bounds) and self.bounds[index] == number:
            return self.ids[2 * index + 1]
        return self.ids[2 * index]


class NumericIndex:
    """The ranges of one path; `probes()` gives one probe per structure that holds any."""

    __slots__ = ("_ranges",)

    def __init__(self) -> None:
        self._ranges: list[tuple[Range, int]] = []

    def add(self, numeric_range: Range, ident: int) -> None:
        self._ranges.append((numeric_range, ident))

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def probes(self) -> list[NumberProbe]:
        greater: list[tuple[float, int]] = []  # x > b
        greater_equal: list[tuple[float, int]] = []
        less: list[tuple[float, int]] = []  # x < b
        less_equal: list[tuple[float, int]] = []
        between: list[tuple[float, bool, float, bool, int]] = []
        for r, ident in self._ranges:
            if r.lower is not None and r.upper is not None:
                between.append((r.lower, r.lower_closed, r.upper, r.upper_closed, ident))
            elif r.lower is not None:
                (greater_equal if r.lower_closed else greater).append((r.lower, ident))
            elif r.upper is not None:
                (less_equal if r.upper_closed else less).append((r.upper, ident))
        probes: list[NumberProbe] = []
        # The bounds below the number (bisect_left: not those equal to it), at or below it, above it, at or above.
        if greater:
            probes.append(_below(_Bounds(greater), bisect.bisect_left))
        if greater_equal:
            probes.append(_below(_Bounds(greater_equal), bisect.bisect_right))
        if less:
            probes.append(_above(_Bounds(less), bisect.bisect_right))
        if less_equal:
            probes.append(_above(_Bounds(less_equal), bisect.bisect_left))
        if between:
            lookup = _Segments(between).lookup

            def in_between(number: float, out: set[int]) -> None:
                out.update(lookup(number))

            probes.append(in_between)
        return probes


def _below(bounds: _Bounds, cut: Callable[[list[float], float], int]) -> NumberProbe:
    values, flat, ends = bounds.values, bounds.flat, bounds.ends

    def probe(number: float, out: set[int]) -> None:
        out.update(flat[: ends[cut(values, number)]])

    return probe


def _above(bounds: _Bounds, cut: Callable[[list[float], float], int]) -> NumberProbe:
    values, flat, ends = bounds.values, bounds.flat, bounds.ends

    def probe(number: float, out: set[int]) -> None:
        out.update(flat[ends[cut(values, number)] :])

    return probe
