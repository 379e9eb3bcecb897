"""`Matcher`: many compiled patterns indexed together, matched against an event at a cost that follows the event.

Built once from (rule id, pattern) pairs, after aws/event-ruler's machine:

- The field paths of all patterns form a trie; an event is walked only along keys that some pattern names, so
  unrelated parts of the event cost nothing.
- Each pattern path has a `LeafIndex`. Exact values (and ``numeric =``) sit in a hash map; prefixes, suffixes and
  wildcards (by their text before the first ``*``) in hash maps probed once per distinct length; one-sided numeric
  bounds in sorted arrays (a bisect yields the satisfied ones as a slice); two-sided ranges in precomputed
  elementary segments; CIDR networks in one hash map per prefix length. A leaf value therefore costs a few hash
  probes whatever the number of rules, plus the conditions it satisfies.
- ``anything-but`` is indexed by what it excludes: the satisfied ones are all those at the path minus those the
  value hits (they match nearly every value anyway, so the work is the output).
- Identical conditions (same path, same matchers) are shared between rules. Each alternative of a rule (its
  ``$or`` expanded) is registered under its most selective condition (the one the fewest alternatives share), so
  only alternatives whose key condition holds are checked in full; an alternative made only of conditions that
  can hold on a missing field (``exists: false``) is checked for every event.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from eventbridge.pattern_compiler import CompiledPattern, Path, compile_pattern
from eventbridge.pattern_operators import (
    AnythingBut,
    Cidr,
    EqualsIgnoreCase,
    Exact,
    Excluded,
    Exists,
    Numeric,
    Operator,
    Prefix,
    PrefixIgnoreCase,
    Suffix,
    SuffixIgnoreCase,
    Wildcard,
    exact_key,
    ip_number,
    is_number,
)

RuleId = TypeVar("RuleId", bound=Hashable)


class _Bounds:
    """One-sided numeric bounds, sorted, each with the ids it stands for."""

    __slots__ = ("ids", "values")

    def __init__(self, pairs: list[tuple[float, int]]) -> None:
        grouped: dict[float, list[int]] = {}
        for value, ident in pairs:
            grouped.setdefault(value, []).append(ident)
        self.values = sorted(grouped)
        self.ids = [grouped[value] for value in self.values]


# Ranges that nest or overlap heavily would fill the segment lists quadratically (10,000 nested ranges: 10^8
# entries). Past this many entries per range on average, a path's ranges are scanned instead: sorted by lower
# bound, those at or below the number are checked against their upper bound.
SEGMENT_ENTRIES_PER_RANGE = 64


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


@dataclass(slots=True)
class LeafIndex:
    """The matchers of one path, indexed; `collect(value, out)` adds the ids of those accepting `value`."""

    exact: dict[object, list[int]] = field(default_factory=dict)
    folded: dict[str, list[int]] = field(default_factory=dict)
    prefixes: dict[str, list[int]] = field(default_factory=dict)
    suffixes: dict[str, list[int]] = field(default_factory=dict)
    folded_prefixes: dict[str, list[int]] = field(default_factory=dict)
    folded_suffixes: dict[str, list[int]] = field(default_factory=dict)
    wildcards: dict[str, list[tuple[Wildcard, int]]] = field(default_factory=dict)
    cidrs: dict[tuple[int, int], dict[int, list[int]]] = field(default_factory=dict)  # (version, prefixlen)
    _numeric: list[tuple[Numeric, int]] = field(default_factory=list)
    # Filled by freeze(): distinct lengths to probe, numeric structures.
    prefix_lengths: list[int] = field(default_factory=list)
    suffix_lengths: list[int] = field(default_factory=list)
    folded_prefix_lengths: list[int] = field(default_factory=list)
    folded_suffix_lengths: list[int] = field(default_factory=list)
    wildcard_lengths: list[int] = field(default_factory=list)
    greater: _Bounds | None = None  # x > b
    greater_equal: _Bounds | None = None
    less: _Bounds | None = None  # x < b
    less_equal: _Bounds | None = None
    between: _Segments | None = None
    has_string_index: bool = False
    has_numbers: bool = False

    def add(self, matcher: Excluded | PrefixIgnoreCase | SuffixIgnoreCase | Numeric | Cidr, ident: int) -> None:
        match matcher:
            case Exact(key=key):
                self.exact.setdefault(key, []).append(ident)
            case EqualsIgnoreCase(folded=folded):
                self.folded.setdefault(folded, []).append(ident)
            case Prefix(text=text):
                self.prefixes.setdefault(text, []).append(ident)
            case Suffix(text=text):
                self.suffixes.setdefault(text, []).append(ident)
            case PrefixIgnoreCase(folded=folded):
                self.folded_prefixes.setdefault(folded, []).append(ident)
            case SuffixIgnoreCase(folded=folded):
                self.folded_suffixes.setdefault(folded, []).append(ident)
            case Wildcard(literal_prefix=literal):
                self.wildcards.setdefault(literal, []).append((matcher, ident))
            case Numeric(range=r) if r.lower is not None and r.lower == r.upper:
                self.exact.setdefault(r.lower, []).append(ident)  # `numeric =` is an exact number
            case Numeric():
                self._numeric.append((matcher, ident))
            case Cidr(network=network):
                by_network = self.cidrs.setdefault((network.version, network.prefixlen), {})
                key = int(network.network_address) >> (network.max_prefixlen - network.prefixlen)
                by_network.setdefault(key, []).append(ident)

    def freeze(self) -> None:
        self.prefix_lengths = sorted({len(text) for text in self.prefixes})
        self.suffix_lengths = sorted({len(text) for text in self.suffixes})
        self.wildcard_lengths = sorted({len(text) for text in self.wildcards})
        self.folded_prefix_lengths = sorted({len(text) for text in self.folded_prefixes})
        self.folded_suffix_lengths = sorted({len(text) for text in self.folded_suffixes})
        self.has_string_index = bool(
            self.folded
            or self.prefixes
            or self.suffixes
            or self.folded_prefixes
            or self.folded_suffixes
            or self.wildcards
            or self.cidrs
        )
        greater: list[tuple[float, int]] = []
        greater_equal: list[tuple[float, int]] = []
        less: list[tuple[float, int]] = []
        less_equal: list[tuple[float, int]] = []
        between: list[tuple[float, bool, float, bool, int]] = []
        for numeric, ident in self._numeric:
            r = numeric.range
            if r.lower is not None and r.upper is not None:
                between.append((r.lower, r.lower_closed, r.upper, r.upper_closed, ident))
            elif r.lower is not None:
                (greater_equal if r.lower_closed else greater).append((r.lower, ident))
            elif r.upper is not None:
                (less_equal if r.upper_closed else less).append((r.upper, ident))
        self.greater = _Bounds(greater) if greater else None
        self.greater_equal = _Bounds(greater_equal) if greater_equal else None
        self.less = _Bounds(less) if less else None
        self.less_equal = _Bounds(less_equal) if less_equal else None
        self.between = _Segments(between) if between else None
        self.has_numbers = bool(self._numeric)

    def collect(self, value: object, out: set[int]) -> None:
        if self.exact:
            hits = self.exact.get(exact_key(value))
            if hits:
                out.update(hits)
        if isinstance(value, str):
            if self.has_string_index:
                self._collect_string(value, out)
        elif self.has_numbers and is_number(value):
            self._collect_number(value, out)  # type: ignore[arg-type]

    def _collect_string(self, value: str, out: set[int]) -> None:
        if self.folded:
            hits = self.folded.get(value.casefold())
            if hits:
                out.update(hits)
        _collect_affixes(value, self.prefixes, self.prefix_lengths, self.suffixes, self.suffix_lengths, out)
        if self.folded_prefixes or self.folded_suffixes:
            _collect_affixes(
                value.casefold(),
                self.folded_prefixes,
                self.folded_prefix_lengths,
                self.folded_suffixes,
                self.folded_suffix_lengths,
                out,
            )
        size = len(value)
        for length in self.wildcard_lengths:
            if length > size:
                break
            candidates = self.wildcards.get(value[:length])
            if candidates:
                out.update(ident for wildcard, ident in candidates if wildcard.regex.fullmatch(value) is not None)
        if self.cidrs:
            address = ip_number(value)
            if address is not None:
                address_version, number = address
                for (version, prefixlen), by_network in self.cidrs.items():
                    if version == address_version:
                        hits = by_network.get(number >> ((32 if version == 4 else 128) - prefixlen))
                        if hits:
                            out.update(hits)

    def _collect_number(self, number: float, out: set[int]) -> None:
        if self.greater is not None:  # bounds below the number
            for ids in self.greater.ids[: bisect.bisect_left(self.greater.values, number)]:
                out.update(ids)
        if self.greater_equal is not None:
            for ids in self.greater_equal.ids[: bisect.bisect_right(self.greater_equal.values, number)]:
                out.update(ids)
        if self.less is not None:  # bounds above the number
            for ids in self.less.ids[bisect.bisect_right(self.less.values, number) :]:
                out.update(ids)
        if self.less_equal is not None:
            for ids in self.less_equal.ids[bisect.bisect_left(self.less_equal.values, number) :]:
                out.update(ids)
        if self.between is not None:
            out.update(self.between.lookup(number))


def _collect_affixes(
    value: str,
    prefixes: dict[str, list[int]],
    prefix_lengths: list[int],
    suffixes: dict[str, list[int]],
    suffix_lengths: list[int],
    out: set[int],
) -> None:
    """One hash probe per distinct prefix (suffix) length at the path, however many rules hold one."""
    size = len(value)
    for length in prefix_lengths:
        if length > size:
            break
        hits = prefixes.get(value[:length])
        if hits:
            out.update(hits)
    for length in suffix_lengths:
        if length > size:
            break
        hits = suffixes.get(value[size - length :])
        if hits:
            out.update(hits)


class _Node:
    """One field path: its children in the trie and the conditions on its leaf values."""

    __slots__ = (
        "children",
        "excluded",
        "exists",
        "has_conditions",
        "ident",
        "negated",
        "negated_to_condition",
        "positive",
    )

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.children: dict[str, _Node] = {}
        self.positive: LeafIndex | None = None  # condition ids
        self.excluded: LeafIndex | None = None  # anything-but term ids, under what each excludes
        self.negated: set[int] = set()  # all anything-but term ids at this path
        self.negated_to_condition: dict[int, int] = {}
        self.exists: list[int] = []  # condition ids holding `exists: true`
        self.has_conditions = False  # some pattern ends here (else the node only leads to its children)

    def collect(self, value: object, satisfied: set[int]) -> None:
        if self.positive is not None:
            self.positive.collect(value, satisfied)
        if self.negated:
            hit: set[int] = set()
            if self.excluded is not None:
                self.excluded.collect(value, hit)
            satisfied.update(self.negated_to_condition[term] for term in self.negated if term not in hit)


@dataclass(slots=True, frozen=True)
class _Alternative(Generic[RuleId]):
    rule_id: RuleId
    required: tuple[int, ...]  # condition ids that must be satisfied by some leaf value
    absent_or: tuple[tuple[int, int], ...]  # (condition id, node id): satisfied, or the field has no leaf value


class Matcher(Generic[RuleId]):
    """Rules compiled together; `matches(event)` returns the ids of the rules whose pattern matches."""

    def __init__(self, rules: Iterable[tuple[RuleId, CompiledPattern | Mapping[str, object]]]) -> None:
        self._root = _Node(0)
        self._node_count = 1
        self._conditions: dict[tuple[Path, frozenset[Operator]], int] = {}
        self._condition_node: list[_Node] = []
        self._absent_capable: list[bool] = []
        self._term_count = 0
        alternatives: list[_Alternative[RuleId]] = []
        self.rule_count = 0
        for rule_id, pattern in rules:
            compiled = pattern if isinstance(pattern, CompiledPattern) else compile_pattern(pattern)
            self.rule_count += 1
            for conjunction in compiled.alternatives:
                ids = sorted({self._condition(condition.path, condition.matchers) for condition in conjunction})
                required = tuple(c for c in ids if not self._absent_capable[c])
                absent_or = tuple((c, self._condition_node[c].ident) for c in ids if self._absent_capable[c])
                alternatives.append(_Alternative(rule_id, required, absent_or))
        self._freeze(self._root)
        uses: dict[int, int] = {}
        for alternative in alternatives:
            for c in alternative.required:
                uses[c] = uses.get(c, 0) + 1
        self._by_key: dict[int, list[_Alternative[RuleId]]] = {}
        self._always: list[_Alternative[RuleId]] = []
        for alternative in alternatives:
            if alternative.required:
                key = min(alternative.required, key=uses.__getitem__)
                self._by_key.setdefault(key, []).append(alternative)
            else:
                self._always.append(alternative)

    def matches(self, event: Mapping[str, object]) -> set[RuleId]:
        if not isinstance(event, Mapping):
            raise TypeError(f"an event must be a JSON object (a mapping), not {type(event).__name__}")
        satisfied: set[int] = set()
        present: set[int] = set()
        self._walk(event, self._root, satisfied, present)
        matched: set[RuleId] = set()
        by_key = self._by_key
        for condition in list(satisfied):
            for alternative in by_key.get(condition, ()):
                if alternative.rule_id not in matched and _holds(alternative, satisfied, present):
                    matched.add(alternative.rule_id)
        for alternative in self._always:
            if alternative.rule_id not in matched and _holds(alternative, satisfied, present):
                matched.add(alternative.rule_id)
        return matched

    def _walk(self, obj: Mapping[str, object], node: _Node, satisfied: set[int], present: set[int]) -> None:
        children = node.children
        for key, value in obj.items():
            child = children.get(key)
            if child is not None:
                self._visit(value, child, satisfied, present)

    def _visit(self, value: object, node: _Node, satisfied: set[int], present: set[int]) -> None:
        if isinstance(value, Mapping):
            if node.children:
                self._walk(value, node, satisfied, present)
        elif isinstance(value, list):
            for element in value:
                self._visit(element, node, satisfied, present)
        elif node.has_conditions:
            if node.ident not in present:
                present.add(node.ident)
                satisfied.update(node.exists)
            node.collect(value, satisfied)

    def _condition(self, path: Path, matchers: tuple[Operator, ...]) -> int:
        key = (path, frozenset(matchers))
        existing = self._conditions.get(key)
        if existing is not None:
            return existing
        ident = len(self._condition_node)
        self._conditions[key] = ident
        node = self._root
        for name in path:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(self._node_count)
                self._node_count += 1
            node = child
        self._condition_node.append(node)
        node.has_conditions = True
        self._absent_capable.append(any(m == Exists(False) for m in matchers))
        for matcher in set(matchers):
            match matcher:
                case Exists(present=True):
                    node.exists.append(ident)
                case Exists(present=False):
                    pass  # checked against the fields present, in _holds
                case AnythingBut(excluded=excluded):
                    term = self._term_count
                    self._term_count += 1
                    node.negated.add(term)
                    node.negated_to_condition[term] = ident
                    if node.excluded is None:
                        node.excluded = LeafIndex()
                    for inner in excluded:
                        node.excluded.add(inner, term)
                case (
                    Exact()
                    | Prefix()
                    | Suffix()
                    | PrefixIgnoreCase()
                    | SuffixIgnoreCase()
                    | EqualsIgnoreCase()
                    | Wildcard()
                    | Numeric()
                    | Cidr()
                ):
                    if node.positive is None:
                        node.positive = LeafIndex()
                    node.positive.add(matcher, ident)
        return ident

    def _freeze(self, node: _Node) -> None:
        if node.positive is not None:
            node.positive.freeze()
        if node.excluded is not None:
            node.excluded.freeze()
        for child in node.children.values():
            self._freeze(child)


def _holds(alternative: _Alternative[RuleId], satisfied: set[int], present: set[int]) -> bool:
    for condition in alternative.required:
        if condition not in satisfied:
            return False
    return all(condition in satisfied or node not in present for condition, node in alternative.absent_or)
