"""Tries over topic levels: `SubscriptionTrie` finds the subscriptions whose filters match a published topic name,
`TopicTree` finds the stored topic names (retained messages) that a new subscription's filter matches.

Both split their argument once and walk only the branches that can match, so a lookup costs the depth of the
topic times the matching branches, never a scan of everything stored. Both follow `topic.matches` exactly,
including the rule that a wildcard first level does not match '$' topics. Neither is thread-safe; the gateway
uses them from its one event loop.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from mqtt_bridge.topics.topic import (
    LEVEL_SEPARATOR,
    MULTI_LEVEL_WILDCARD,
    SINGLE_LEVEL_WILDCARD,
    filter_levels,
    validate_topic_name,
)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Tells "no such key" from a stored value of None.
_MISSING = object()
# Topic names whose matches SubscriptionTrie remembers. A publisher usually sends on a few topics over and over,
# so most lookups repeat; any change to the subscriptions forgets them all, and so does reaching this many
# (a fleet where every device has its own topic would otherwise grow the memo without bound).
MAX_REMEMBERED_MATCHES = 10_000


class _FilterNode(Generic[K, V]):
    """One level of a topic filter. `plus` and `hash` hold the wildcard children apart from the literal ones, so a
    literal level that happens to be spelled '+' cannot be confused with the wildcard. `topic_filter` is the whole
    filter this node ends, set when it gets subscribers, so that `match` returns it without joining levels."""

    __slots__ = ("children", "hash", "plus", "subscribers", "topic_filter")

    def __init__(self) -> None:
        self.children: dict[str, _FilterNode[K, V]] = {}
        self.plus: _FilterNode[K, V] | None = None
        # '#' is always the last level, so this node never has children of its own: only subscribers.
        self.hash: _FilterNode[K, V] | None = None
        self.subscribers: dict[K, V] = {}
        self.topic_filter = ""

    def is_empty(self) -> bool:
        return not self.subscribers and not self.children and self.plus is None and self.hash is None


class SubscriptionTrie(Generic[K, V]):
    """Subscriptions keyed by (topic filter, key), each with a value (a client id and its QoS, say).

    A key holds at most one subscription per filter; the caller keeps the set of filters per key if it needs it.
    `match` remembers its answers per topic name until the subscriptions change.
    """

    __slots__ = ("_count", "_keys", "_matches", "_root")

    def __init__(self) -> None:
        self._root: _FilterNode[K, V] = _FilterNode()
        self._count = 0
        self._matches: dict[str, tuple[tuple[str, K, V], ...]] = {}
        # The keys of those matches, for match_keys (the MQTT gateway's send hook asks for every message).
        self._keys: dict[str, tuple[K, ...]] = {}

    def __len__(self) -> int:
        """The number of (filter, key) subscriptions."""
        return self._count

    def add(self, topic_filter: str, key: K, value: V) -> bool:
        """Subscribe `key` to `topic_filter` with `value`; True if new, False if it replaced the key's value there.

        Raises TopicError if the filter is not a legal topic filter (a '$share/' prefix must be parsed off first).
        """
        node = self._root
        for level in filter_levels(topic_filter):
            if level == SINGLE_LEVEL_WILDCARD:
                if node.plus is None:
                    node.plus = _FilterNode()
                node = node.plus
            elif level == MULTI_LEVEL_WILDCARD:
                if node.hash is None:
                    node.hash = _FilterNode()
                node = node.hash
            else:
                child = node.children.get(level)
                if child is None:
                    child = node.children[level] = _FilterNode()
                node = child
        self._matches.clear()
        self._keys.clear()
        is_new = key not in node.subscribers
        if is_new:
            self._count += 1
            node.topic_filter = topic_filter
        node.subscribers[key] = value
        return is_new

    def remove(self, topic_filter: str, key: K) -> bool:
        """Unsubscribe `key` from `topic_filter`; False if it was not subscribed. Nodes left empty are dropped."""
        path: list[tuple[_FilterNode[K, V], str]] = []
        node: _FilterNode[K, V] | None = self._root
        for level in topic_filter.split(LEVEL_SEPARATOR):
            assert node is not None
            path.append((node, level))
            if level == SINGLE_LEVEL_WILDCARD:
                node = node.plus
            elif level == MULTI_LEVEL_WILDCARD:
                node = node.hash
            else:
                node = node.children.get(level)
            if node is None:
                return False
        assert node is not None
        if node.subscribers.pop(key, _MISSING) is _MISSING:
            return False
        self._matches.clear()
        self._keys.clear()
        self._count -= 1
        # Drop the emptied tail of the path so that unsubscribed filters cost no memory.
        for parent, level in reversed(path):
            if not node.is_empty():
                break
            if level == SINGLE_LEVEL_WILDCARD:
                parent.plus = None
            elif level == MULTI_LEVEL_WILDCARD:
                parent.hash = None
            else:
                del parent.children[level]
            node = parent
        return True

    def match(self, topic_name: str) -> list[tuple[str, K, V]]:
        """Every subscription whose filter matches `topic_name`, as (filter, key, value), in no particular order.

        `topic_name` is assumed valid (the PUBLISH decoder checks it). Each subscription appears once.
        """
        remembered = self._matches.get(topic_name)
        if remembered is None:
            if len(self._matches) >= MAX_REMEMBERED_MATCHES:
                self._matches.clear()
            remembered = self._matches[topic_name] = tuple(self._walk(topic_name))
        return list(remembered)

    def match_keys(self, topic_name: str) -> list[K]:
        """The keys of `match(topic_name)`, in the same order, as a new list."""
        keys = self._keys.get(topic_name)
        if keys is None:
            if len(self._keys) >= MAX_REMEMBERED_MATCHES:
                self._keys.clear()
            keys = self._keys[topic_name] = tuple(key for _, key, _ in self.match(topic_name))
        return list(keys)

    def _walk(self, topic_name: str) -> list[tuple[str, K, V]]:
        levels = topic_name.split(LEVEL_SEPARATOR)
        found: list[tuple[str, K, V]] = []
        # [MQTT-4.7.2-1]: a '$' name skips the root's wildcard children; the literal '$SYS' child still matches.
        root = self._root
        frontier: list[_FilterNode[K, V]] = []
        first = root.children.get(levels[0])
        if first is not None:
            frontier.append(first)
        if not topic_name.startswith("$"):
            if root.hash is not None:
                _collect(root.hash, found)
            if root.plus is not None:
                frontier.append(root.plus)
        for level in levels[1:]:
            if not frontier:
                return found
            deeper: list[_FilterNode[K, V]] = []
            for node in frontier:
                # '#' here matches this level and everything after it.
                if node.hash is not None:
                    _collect(node.hash, found)
                child = node.children.get(level)
                if child is not None:
                    deeper.append(child)
                if node.plus is not None:
                    deeper.append(node.plus)
            frontier = deeper
        for node in frontier:
            _collect(node, found)
            # 'sport/#' matches 'sport': '#' also stands for no level at all.
            if node.hash is not None:
                _collect(node.hash, found)
        return found

    def items(self) -> Iterator[tuple[str, K, V]]:
        """Every subscription as (filter, key, value); walks the whole trie, for snapshots and tests."""
        stack = [self._root]
        while stack:
            node = stack.pop()
            for key, value in node.subscribers.items():
                yield node.topic_filter, key, value
            stack.extend(node.children.values())
            if node.plus is not None:
                stack.append(node.plus)
            if node.hash is not None:
                stack.append(node.hash)

    def node_count(self) -> int:
        """The number of trie nodes below the root; walks the whole trie, for tests and memory diagnostics."""
        return _count_nodes(self._root) - 1


def _collect(node: _FilterNode[K, V], found: list[tuple[str, K, V]]) -> None:
    topic_filter = node.topic_filter
    found.extend((topic_filter, key, value) for key, value in node.subscribers.items())


def _count_nodes(root: _FilterNode[K, V]) -> int:
    count = 0
    stack = [root]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node.children.values())
        if node.plus is not None:
            stack.append(node.plus)
        if node.hash is not None:
            stack.append(node.hash)
    return count


class _NameNode:
    """One level of a stored topic name; `name` is the whole name if one ends here, kept so nothing is joined."""

    __slots__ = ("children", "name")

    def __init__(self) -> None:
        self.children: dict[str, _NameNode] = {}
        self.name: str | None = None

    def is_empty(self) -> bool:
        return self.name is None and not self.children


class TopicTree:
    """A set of concrete topic names (those with a retained message) that answers "which names match this filter"."""

    __slots__ = ("_count", "_root")

    def __init__(self) -> None:
        self._root = _NameNode()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        node: _NameNode | None = self._root
        for level in name.split(LEVEL_SEPARATOR):
            assert node is not None
            node = node.children.get(level)
            if node is None:
                return False
        assert node is not None
        return node.name is not None

    def add(self, name: str) -> bool:
        """Store a topic name; True if it was not stored yet. Raises TopicError if it is not a legal topic name."""
        validate_topic_name(name)
        node = self._root
        for level in name.split(LEVEL_SEPARATOR):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _NameNode()
            node = child
        if node.name is not None:
            return False
        node.name = name
        self._count += 1
        return True

    def discard(self, name: str) -> bool:
        """Forget a topic name; False if it was not stored. Nodes left empty are dropped."""
        path: list[tuple[_NameNode, str]] = []
        node: _NameNode | None = self._root
        for level in name.split(LEVEL_SEPARATOR):
            assert node is not None
            path.append((node, level))
            node = node.children.get(level)
            if node is None:
                return False
        assert node is not None
        if node.name is None:
            return False
        node.name = None
        self._count -= 1
        for parent, level in reversed(path):
            # A method, not `node.name` in the loop: mypy keeps `node.name` narrowed to None (as just assigned)
            # after `node = parent`, and mypyc, compiling to that type, raised TypeError for a parent's name.
            if not node.is_empty():
                break
            del parent.children[level]
            node = parent
        return True

    def matching(self, topic_filter: str) -> Iterator[str]:
        """Yield every stored name that `topic_filter` matches, each once, in no particular order.

        Raises TopicError at once if the filter is illegal. Names added or discarded while iterating may or may not
        be seen, as with a set snapshot taken level by level; collect the names first to change the tree.
        """
        return self._walk(filter_levels(topic_filter))

    def node_count(self) -> int:
        """The number of nodes below the root; walks the whole tree, for tests and memory diagnostics."""
        count = 0
        stack = list(self._root.children.values())
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count

    def _walk(self, levels: list[str]) -> Iterator[str]:
        root = self._root
        first = levels[0]
        # [MQTT-4.7.2-1]: a wildcard first level skips the '$' names; a literal one ('$SYS') reaches them.
        frontier: list[_NameNode]
        if first == MULTI_LEVEL_WILDCARD:
            yield from _subtree_names([node for level, node in root.children.items() if not level.startswith("$")])
            return
        if first == SINGLE_LEVEL_WILDCARD:
            frontier = [node for level, node in root.children.items() if not level.startswith("$")]
        else:
            child = root.children.get(first)
            frontier = [] if child is None else [child]
        for level in levels[1:]:
            if not frontier:
                return
            if level == MULTI_LEVEL_WILDCARD:
                # The parent level too: 'sport/#' matches 'sport'.
                yield from _subtree_names(frontier)
                return
            if level == SINGLE_LEVEL_WILDCARD:
                frontier = [child for node in frontier for child in node.children.values()]
            else:
                frontier = [child for node in frontier if (child := node.children.get(level)) is not None]
        for node in frontier:
            if node.name is not None:
                yield node.name


def _subtree_names(tops: list[_NameNode]) -> Iterator[str]:
    """The names stored at the given nodes and everywhere below them."""
    stack = tops
    while stack:
        node = stack.pop()
        if node.name is not None:
            yield node.name
        # Copied onto the stack before the next yield, so no dict is iterated across a yield.
        stack.extend(node.children.values())
