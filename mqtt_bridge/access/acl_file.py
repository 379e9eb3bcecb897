"""Mosquitto ACL files: which topics a client may publish to, receive from and subscribe to.

Layout (Mosquitto's `acl_file`), one rule a line, UTF-8:

    # rules before the first `user` line apply to anonymous clients (no username)
    topic read public/#

    user alice
    topic readwrite alice/#
    topic deny alice/secret/#

    # `pattern` lines apply to every client, wherever they appear in the file
    pattern readwrite devices/%c/#
    pattern read users/%u/inbox

- `topic [read|write|readwrite|deny] <filter>`: a rule for the anonymous section (before the first `user` line)
  or for the user of the `user` section it is in. The access word is optional and defaults to `readwrite`; when
  it is left out everything after `topic` is the filter, so a filter containing a space needs the access word.
- `user <username>`: starts the section of `username` (the CONNECT username, not the client id; the rest of the
  line, trimmed). Sections of the same user are merged.
- `pattern [read|write|readwrite|deny] <filter>`: a rule for every client. A level that is exactly `%c` matches
  the client id and one that is exactly `%u` the username; `%c`/`%u` with other text in the same level is
  refused (Mosquitto's manual requires the whole level; 2.0 substitutes anyway, 2.1 does not). In `topic` lines
  they are plain text.
- Words are separated by spaces or tabs. Blank lines and lines whose first non-blank character is `#` are
  comments. Anything else is refused with a ConfigError naming the file and line; the filter must be a valid
  MQTT topic filter (`+` and `#` whole levels, `#` last).

Decision for a client (username or None, client id) asking for `access` on a topic or filter:

1. The rules that apply are its section (the anonymous one when it has no username; none for a username without
   a section) and every pattern. A pattern with `%u` never matches a client without a username, and `%c`/`%u`
   never match an empty value.
2. Denied when any applicable `deny` rule matches; otherwise allowed when a rule granting the access matches;
   otherwise denied. A file with no rule for a topic denies it.
3. `Access.READ` (a message on a topic may be delivered) needs `read`/`readwrite`; `Access.WRITE` (the client
   may publish to a topic) needs `write`/`readwrite`. The topic is a concrete topic name; one holding `+` or
   `#` is denied.
4. `Access.SUBSCRIBE` needs `read`/`readwrite` on a rule that covers the whole requested filter, as Mosquitto
   2.1's `mosquitto_sub_matches_acl` decides: level by level, a literal level is covered by the same literal, by
   `+`, by a matching `%c`/`%u` or by a trailing `#`; a `+` in the request only by `+` or `#`; a `#` in the
   request only by `#`. A deny rule refuses the subscription only when it covers the whole filter the same way,
   so `a/#` is allowed next to `deny a/secret/#`: the messages below `a/secret` are then withheld by the READ
   check on delivery, which the gateway makes for every message. A `$share/<group>/` prefix is removed first.
5. Topics and filters starting with `$` (e.g. `$SYS/...`) are matched only by rules whose first level is the
   same literal `$` word, never by a wildcard or `%c`/`%u` there (MQTT 3.1.1 section 4.7.2).

Where this departs from Mosquitto, it is stricter, never more permissive:

- Mosquitto checks the user's section completely before the patterns, so a grant in the section wins over a
  `pattern deny`. Here a deny wins wherever it is written (the manual: "deny topics are handled before topics
  that grant read/write access").
- A username or client id containing `+` or `#` gets no access from pattern grants (as Mosquitto, which denies
  such a client everything the section did not grant); pattern denies still apply. A value containing `/` can
  never equal one level, so its `%c`/`%u` rules never match (Mosquitto 2.1; 2.0 substituted text and let
  client `a/b` into the subtree of client `a`).
- Mosquitto's acl_file allows every SUBSCRIBE and relies on the READ check at delivery alone; point 4 refuses
  subscriptions that could never receive anything, which tells the client early (SUBACK 0x87 / 0x80).
- `$SYS` and `$share` publish restrictions belong to the broker, not to this file, and are not applied here.

Rules are compiled at load into one tree of topic levels per section and one for the patterns, so a check walks
the topic once per tree and costs about the same however many rules the file holds.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from mqtt_bridge.errors import ConfigError

log = logging.getLogger(__name__)

# MQTT topic names and filters carry a 16-bit length.
MAX_TOPIC_BYTES = 65535
SHARE_PREFIX = "$share/"


class Access(enum.Enum):
    """What a client asks to do; see the module docstring for which rule words grant it."""

    READ = "read"  # receive a message published on a concrete topic
    WRITE = "write"  # publish to a concrete topic
    SUBSCRIBE = "subscribe"  # subscribe to a topic filter, wildcards allowed


# Rule effects as bits, so the rules matching a topic combine with `|` while the tree is walked.
_READ = 1
_WRITE = 2
_DENY = 4
_RULE_ACCESS = {"read": _READ, "write": _WRITE, "readwrite": _READ | _WRITE, "deny": _DENY}
_NEEDED = {Access.READ: _READ, Access.WRITE: _WRITE, Access.SUBSCRIBE: _READ}

_CLIENT_ID = "%c"
_USERNAME = "%u"


class _Node:
    """One topic level in a compiled rule tree; `exact`/`subtree` hold the bits of rules ending here / in `#` here."""

    __slots__ = ("client_id", "exact", "literal", "plus", "subtree", "username")

    def __init__(self) -> None:
        self.literal: dict[str, _Node] = {}
        self.plus: _Node | None = None
        self.client_id: _Node | None = None
        self.username: _Node | None = None
        self.exact = 0
        self.subtree = 0

    def add(self, levels: list[str], bits: int, *, placeholders: bool) -> None:
        node = self
        for level in levels:
            if level == "#":
                node.subtree |= bits
                return
            if level == "+":
                node.plus = node.plus or _Node()
                node = node.plus
            elif placeholders and level == _CLIENT_ID:
                node.client_id = node.client_id or _Node()
                node = node.client_id
            elif placeholders and level == _USERNAME:
                node.username = node.username or _Node()
                node = node.username
            else:
                node = node.literal.setdefault(level, _Node())
        node.exact |= bits

    def collect(self, levels: list[str], client_id: str | None, username: str | None) -> int:
        """The bits of every rule in this tree that covers `levels` (a topic name or a valid filter)."""
        bits = 0
        nodes = [self]
        for depth, level in enumerate(levels):
            # MQTT 4.7.2: a wildcard in the first level does not match a topic starting with '$'.
            wildcards = depth > 0 or not level.startswith("$")
            following: list[_Node] = []
            for node in nodes:
                if wildcards:
                    bits |= node.subtree
                if level == "#":
                    continue  # only a rule's '#' covers a requested '#', collected just above
                if wildcards and node.plus is not None:
                    following.append(node.plus)
                if level == "+":
                    continue  # only a rule's '+' (or '#') covers a requested '+'
                child = node.literal.get(level)
                if child is not None:
                    following.append(child)
                if wildcards:
                    if node.client_id is not None and level == client_id:
                        following.append(node.client_id)
                    if node.username is not None and level == username:
                        following.append(node.username)
            if not following:
                return bits
            nodes = following
        for node in nodes:
            # `a/#` covers `a` itself: '#' also matches the parent level.
            bits |= node.exact | node.subtree
        return bits


@dataclass(frozen=True, slots=True)
class AclFile:
    """The compiled rules of one ACL file. Immutable: reload the file to see changes."""

    path: Path
    _anonymous: _Node
    _users: Mapping[str, _Node]
    _patterns: _Node | None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AclFile:
        """Read and compile `path`; raises ConfigError naming the file and line of the first unusable line."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"ACL file {path}: cannot be read ({exc.strerror or exc}); check acl_file in the configuration "
                "and the file's permissions"
            ) from exc
        return _compile(path, raw)

    @property
    def usernames(self) -> frozenset[str]:
        """The users that have a `user` section."""
        return frozenset(self._users)

    def check(self, *, username: str | None, client_id: str, topic: str, access: Access) -> bool:
        """True when the client may do `access` on `topic` (a topic name, or a filter for SUBSCRIBE)."""
        levels = _filter_levels(topic) if access is Access.SUBSCRIBE else _topic_levels(topic)
        if levels is None:
            return False
        section = self._anonymous if username is None else self._users.get(username)
        bits = 0 if section is None else section.collect(levels, None, None)
        if self._patterns is not None and not bits & _DENY:
            found = self._patterns.collect(levels, client_id or None, username or None)
            if _has_wildcard(client_id) or (username is not None and _has_wildcard(username)):
                found &= _DENY  # Mosquitto's guard against ids crafted to widen a pattern
            bits |= found
        return not bits & _DENY and bool(bits & _NEEDED[access])


