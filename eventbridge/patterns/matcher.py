"""`Matcher`: many compiled patterns indexed together, matched against an event at a cost that follows the event.

Built once from (rule id, pattern) pairs, after aws/event-ruler's machine:

- The field paths of all patterns form a trie (`eventbridge.patterns.field_trie`); an event is walked only along keys
  that some pattern names, so unrelated parts of the event cost nothing.
- Each pattern path indexes its matchers in a `LeafIndex` (`eventbridge.patterns.leaf_index`): a leaf value costs a few
  hash probes whatever the number of rules, plus the conditions it satisfies. ``anything-but`` is indexed by what it
  excludes: the satisfied ones are all those at the path minus those the value hits.
- Identical conditions (same path, same matchers) are shared between rules. Each alternative of a rule (its
  ``$or`` expanded) is registered under its most selective condition (the one the fewest alternatives share), so
  only alternatives whose key condition holds are checked in full; an alternative made only of conditions that
  can hold on a missing field (``exists: false``) is checked for every event.

Once all rules are in, every node of the trie is compiled into a closure that does only the work its conditions
need (`FieldNode.compile`): matching ran at about 80,000 events a second against 10,000 rules when each value went
through generic code asking which operator families a path holds; compiled, the same machine does more than twice
that (bench/eventbridge.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, NamedTuple, TypeVar

from eventbridge.patterns.compiler import CompiledPattern, Path, compile_pattern
from eventbridge.patterns.field_trie import FieldNode
from eventbridge.patterns.leaf_index import LeafIndex, frozen
from eventbridge.patterns.operators import (
    AnythingBut,
    Cidr,
    EqualsIgnoreCase,
    Exact,
    Exists,
    Numeric,
    Operator,
    Prefix,
    PrefixIgnoreCase,
    Suffix,
    SuffixIgnoreCase,
    Wildcard,
)

RuleId = TypeVar("RuleId", bound=Hashable)


class _Alternative(NamedTuple, Generic[RuleId]):
    rule_id: RuleId
    required: tuple[int, ...]  # condition ids that must be satisfied by some leaf value (but the key, known to be)
    absent_or: tuple[tuple[int, int], ...]  # (condition id, node presence id): satisfied, or the field is absent


class Matcher(Generic[RuleId]):
    """Rules compiled together; `matches(event)` returns the ids of the rules whose pattern matches."""

    def __init__(self, rules: Iterable[tuple[RuleId, CompiledPattern | Mapping[str, object]]]) -> None:
        conditions = _Conditions()
        conjunctions: list[tuple[RuleId, list[int], list[int]]] = []
        self.rule_count = 0
        for rule_id, pattern in rules:
            compiled = pattern if isinstance(pattern, CompiledPattern) else compile_pattern(pattern)
            self.rule_count += 1
            for conjunction in compiled.alternatives:
                ids = sorted({conditions.add(condition.path, condition.matchers) for condition in conjunction})
                required = [c for c in ids if not conditions.absent_capable[c]]
                absent_or = [c for c in ids if conditions.absent_capable[c]]
                conjunctions.append((rule_id, required, absent_or))
        self._walk, self._walk_mapping = conditions.root.walks()
        uses: dict[int, int] = {}
        for _, required, _ in conjunctions:
            for c in required:
                uses[c] = uses.get(c, 0) + 1
        by_key: dict[int, list[_Alternative[RuleId]]] = {}
        always: list[_Alternative[RuleId]] = []
        for rule_id, required, absent_or in conjunctions:
            absent = tuple((c, conditions.node[c].presence) for c in absent_or)
            if required:
                key = min(required, key=uses.__getitem__)
                rest = tuple(c for c in required if c != key)
                by_key.setdefault(key, []).append(_Alternative(rule_id, rest, absent))
            else:
                always.append(_Alternative(rule_id, (), absent))
        # Against 10,000 rules these objects outgrow the CPU caches, and each one an event's match fetches is a
        # likely miss (see `leaf_index.frozen`). So a key with one alternative and no `exists: false`, nearly every
        # key, is a bare (rule id, required) pair, one object fewer; and `required` is a tuple, not a frozenset
        # (whose table spans four cache lines): its ids were hashed into the satisfied set by this very event.
        self._single: dict[int, tuple[RuleId, tuple[int, ...]]] = {
            key: (alternatives[0].rule_id, alternatives[0].required)
            for key, alternatives in by_key.items()
            if len(alternatives) == 1 and not alternatives[0].absent_or
        }
        self._by_key = frozen({key: alternatives for key, alternatives in by_key.items() if key not in self._single})
        self._always = tuple(always)
        self._keys = set(by_key)

    def matches(self, event: Mapping[str, object]) -> set[RuleId]:
        satisfied: set[int] = set()
        if type(event) is dict:
            if self._walk is not None:
                self._walk(event, satisfied)
        elif isinstance(event, Mapping):
            if self._walk_mapping is not None:
                self._walk_mapping(event, satisfied)
        else:
            raise TypeError(f"an event must be a JSON object (a mapping), not {type(event).__name__}")
        matched: set[RuleId] = set()
        holds = satisfied.issuperset
        single = self._single
        for key in satisfied & self._keys:  # a set intersection iterates the smaller set
            pair = single.get(key)
            if pair is not None:
                if holds(pair[1]):
                    matched.add(pair[0])
                continue
            for rule_id, required, absent_or in self._by_key[key]:
                if rule_id not in matched and holds(required) and (not absent_or or _absent_hold(absent_or, satisfied)):
                    matched.add(rule_id)
        for rule_id, _, absent_or in self._always:
            if rule_id not in matched and _absent_hold(absent_or, satisfied):
                matched.add(rule_id)
        return matched


class _Conditions:
    """The conditions of the rules being compiled, each identical one once, hung on the field trie. Needed only
    while a `Matcher` is built: at 10,000 rules they hold 8 of its 13 MB (the conditions' keys, the trie's lists
    before they are frozen), which the compiled closures do not keep."""

    def __init__(self) -> None:
        self.root = FieldNode(0)
        self._node_count = 1
        self._ids: dict[tuple[Path, frozenset[Operator]], int] = {}
        self.node: list[FieldNode] = []  # condition id -> the node of its path
        self.absent_capable: list[bool] = []  # condition id -> it can hold on a missing field (exists: false)

    def add(self, path: Path, matchers: tuple[Operator, ...]) -> int:
        """The id of the condition: `matchers` on the leaf values at `path`."""
        key = (path, frozenset(matchers))
        existing = self._ids.get(key)
        if existing is not None:
            return existing
        ident = len(self.node)
        self._ids[key] = ident
        node = self.root
        for name in path:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = FieldNode(self._node_count)
                self._node_count += 1
            node = child
        self.node.append(node)
        node.has_conditions = True
        self.absent_capable.append(any(m == Exists(False) for m in matchers))
        for matcher in set(matchers):
            match matcher:
                case Exists(present=True):
                    node.exists.append(ident)
                case Exists(present=False):
                    node.track_presence = True  # checked against the fields present, in _absent_hold
                case AnythingBut(excluded=excluded):
                    term = len(node.negated)
                    node.negated.append(ident)
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


def _absent_hold(absent_or: tuple[tuple[int, int], ...], satisfied: set[int]) -> bool:
    """Each condition that holds on a missing field holds: satisfied by a value, or its field has none."""
    return all(condition in satisfied or presence not in satisfied for condition, presence in absent_or)
