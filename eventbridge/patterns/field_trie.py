"""`FieldNode`: one field path in the trie of all the paths a `Matcher`'s patterns name, and the closures, compiled
once all patterns are in, that walk an event along the trie.

An event is walked only along keys that some pattern names, so unrelated parts of the event cost nothing. Each
node adds to one set the ids its leaf values satisfy:

- the ids of its positive matchers (a `LeafIndex` of condition ids);
- for ``anything-but``, the conditions none of whose excluded values the value hits (their `LeafIndex` is of
  term ids, a term being one ``anything-but`` matcher; they match nearly every value, so the work is the output);
- for any leaf value at all, the ``exists: true`` conditions, and the node's presence id (`presence`, negative so
  that it cannot be a condition id) if some ``exists: false`` condition needs to know the field was there.

Decoded JSON holds only dict, list, str, int, float, bool and None, so `visit` dispatches on the exact type (one
pointer comparison) and leaves the ``isinstance`` checks (``Mapping`` is an ABC: 77 ns against 11 ns) to any
other value, which it takes as the matcher always has: a Mapping is an object, a list an array, a str subclass a
string, an int or float subclass other than bool a number, anything else a value looked up by its exact key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from eventbridge.patterns.leaf_index import LeafIndex, LeafProbes, Probe, combined
from eventbridge.patterns.operators import is_number

# Walks one value (an object, an array or a leaf) at a node, adding the ids it satisfies to the set.
Visit = Callable[[Any, set[int]], None]

_MISSING: Final = object()


class FieldNode:
    """One field path: its children in the trie and the conditions on its leaf values."""

    __slots__ = ("children", "excluded", "exists", "has_conditions", "ident", "negated", "positive", "track_presence")

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.children: dict[str, FieldNode] = {}
        self.positive: LeafIndex | None = None  # of condition ids
        self.excluded: LeafIndex | None = None  # of anything-but terms, under what each excludes
        self.negated: list[int] = []  # term -> its condition id (a term is its index)
        self.exists: list[int] = []  # condition ids holding `exists: true`
        self.track_presence = False  # some `exists: false` condition is here
        self.has_conditions = False  # some pattern ends here (else the node only leads to its children)

    @property
    def presence(self) -> int:
        """The id added for any leaf value here when `track_presence`: negative, unlike condition ids."""
        return -1 - self.ident

    def walks(self) -> tuple[Visit | None, Visit | None]:
        """(walk a dict, walk any other Mapping) along this node's children; None if it has none."""
        if not self.children:
            return None, None
        children = {key: child.compile() for key, child in self.children.items()}
        return _walk_dict(children), _walk_mapping(children)

    def compile(self) -> Visit:
        walk, walk_mapping = self.walks()
        leaf = self._leaf_probes() if self.has_conditions else LeafProbes.none()
        string, number, other = leaf.string, leaf.number, leaf.other

        def visit(value: Any, out: set[int]) -> None:
            kind = type(value)
            if kind is str:
                if string is not None:
                    string(value, out)
            elif kind is dict:
                if walk is not None:
                    walk(value, out)
            elif kind is list:
                for element in value:
                    visit(element, out)
            elif kind is int or kind is float:
                if number is not None:
                    number(value, out)
            elif kind is bool or value is None:
                if other is not None:
                    other(value, out)
            elif isinstance(value, Mapping):
                if walk_mapping is not None:
                    walk_mapping(value, out)
            elif isinstance(value, list):
                for element in value:
                    visit(element, out)
            else:
                probe = string if isinstance(value, str) else number if is_number(value) else other
                if probe is not None:
                    probe(value, out)

        return visit

    def _leaf_probes(self) -> LeafProbes:
        positive = self.positive.probes() if self.positive is not None else LeafProbes.none()
        excluded = self.excluded.probes() if self.excluded is not None else LeafProbes.none()
        any_value = [*self.exists, *([self.presence] if self.track_presence else [])]
        present = _add_all(any_value) if any_value else None

        def probe(own: Probe | None, excluding: Probe | None) -> Probe | None:
            negation = _negation(excluding, self.negated) if self.negated else None
            return combined([p for p in (own, negation, present) if p is not None])

        return LeafProbes(
            probe(positive.string, excluded.string),
            probe(positive.number, excluded.number),
            probe(positive.other, excluded.other),
        )


def _add_all(ids: list[int]) -> Probe:
    def add_all(value: Any, out: set[int]) -> None:
        out.update(ids)

    return add_all


def _negation(excluded: Probe | None, conditions: list[int]) -> Probe:
    """The anything-but conditions (`conditions[term]`) whose term the value does not hit."""
    if excluded is None:  # nothing excluded is of this kind of value: all hold

        def all_hold(value: Any, out: set[int]) -> None:
            out.update(conditions)

        return all_hold

    def negation(value: Any, out: set[int]) -> None:
        hit: set[int] = set()
        excluded(value, hit)
        if hit:
            out.update([condition for term, condition in enumerate(conditions) if term not in hit])
        else:
            out.update(conditions)

    return negation


def _walk_dict(children: dict[str, Visit]) -> Visit:
    """Walks a dict by whichever is smaller: its keys (each looked up among the children) or the children (each
    looked up in it). Any other Mapping goes to `_walk_mapping`."""
    pairs = tuple(children.items())
    if len(pairs) == 1:
        ((key, child),) = pairs

        def walk_one(obj: dict[str, Any], out: set[int]) -> None:
            value = obj.get(key, _MISSING)
            if value is not _MISSING:
                child(value, out)

        return walk_one
    count = len(pairs)
    get_child = children.get

    def walk(obj: dict[str, Any], out: set[int]) -> None:
        if len(obj) < count:
            for key, value in obj.items():
                visit = get_child(key)
                if visit is not None:
                    visit(value, out)
        else:
            get = obj.get
            for key, visit in pairs:
                value = get(key, _MISSING)
                if value is not _MISSING:
                    visit(value, out)

    return walk


def _walk_mapping(children: dict[str, Visit]) -> Visit:
    """Walks any Mapping through `items()`, the one way to read it the matcher has always used."""
    get_child = children.get

    def walk(obj: Mapping[str, Any], out: set[int]) -> None:
        for key, value in obj.items():
            visit = get_child(key)
            if visit is not None:
                visit(value, out)

    return walk