def _has_wildcard(value: str) -> bool:
    return "+" in value or "#" in value


def _topic_levels(topic: str) -> list[str] | None:
    if not topic or _has_wildcard(topic):
        return None
    return topic.split("/")


def _filter_levels(topic_filter: str) -> list[str] | None:
    if topic_filter.startswith(SHARE_PREFIX):
        group, slash, topic_filter = topic_filter[len(SHARE_PREFIX) :].partition("/")
        if not slash or not group or _has_wildcard(group):
            return None
    if not topic_filter:
        return None
    levels = topic_filter.split("/")
    return levels if _filter_problem(levels) is None else None


def _filter_problem(levels: list[str]) -> str | None:
    """Why `levels` is not a valid MQTT topic filter, or None."""
    for index, level in enumerate(levels):
        if level == "#":
            if index != len(levels) - 1:
                return "'#' must be the last level"
        elif level != "+" and _has_wildcard(level):
            return f"level {level!r}: '+' and '#' must be a whole level"
    return None


def _compile(path: Path, raw: bytes) -> AclFile:
    anonymous = _Node()
    users: dict[str, _Node] = {}
    patterns: _Node | None = None
    section = anonymous
    rule_count = 0
    for number, raw_line in enumerate(raw.splitlines(), start=1):
        where = f"ACL file {path}, line {number}"
        try:
            line = raw_line.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-8 text ({exc.reason})") from exc
        if not line or line.startswith("#"):
            continue
        keyword, *others = line.split(None, 1)
        rest = others[0].strip() if others else ""
        if keyword == "user":
            if not rest:
                raise ConfigError(f"{where}: 'user' needs a username, e.g. 'user alice'")
            section = users.setdefault(rest, _Node())
        elif keyword in ("topic", "pattern"):
            bits, levels = _parse_rule(where, keyword, rest)
            if keyword == "topic":
                section.add(levels, bits, placeholders=False)
            else:
                patterns = patterns or _Node()
                patterns.add(levels, bits, placeholders=True)
            rule_count += 1
        else:
            raise ConfigError(
                f"{where}: unknown keyword {keyword!r}; lines start with 'topic', 'pattern' or 'user', "
                "comments with '#'"
            )
    log.info("loaded %d ACL rule(s) for %d user section(s) from %s", rule_count, len(users), path)
    return AclFile(path, anonymous, MappingProxyType(users), patterns)


