"""ACL files: Mosquitto's acl_file rules, checked against its manual, a plain reference evaluator and the broker."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtt_bridge.access.acl_file import Access, AclFile
from mqtt_bridge.errors import ConfigError

R, W, S = Access.READ, Access.WRITE, Access.SUBSCRIBE


def load(tmp_path: Path, text: str) -> AclFile:
    path = tmp_path / "acl"
    path.write_text(text)
    return AclFile.load(path)


def allowed(acl: AclFile, username: str | None, topic: str, access: Access, client_id: str = "client-1") -> bool:
    return acl.check(username=username, client_id=client_id, topic=topic, access=access)


# --- sections and access words ------------------------------------------------------------------------------------


def test_rules_before_any_user_line_apply_to_anonymous_clients_only(tmp_path: Path) -> None:
    acl = load(tmp_path, "topic read public/#\nuser alice\ntopic alice/#\n")

    assert allowed(acl, None, "public/news", R)
    assert not allowed(acl, "alice", "public/news", R)
    assert not allowed(acl, "bob", "public/news", R)
    assert not allowed(acl, None, "alice/x", R)
    assert allowed(acl, "alice", "alice/x", R)


def test_user_section_applies_to_that_username_only(tmp_path: Path) -> None:
    acl = load(tmp_path, "user alice\ntopic readwrite a/#\nuser bob\ntopic readwrite b/#\n")

    assert allowed(acl, "alice", "a/1", W)
    assert not allowed(acl, "alice", "b/1", W)
    assert allowed(acl, "bob", "b/1", W)
    assert not allowed(acl, "Alice", "a/1", W)  # usernames are case-sensitive
    assert not allowed(acl, "", "a/1", W)  # an empty username is a username, not anonymous
    assert acl.usernames == {"alice", "bob"}


def test_sections_of_the_same_user_are_merged(tmp_path: Path) -> None:
    acl = load(tmp_path, "user alice\ntopic read a\nuser bob\ntopic read b\nuser alice\ntopic read c\n")

    assert allowed(acl, "alice", "a", R)
    assert allowed(acl, "alice", "c", R)
    assert not allowed(acl, "alice", "b", R)


@pytest.mark.parametrize(
    ("word", "read", "write"),
    [("read ", True, False), ("write ", False, True), ("readwrite ", True, True), ("", True, True)],
)
def test_access_words(tmp_path: Path, word: str, read: bool, write: bool) -> None:
    acl = load(tmp_path, f"topic {word}t/x\n")

    assert allowed(acl, None, "t/x", R) is read
    assert allowed(acl, None, "t/x", W) is write
    assert allowed(acl, None, "t/x", S) is read
    assert not allowed(acl, None, "t/y", R)


def test_empty_file_denies_everything(tmp_path: Path) -> None:
    acl = load(tmp_path, "# nothing yet\n\n")

    assert not allowed(acl, None, "a", R)
    assert not allowed(acl, "alice", "a", W)
    assert not allowed(acl, "alice", "#", S)


# --- topic matching -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "topic", "expected"),
    [
        ("a/b", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/b", "a", False),
        ("a/+", "a/b", True),
        ("a/+", "a/", True),  # '+' matches an empty level
        ("a/+", "a/b/c", False),
        ("a/+/c", "a/b/c", True),
        ("a/#", "a", True),  # '#' also matches the parent level
        ("a/#", "a/b/c", True),
        ("a/#", "ab", False),
        ("#", "a/b", True),
        ("+/+", "/x", True),
        ("a/+/#", "a/b", True),
        ("+/x", "$SYS/x", False),  # wildcards in the first level never match '$' topics
        ("#", "$SYS/x", False),
        ("$SYS/#", "$SYS/broker/load", True),
        ("$SYS/+", "$SYS/x", True),
    ],
)
def test_topic_matching(tmp_path: Path, rule: str, topic: str, expected: bool) -> None:
    acl = load(tmp_path, f"topic read {rule}\n")

    assert allowed(acl, None, topic, R) is expected


@pytest.mark.parametrize("topic", ["", "a/+", "a/#", "+", "#", "a+b"])
def test_topic_names_with_wildcards_or_empty_are_denied_for_read_and_write(tmp_path: Path, topic: str) -> None:
    acl = load(tmp_path, "topic readwrite #\n")

    assert allowed(acl, None, "a/b", R)  # the rule itself grants everything
    assert not allowed(acl, None, topic, R)
    assert not allowed(acl, None, topic, W)


def test_topic_with_spaces_needs_the_access_word(tmp_path: Path) -> None:
    acl = load(tmp_path, "topic read room 1/temp\n")

    assert allowed(acl, None, "room 1/temp", R)
    assert not allowed(acl, None, "room 1/temp", W)


def test_tabs_and_indentation_separate_words(tmp_path: Path) -> None:
    acl = load(tmp_path, "  # indented comment\nuser\talice\n\ttopic\twrite\tx/y  \r\n")

    assert allowed(acl, "alice", "x/y", W)
    assert not allowed(acl, "alice", "x/y", R)


def test_topic_named_like_an_access_word_follows_mosquitto_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mqtt_bridge.access.acl_file"):
        acl = load(tmp_path, "topic read\n")

    assert allowed(acl, None, "read", W)  # Mosquitto reads "topic read" as readwrite on the topic "read"
    assert "line 1" in caplog.text


# --- deny -----------------------------------------------------------------------------------------------------------


def test_deny_wins_over_grants_wherever_written(tmp_path: Path) -> None:
    acl = load(tmp_path, "topic readwrite a/#\ntopic deny a/secret/#\ntopic deny b/x\ntopic readwrite b/#\n")

    assert allowed(acl, None, "a/public", R)
    assert not allowed(acl, None, "a/secret", R)
    assert not allowed(acl, None, "a/secret/x", W)
    assert not allowed(acl, None, "b/x", W)  # the deny comes before the grant in the file
    assert allowed(acl, None, "b/y", W)


def test_section_deny_wins_over_pattern_grant(tmp_path: Path) -> None:
    acl = load(tmp_path, "user alice\ntopic deny devices/alice-1/off\npattern readwrite devices/%c/#\n")

    assert allowed(acl, "alice", "devices/alice-1/on", W, client_id="alice-1")
    assert not allowed(acl, "alice", "devices/alice-1/off", W, client_id="alice-1")


def test_pattern_deny_wins_over_section_grant(tmp_path: Path) -> None:
    # Mosquitto lets the section's grant win here (it checks sections before patterns); we let the deny win.
    acl = load(tmp_path, "user bob\ntopic readwrite #\npattern deny devices/%c/locked\n")

    assert allowed(acl, "bob", "devices/other/locked", W, client_id="bob-1")
    assert not allowed(acl, "bob", "devices/bob-1/locked", W, client_id="bob-1")


# --- patterns -----------------------------------------------------------------------------------------------------


def test_pattern_substitutes_client_id_and_username(tmp_path: Path) -> None:
    acl = load(tmp_path, "user alice\ntopic read x\npattern readwrite devices/%c/#\npattern read users/%u/+/%c\n")

    assert allowed(acl, "alice", "devices/dev1/temp", W, client_id="dev1")
    assert not allowed(acl, "alice", "devices/dev2/temp", W, client_id="dev1")
    assert allowed(acl, "alice", "users/alice/inbox/dev1", R, client_id="dev1")
    assert not allowed(acl, "alice", "users/alice/inbox/dev1", W, client_id="dev1")
    assert not allowed(acl, "alice", "users/bob/inbox/dev1", R, client_id="dev1")
    assert not allowed(acl, "alice", "users/alice/inbox/dev2", R, client_id="dev1")
    # patterns apply to users with a section, users without one and anonymous clients alike
    assert allowed(acl, "carol", "devices/dev3/x", W, client_id="dev3")
    assert allowed(acl, None, "devices/dev4/x", W, client_id="dev4")


def test_username_pattern_never_matches_anonymous_clients(tmp_path: Path) -> None:
    acl = load(tmp_path, "pattern read users/%u/#\npattern read both/%u/%c\n")

    assert allowed(acl, "alice", "users/alice/x", R)
    assert not allowed(acl, None, "users//x", R)
    assert not allowed(acl, None, "both//client-1", R)
    assert not allowed(acl, "", "users//x", R)  # an empty value never matches


def test_empty_client_id_never_matches(tmp_path: Path) -> None:
    acl = load(tmp_path, "pattern read c/%c/x\n")

    assert not allowed(acl, None, "c//x", R, client_id="")
    assert allowed(acl, None, "c/id/x", R, client_id="id")


def test_client_id_with_slash_cannot_reach_another_clients_subtree(tmp_path: Path) -> None:
    acl = load(tmp_path, "pattern readwrite devices/%c/#\n")

    assert allowed(acl, None, "devices/a/b/c", W, client_id="a")
    assert not allowed(acl, None, "devices/a/b/c", W, client_id="a/b")
    assert not allowed(acl, None, "devices/a/b", W, client_id="a/b")
    assert not allowed(acl, None, "devices/a/#", S, client_id="a/b")


@pytest.mark.parametrize("client_id", ["+", "#", "a+", "dev#1"])
def test_client_id_with_wildcards_gets_no_pattern_grants(tmp_path: Path, client_id: str) -> None:
    acl = load(tmp_path, "topic read public/#\npattern readwrite devices/%c/#\npattern read all/#\n")

    assert allowed(acl, None, "all/x", R, client_id="fine")
    assert not allowed(acl, None, "all/x", R, client_id=client_id)
    assert not allowed(acl, None, "devices/+/#", S, client_id=client_id)
    assert not allowed(acl, None, "devices/#", S, client_id=client_id)
    assert allowed(acl, None, "public/x", R, client_id=client_id)  # the section still applies


def test_username_with_wildcards_gets_no_pattern_grants_but_pattern_denies_apply(tmp_path: Path) -> None:
    acl = load(tmp_path, "user a#\ntopic readwrite own/#\npattern read all/#\npattern deny own/locked\n")

    assert allowed(acl, "a#", "own/x", W)
    assert not allowed(acl, "a#", "own/locked", W)
    assert not allowed(acl, "a#", "all/x", R)
    assert allowed(acl, "fine", "all/x", R)


def test_placeholders_are_plain_text_in_topic_lines(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mqtt_bridge.access.acl_file"):
        acl = load(tmp_path, "topic read devices/%c\n")

    assert allowed(acl, None, "devices/%c", R, client_id="dev1")
    assert not allowed(acl, None, "devices/dev1", R, client_id="dev1")
    assert "use 'pattern'" in caplog.text


def test_placeholder_cannot_give_a_dollar_topic(tmp_path: Path) -> None:
    acl = load(tmp_path, "pattern read %c/#\n")

    assert allowed(acl, None, "dev1/x", R, client_id="dev1")
    assert not allowed(acl, None, "$SYS/x", R, client_id="$SYS")


# --- subscribe ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "topic_filter", "expected"),
    [
        ("a/#", "a/#", True),
        ("a/#", "a", True),
        ("a/#", "a/b/+", True),
        ("a/#", "a/+/c", True),
        ("a/#", "#", False),
        ("a/#", "+/b", False),
        ("a/+", "a/b", True),
        ("a/+", "a/+", True),
        ("a/+", "a/#", False),  # '#' asks for more than one level
        ("a/+", "a/b/c", False),
        ("a/+", "a", False),
        ("a/b", "a/b", True),
        ("a/b", "a/+", False),  # the request's '+' is wider than the literal
        ("+/b", "+/b", True),
        ("+/b", "a/b", True),
        ("a/+/#", "a/+", True),
        ("a/+/#", "a/#", False),  # 'a/#' includes 'a' itself, which 'a/+/#' does not
        ("#", "#", True),
        ("#", "$SYS/#", False),
        ("$SYS/#", "$SYS/broker/+", True),
        ("#", "$share/group/a/b", True),
        ("a/#", "$share/group/a/+", True),
        ("a/#", "$share/group/b", False),
        ("#", "$share/group/$SYS/x", False),
        ("#", "$share/group", False),  # no filter after the group
        ("#", "$share//a", False),  # empty group name
        ("#", "$share/g+/a", False),
        ("#", "a/#/b", False),  # invalid filters are refused
        ("#", "a+", False),
        ("#", "a/b#", False),
        ("#", "", False),
    ],
)
def test_subscribe_needs_a_read_rule_covering_the_whole_filter(
    tmp_path: Path, rule: str, topic_filter: str, expected: bool
) -> None:
    acl = load(tmp_path, f"topic read {rule}\n")

    assert allowed(acl, None, topic_filter, S) is expected


def test_subscribe_needs_read_access_not_write(tmp_path: Path) -> None:
    acl = load(tmp_path, "topic write w/#\ntopic readwrite rw/#\n")

    assert not allowed(acl, None, "w/#", S)
    assert not allowed(acl, None, "w/x", S)
    assert allowed(acl, None, "rw/x", S)


def test_subscribe_is_refused_only_by_a_deny_covering_the_filter(tmp_path: Path) -> None:
    acl = load(tmp_path, "topic read a/#\ntopic deny a/secret/#\n")

    assert allowed(acl, None, "a/#", S)  # deliveries below a/secret are refused by READ instead
    assert not allowed(acl, None, "a/secret/x", R)
    assert allowed(acl, None, "a/+/x", S)
    assert not allowed(acl, None, "a/secret", S)
    assert not allowed(acl, None, "a/secret/#", S)
    assert not allowed(acl, None, "a/secret/+/y", S)


def test_subscribe_with_patterns(tmp_path: Path) -> None:
    acl = load(tmp_path, "pattern read devices/%c/#\n")

    assert allowed(acl, None, "devices/dev1/#", S, client_id="dev1")
    assert allowed(acl, None, "devices/dev1/+/temp", S, client_id="dev1")
    assert not allowed(acl, None, "devices/+/#", S, client_id="dev1")
    assert not allowed(acl, None, "devices/#", S, client_id="dev1")
    assert not allowed(acl, None, "devices/dev2/#", S, client_id="dev1")


# --- malformed files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("topic", "needs a topic filter"),
        ("pattern   ", "needs a topic filter"),
        ("user", "needs a username"),
        ("topic readd a/b c", "unknown access 'readd'"),
        ("topic read a/#/b", "'#' must be the last level"),
        ("topic read a/b#", "must be a whole level"),
        ("pattern read a+/x", "must be a whole level"),
        ("pattern read devices/dev-%c", "'%c' and '%u' must be a whole level"),
        ("pattern read %u%c/x", "'%c' and '%u' must be a whole level"),
        ("Topic read a", "unknown keyword 'Topic'"),
        ("grant read a", "unknown keyword 'grant'"),
        ("topic read " + "x" * 65536, "longer than 65535 bytes"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    path = tmp_path / "acl"
    path.write_text(f"# header\ntopic read ok/#\n\nuser alice\n{bad_line}\ntopic ok\n")

    with pytest.raises(ConfigError) as caught:
        AclFile.load(path)

    assert f"ACL file {path}, line 5:" in str(caught.value)
    assert message in str(caught.value)


def test_not_utf8_is_refused_with_line(tmp_path: Path) -> None:
    path = tmp_path / "acl"
    path.write_bytes(b"topic read a\ntopic read b\xff\n")

    with pytest.raises(ConfigError, match=r"line 2: not UTF-8"):
        AclFile.load(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ACL file .*missing.*cannot be read"):
        AclFile.load(tmp_path / "missing")


# --- the compiled tree against a plain evaluator of the documented rules -----------------------------------------


# (section user or None, is pattern, access word, filter)
Rule = tuple[str | None, bool, str, str]


def reference_covers(rule: list[str], request: list[str], client_id: str, username: str | None, pattern: bool) -> bool:
    """Does `rule` cover `request`, by the module docstring's definition, one rule at a time."""
    placeholders = {"%c": client_id or None, "%u": username or None} if pattern else {}
    if request[0].startswith("$") and (rule[0] in ("+", "#") or rule[0] in placeholders):
        return False
    for index, level in enumerate(rule):
        if level == "#":
            return True
        if index >= len(request):
            return False
        wanted = request[index]
        if wanted == "#" or (wanted == "+" and level != "+"):
            return False
        if level == "+":
            continue
        if placeholders.get(level, level) != wanted:  # a missing value (None) matches nothing
            return False
    return len(request) == len(rule)


