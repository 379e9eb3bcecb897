"""The matchers a pattern leaf may hold, one small frozen type each.

A pattern leaf is an array of matchers; a leaf value of the event satisfies the leaf when any matcher accepts it.
Each type's `accepts(value)` states its semantics on one event leaf value (a string, number, boolean or null):

- `Exact`: equal string, boolean or null; numbers compare numerically (``300`` equals ``3.0e2``), never a string
  (``"5"`` is not ``5``).
- `Prefix`, `Suffix`, `EqualsIgnoreCase`, `PrefixIgnoreCase`, `SuffixIgnoreCase` (the last three compare under
  Unicode case folding), `Wildcard` (``*`` is any run of characters, ``\\*`` a literal star, ``\\\\`` a literal
  backslash): strings only.
- `Numeric`: numbers only (not booleans); a `Range` with an optional lower and upper bound, each open or closed.
- `Cidr`: a string that parses as an IP address of the network's version and lies inside the network.
- `AnythingBut`: any value that none of its inner matchers (exact values, or one prefix, suffix, wildcard or
  equals-ignore-case) accepts; so ``{"anything-but": {"prefix": "a"}}`` accepts numbers, booleans and null.
- `Exists` is not about one value: ``true`` holds when the field has at least one leaf value in the event (null
  counts, an object or an empty array does not), ``false`` when it has none. The matcher
  (`eventbridge.patterns.matcher`)
  handles it; `accepts` is true for ``exists: true`` only, as every value present proves existence.

The compiled matcher does not call `accepts` in its hot path except to confirm a wildcard candidate; it indexes
these types instead. They carry `accepts` so that their meaning is written down next to their data.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from socket import AF_INET, inet_ntop, inet_pton
from typing import Final, TypeAlias

# Python's True == 1 and hash(True) == hash(1): without distinct keys `true` would match the number 1.
TRUE_KEY: Final = ("bool", True)
FALSE_KEY: Final = ("bool", False)

# A JSON leaf value (str, int, float, bool or None) or the key it is indexed under: any object. Named for mypyc,
# which builds a compiled dataclass's __annotations__ by looking each field's type up by name, among the builtins
# it knows (`object` is not one of them: the compiled module failed to import with KeyError: 'object') or the
# module's globals, where it finds this name.
LeafValue: TypeAlias = object


def exact_key(value: object) -> object:
    """The hash key under which an exact value is indexed: strings, numbers (int and float alike, so 5 == 5.0) and
    None as themselves, booleans as a tagged pair."""
    if value is True:
        return TRUE_KEY
    if value is False:
        return FALSE_KEY
    return value


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(slots=True, frozen=True)
class Exact:
    key: LeafValue
    value: LeafValue = field(compare=False)

    @classmethod
    def of(cls, value: object) -> Exact:
        return cls(exact_key(value), value)

    def accepts(self, value: object) -> bool:
        return exact_key(value) == self.key


@dataclass(slots=True, frozen=True)
class Prefix:
    text: str

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value.startswith(self.text)


@dataclass(slots=True, frozen=True)
class Suffix:
    text: str

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value.endswith(self.text)


@dataclass(slots=True, frozen=True)
class PrefixIgnoreCase:
    """``{"prefix": {"equals-ignore-case": text}}``: the case-folded string starts with the case-folded text."""

    folded: str

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value.casefold().startswith(self.folded)


@dataclass(slots=True, frozen=True)
class SuffixIgnoreCase:
    """``{"suffix": {"equals-ignore-case": text}}``: the case-folded string ends with the case-folded text."""

    folded: str

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value.casefold().endswith(self.folded)


@dataclass(slots=True, frozen=True)
class EqualsIgnoreCase:
    folded: str

    @classmethod
    def of(cls, text: str) -> EqualsIgnoreCase:
        return cls(text.casefold())

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and value.casefold() == self.folded


@dataclass(slots=True, frozen=True)
class Wildcard:
    pattern: str
    # The literal texts between the unescaped stars (escapes resolved): one more than there are stars. The matcher
    # indexes a wildcard by the first, as it indexes prefixes, and checks one with a single star by the last.
    literals: tuple[str, ...] = field(compare=False)
    regex: re.Pattern[str] = field(compare=False)

    @classmethod
    def of(cls, pattern: str) -> Wildcard:
        """Compile `pattern`; raises ValueError for ``**`` or a backslash before anything but ``*`` or ``\\``."""
        parts: list[str] = []
        literals: list[str] = []
        literal: list[str] = []
        i = 0
        previous_star = False
        while i < len(pattern):
            char = pattern[i]
            if char == "\\":
                if i + 1 >= len(pattern) or pattern[i + 1] not in "*\\":
                    raise ValueError(f"invalid escape at character {i}; only \\* and \\\\ are allowed")
                literal.append(pattern[i + 1])
                i += 2
                previous_star = False
                continue
            if char == "*":
                if previous_star:
                    raise ValueError(f"consecutive '*' at character {i}; use a single '*'")
                literals.append("".join(literal))
                parts.append(re.escape(literals[-1]))
                parts.append(".*")
                literal = []
                previous_star = True
            else:
                literal.append(char)
                previous_star = False
            i += 1
        literals.append("".join(literal))
        parts.append(re.escape(literals[-1]))
        return cls(pattern, tuple(literals), re.compile("".join(parts), re.DOTALL))

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and self.regex.fullmatch(value) is not None


@dataclass(slots=True, frozen=True)
class Range:
    """Numbers between `lower` and `upper` (None: unbounded); `*_closed` says whether the bound itself is in."""

    lower: float | None = None
    lower_closed: bool = False
    upper: float | None = None
    upper_closed: bool = False

    # `int | float`, not `float` (the same type to mypy): compiled with mypyc, a `float` argument is a C double, and an
    # int would be rounded to one (2**53 + 1 compared equal to 2**53) or overflow; as an object it compares exactly.
    def contains(self, number: int | float) -> bool:
        if self.lower is not None and (number < self.lower or (number == self.lower and not self.lower_closed)):
            return False
        return not (
            self.upper is not None and (number > self.upper or (number == self.upper and not self.upper_closed))
        )


@dataclass(slots=True, frozen=True)
class Numeric:
    range: Range

    def accepts(self, value: object) -> bool:
        return is_number(value) and self.range.contains(value)  # type: ignore[arg-type]


@dataclass(slots=True, frozen=True)
class Cidr:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network

    def accepts(self, value: object) -> bool:
        address = parse_ip(value)
        return address is not None and address.version == self.network.version and address in self.network


def parse_ip(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


# A dotted quad exactly as `ipaddress` takes one: four decimal octets of at most 255, ASCII digits, no leading zero
# (Python refuses those since 3.9.5: "010" would be octal elsewhere).
_OCTET: Final = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD: Final = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}")


def ipv4_number(text: str) -> int | None:
    """The IPv4 address `text` as an integer, or None if `ipaddress.ip_address` would not take it as one.

    `ipaddress` costs about 2 us an address (an object, a parse octet by octet). The C library's inet_pton takes
    0.1 us; what it accepts is trusted only if inet_ntop writes it back unchanged (the canonical dotted quad is the
    one form `ipaddress` takes, and a C library may be laxer: leading zeros), and what it refuses goes to a regex
    written from `ipaddress`'s rules (0.6 us), so the answer does not depend on the platform."""
    try:
        packed = inet_pton(AF_INET, text)
    except (OSError, ValueError):  # not a dotted quad; ValueError: a NUL or a lone surrogate in the text
        packed = None
    if packed is not None and inet_ntop(AF_INET, packed) == text:
        return int.from_bytes(packed)
    quad = _DOTTED_QUAD.fullmatch(text)
    if quad is None:
        return None
    a, b, c, d = quad.groups()
    return int(a) << 24 | int(b) << 16 | int(c) << 8 | int(d)


@dataclass(slots=True, frozen=True)
class Exists:
    present: bool

    def accepts(self, value: object) -> bool:
        return self.present


# What `anything-but` may exclude.
Excluded = Exact | Prefix | Suffix | Wildcard | EqualsIgnoreCase


@dataclass(slots=True, frozen=True)
class AnythingBut:
    excluded: tuple[Excluded, ...]

    def accepts(self, value: object) -> bool:
        return not any(matcher.accepts(value) for matcher in self.excluded)


Operator = (
    Exact
    | Prefix
    | Suffix
    | PrefixIgnoreCase
    | SuffixIgnoreCase
    | EqualsIgnoreCase
    | Wildcard
    | Numeric
    | Cidr
    | Exists
    | AnythingBut
)