def _parse_rule(where: str, keyword: str, rest: str) -> tuple[int, list[str]]:
    """The access bits and filter levels of a `topic`/`pattern` line whose text after the keyword is `rest`."""
    if not rest:
        raise ConfigError(f"{where}: '{keyword}' needs a topic filter, e.g. '{keyword} read sensors/#'")
    words = rest.split(None, 1)
    if len(words) == 1:
        access_word, topic_filter = "readwrite", words[0]
        if topic_filter in _RULE_ACCESS:
            # Mosquitto reads this as a rule for the topic named e.g. "read"; almost surely a missing filter.
            log.warning(
                "%s: '%s %s' grants readwrite on the topic %r; add the topic filter",
                where,
                keyword,
                topic_filter,
                topic_filter,
            )
    else:
        access_word, topic_filter = words[0], words[1].strip()
    bits = _RULE_ACCESS.get(access_word)
    if bits is None:
        raise ConfigError(
            f"{where}: unknown access {access_word!r}; use read, write, readwrite or deny (a filter containing "
            "a space needs the access word before it)"
        )
    levels = topic_filter.split("/")
    problem = _filter_problem(levels)
    if problem is None and len(topic_filter.encode("utf-8")) > MAX_TOPIC_BYTES:
        problem = f"longer than {MAX_TOPIC_BYTES} bytes"
    if problem is None and keyword == "pattern":
        for level in levels:
            if level not in (_CLIENT_ID, _USERNAME) and (_CLIENT_ID in level or _USERNAME in level):
                problem = f"level {level!r}: '%c' and '%u' must be a whole level, e.g. 'devices/%c/#'"
                break
    if problem is not None:
        raise ConfigError(f"{where}: invalid topic filter {topic_filter!r}: {problem}")
    if keyword == "topic" and (_CLIENT_ID in topic_filter or _USERNAME in topic_filter):
        log.warning("%s: '%%c'/'%%u' are plain text in a 'topic' line; use 'pattern' to substitute them", where)
    return bits, levels