def reference_check(rules: list[Rule], username: str | None, client_id: str, topic: str, access: Access) -> bool:
    """The decision for one request, by the module docstring's rules, scanning every rule."""
    if not topic:
        return False
    if access is Access.SUBSCRIBE and topic.startswith("$share/"):
        topic = topic.split("/", 2)[2]
    request = topic.split("/")
    if access is not Access.SUBSCRIBE and ("+" in topic or "#" in topic):
        return False
    tainted = any(char in value for value in (client_id, username or "") for char in "+#")
    needed = "write" if access is Access.WRITE else "read"
    granted = False
    for section, pattern, word, topic_filter in rules:
        if not pattern and section != username:
            continue
        if not reference_covers(topic_filter.split("/"), request, client_id, username, pattern):
            continue
        if word == "deny":
            return False
        if needed in word and not (pattern and tainted):
            granted = True
    return granted


LEVELS = st.sampled_from(["a", "b", "$s", ""])
RULE_LEVELS = st.one_of(LEVELS, st.sampled_from(["+", "%c", "%u"]))
NAMES = st.sampled_from(["a", "b", "$s", "+", "b#"])


@st.composite
def filters(draw: st.DrawFn, levels: st.SearchStrategy[str], wildcards: bool) -> str:
    parts = draw(st.lists(levels, min_size=0 if wildcards else 1, max_size=3))
    if wildcards and (not parts or draw(st.booleans())):
        parts.append("#")
    return "/".join(parts)


