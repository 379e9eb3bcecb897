"""`LeafIndex`: the matchers on the leaf values of one field path, indexed by what they accept, and compiled into
probes that make only the lookups the path needs.

- Exact values, ``numeric =`` and wildcards without a star sit in one hash map (booleans under tagged keys,
  `pattern_operators.exact_key`, so that ``true`` is not ``1``).
- Prefixes, suffixes and wildcards (by their text before the first ``*``) sit in hash maps probed once per
  distinct length. A wildcard found so is confirmed by the text after its star (``endswith``) if it has one star,
  by its regex if it has more.
- Equals-ignore-case and the ignore-case prefixes and suffixes: the same maps, probed with the value case-folded
  once.
- CIDR networks: one hash map per (IP version, prefix length), keyed by the network's leading bits.
- Numeric ranges: a `NumericIndex`.

A leaf value therefore costs a few hash probes whatever the number of rules, plus the ids it yields.

`probes()` compiles the index, once all matchers are in, into `LeafProbes`: one probe for strings, one for numbers
and one for other values (booleans, null), each None when nothing at the path can accept such a value, else one
closure over only the maps it probes. Matching spends its time on Python's per-call and per-branch overhead, not on
the lookups: asking at every value which of nine families the path holds, through four method calls, cost more
than the lookups themselves.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eventbridge.patterns.numeric_index import NumericIndex
from eventbridge.patterns.operators import (
    FALSE_KEY,
    TRUE_KEY,
    Cidr,
    EqualsIgnoreCase,
    Exact,
    Excluded,
    Numeric,
    Prefix,
    PrefixIgnoreCase,
    Suffix,
    SuffixIgnoreCase,
    Wildcard,
    ipv4_number,
    parse_ip,
)

_Key = TypeVar("_Key")
_Item = TypeVar("_Item")

# Adds to the set the ids of the matchers that accept the value.
Probe = Callable[[Any, set[int]], None]

# A wildcard found by its text before the first star: (text after the last star, the least length a string needs
# to hold both, the regex if it has more than one star, its id).
_WildcardCandidate = tuple[str, int, re.Pattern[str] | None, int]


def combined(probes: Sequence[Probe]) -> Probe | None:
    """One probe doing all of `probes`: None for none, and the probe itself for one (no loop, no extra call)."""
    if not probes:
        return None
    if len(probes) == 1:
        return probes[0]
    every = tuple(probes)

    def all_of(value: Any, out: set[int]) -> None:
        for probe in every:
            probe(value, out)

    return all_of


@dataclass(slots=True, frozen=True)
class LeafProbes:
    string: Probe | None
    number: Probe | None  # int and float, not bool
    other: Probe | None  # booleans, null, and any other value by its exact key

    @classmethod
    def none(cls) -> LeafProbes:
        return cls(None, None, None)


@dataclass(slots=True)
class LeafIndex:
    """The matchers of one path, indexed; `probes()` once they are all added."""

    exact: dict[object, list[int]] = field(default_factory=dict)
    folded: dict[str, list[int]] = field(default_factory=dict)
    prefixes: dict[str, list[int]] = field(default_factory=dict)
    suffixes: dict[str, list[int]] = field(default_factory=dict)
    folded_prefixes: dict[str, list[int]] = field(default_factory=dict)
    folded_suffixes: dict[str, list[int]] = field(default_factory=dict)
    wildcards: dict[str, list[_WildcardCandidate]] = field(default_factory=dict)
    cidrs: dict[tuple[int, int], dict[int, list[int]]] = field(default_factory=dict)  # (version, prefixlen)
    numeric: NumericIndex = field(default_factory=NumericIndex)

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
            case Wildcard(literals=(text,)):
                self.exact.setdefault(text, []).append(ident)  # no star: one string, and only a string, equals it
            case Wildcard(literals=literals, regex=regex):
                head, tail = literals[0], literals[-1]
                # Interned: rules often share a tail (".json"), then one string serves them all.
                candidate = (sys.intern(tail), len(head) + len(tail), regex if len(literals) > 2 else None, ident)
                self.wildcards.setdefault(head, []).append(candidate)
            case Numeric(range=r) if r.lower is not None and r.lower == r.upper:
                self.exact.setdefault(r.lower, []).append(ident)  # `numeric =` is an exact number
            case Numeric(range=r):
                self.numeric.add(r, ident)
            case Cidr(network=network):
                by_network = self.cidrs.setdefault((network.version, network.prefixlen), {})
                key = int(network.network_address) >> (network.max_prefixlen - network.prefixlen)
                by_network.setdefault(key, []).append(ident)

    def probes(self) -> LeafProbes:
        string: list[Probe] = []
        number: list[Probe] = []
        other: list[Probe] = []
        if self.exact:
            exact = frozen(self.exact)
            string.append(_exact(exact))
            number.append(_exact(exact))
            other.append(_exact_key(exact))
        if self.folded or self.folded_prefixes or self.folded_suffixes:
            string.append(_casefolded(self.folded, self.folded_prefixes, self.folded_suffixes))
        if self.prefixes:
            string.append(_prefixes(self.prefixes))
        if self.suffixes:
            string.append(_suffixes(self.suffixes))
        if self.wildcards:
            string.append(_wildcards(self.wildcards))
        if self.cidrs:
            string.append(_cidrs(self.cidrs))
        number.extend(self.numeric.probes())
        return LeafProbes(combined(string), combined(number), combined(other))


def frozen(table: Mapping[_Key, Sequence[_Item]]) -> dict[_Key, tuple[_Item, ...]]:
    """`table` with tuples for lists: a tuple holds its items inline, a list in a separate array, one more place in
    memory to fetch. Against 10,000 rules the tables outgrow the CPU caches and each fetch is a likely miss: those
    misses, not the Python code, are most of what the larger rule sets add to an event."""
    return {key: tuple(items) for key, items in table.items()}


def _exact(table: dict[Any, tuple[int, ...]]) -> Probe:
    """For strings and numbers, which are their own exact keys."""
    get = table.get

    def exact(value: Any, out: set[int]) -> None:
        hits = get(value)
        if hits:
            out.update(hits)

    return exact


def _exact_key(table: dict[object, tuple[int, ...]]) -> Probe:
    """For any other value: booleans are looked up under their tagged keys (`pattern_operators.exact_key`)."""
    get = table.get

    def exact(value: Any, out: set[int]) -> None:
        hits = get(TRUE_KEY if value is True else FALSE_KEY if value is False else value)
        if hits:
            out.update(hits)

    return exact


def _casefolded(equal: dict[str, list[int]], prefixes: dict[str, list[int]], suffixes: dict[str, list[int]]) -> Probe:
    parts: list[Probe] = []
    if equal:
        parts.append(_exact(frozen(equal)))
    if prefixes:
        parts.append(_prefixes(prefixes))
    if suffixes:
        parts.append(_suffixes(suffixes))
    inner = combined(parts)
    assert inner is not None

    def casefolded(value: str, out: set[int]) -> None:
        inner(value.casefold(), out)

    return casefolded


def _prefixes(table: dict[str, list[int]]) -> Probe:
    """One hash probe per distinct prefix length at the path, however many rules hold one."""
    get = frozen(table).get
    lengths = sorted({len(text) for text in table})
    if len(lengths) == 1:
        (length,) = lengths

        def one_length(value: str, out: set[int]) -> None:
            hits = get(value[:length])  # shorter than `length` if the value is: no key then
            if hits:
                out.update(hits)

        return one_length

    def prefixes(value: str, out: set[int]) -> None:
        size = len(value)
        for length in lengths:
            if length > size:
                break
            hits = get(value[:length])
            if hits:
                out.update(hits)

    return prefixes


def _suffixes(table: dict[str, list[int]]) -> Probe:
    get = frozen(table).get
    lengths = sorted({len(text) for text in table})

    def suffixes(value: str, out: set[int]) -> None:
        size = len(value)
        for length in lengths:
            if length > size:
                break
            hits = get(value[size - length :])
            if hits:
                out.update(hits)

    return suffixes


def _wildcards(table: dict[str, list[_WildcardCandidate]]) -> Probe:
    get = frozen(table).get
    lengths = sorted({len(text) for text in table})

    def wildcards(value: str, out: set[int]) -> None:
        size = len(value)
        for length in lengths:
            if length > size:
                break
            candidates = get(value[:length])
            if candidates:
                for tail, least_size, regex, ident in candidates:
                    if regex is None:
                        if size >= least_size and value.endswith(tail):
                            out.add(ident)
                    elif regex.fullmatch(value) is not None:
                        out.add(ident)

    return wildcards


def _cidrs(cidrs: dict[tuple[int, int], dict[int, list[int]]]) -> Probe:
    # Per IP version: (bits to drop from an address to get its network's key, the networks of that prefix length).
    ipv4: list[tuple[int, dict[int, tuple[int, ...]]]] = []
    ipv6: list[tuple[int, dict[int, tuple[int, ...]]]] = []
    for (version, prefixlen), networks in cidrs.items():
        if version == 4:
            ipv4.append((32 - prefixlen, frozen(networks)))
        else:
            ipv6.append((128 - prefixlen, frozen(networks)))

    def cidr(value: str, out: set[int]) -> None:
        number = ipv4_number(value) if ipv4 else None
        if number is not None:
            for shift, networks in ipv4:
                hits = networks.get(number >> shift)
                if hits:
                    out.update(hits)
        elif ipv6 and ":" in value:  # an IPv6 address has one; parse_ip is dear
            address = parse_ip(value)
            if address is not None and address.version == 6:
                number = int(address)
                for shift, networks in ipv6:
                    hits = networks.get(number >> shift)
                    if hits:
                        out.update(hits)

    return cidr