RULES = st.lists(
    st.tuples(
        st.sampled_from([None, "a", "b"]),
        st.booleans(),
        st.sampled_from(["read", "write", "readwrite", "deny"]),
        filters(RULE_LEVELS, wildcards=True).filter(bool),  # an empty filter is a different line
    ),
    max_size=5,
)
REQUESTS = st.lists(
    st.tuples(
        st.one_of(st.none(), NAMES),
        NAMES,
        st.one_of(filters(LEVELS, wildcards=False), filters(st.one_of(LEVELS, st.just("+")), wildcards=True)),
        st.sampled_from(list(Access)),
    ),
    min_size=1,
    max_size=25,
)


def render(rules: list[Rule]) -> str:
    lines = [
        f"{'pattern' if pattern else 'topic'} {word} {text}" for section, pattern, word, text in rules if not section
    ]
    for user in ("a", "b"):
        lines.append(f"user {user}")
        lines += [f"topic {word} {text}" for section, pattern, word, text in rules if section == user and not pattern]
    return "\n".join(lines) + "\n"


@settings(max_examples=400)
@given(rules=RULES, requests=REQUESTS)
def test_compiled_rules_agree_with_reference_evaluator(
    tmp_path_factory: pytest.TempPathFactory,
    rules: list[Rule],
    requests: list[tuple[str | None, str, str, Access]],
) -> None:
    # Patterns are rendered in the anonymous part, so a pattern's own section is meaningless: normalise it.
    rules = [(None if pattern else section, pattern, word, text) for section, pattern, word, text in rules]
    path = tmp_path_factory.mktemp("acl") / "acl"
    path.write_text(render(rules))
    acl = AclFile.load(path)

    for username, client_id, topic, access in requests:
        expected = reference_check(rules, username, client_id, topic, access)
        actual = acl.check(username=username, client_id=client_id, topic=topic, access=access)
        assert actual is expected, (username, client_id, topic, access)
