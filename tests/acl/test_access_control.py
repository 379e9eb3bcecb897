"""The permission decision (acl/access_control.py) on RocketMQ's example plain_acl.yml, and on generated files
against a plain reference evaluator of RocketMQ's PlainPermissionChecker rules."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acl.access_control import AccessControl, Account, AclPerm, Action, ResourceKind, permits
from acl.acl_file import parse_acl_text
from acl.errors import Forbidden, Unauthenticated

TOPIC, GROUP = ResourceKind.TOPIC, ResourceKind.GROUP
PUB, SUB, ANY = Action.PUB, Action.SUB, Action.ANY

EXAMPLE = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
    topicPerms:
      - topicA=DENY
"""


@pytest.fixture(scope="module")
def access() -> AccessControl:
    return parse_acl_text(EXAMPLE, "plain_acl.yml")


@pytest.mark.parametrize(
    ("kind", "name", "action", "allowed"),
    [
        (TOPIC, "topicA", PUB, False),
        (TOPIC, "topicA", SUB, False),
        (TOPIC, "topicA", ANY, False),
        (TOPIC, "topicB", PUB, True),
        (TOPIC, "topicB", SUB, True),
        (TOPIC, "topicC", SUB, True),
        (TOPIC, "topicC", PUB, False),
        (TOPIC, "topicC", ANY, True),
        (TOPIC, "unlisted", SUB, False),
        (TOPIC, "unlisted", ANY, False),
        (GROUP, "groupA", SUB, False),
        (GROUP, "groupB", PUB, True),
        (GROUP, "unlisted", SUB, True),
        (GROUP, "unlisted", PUB, False),
        # A retry topic is its group: groupA's DENY, the default group SUB, not the default topic DENY.
        (TOPIC, "%RETRY%groupA", SUB, False),
        (TOPIC, "%RETRY%unlisted", SUB, True),
        (TOPIC, "%RETRY%groupB", PUB, True),
        (TOPIC, "%DLQ%groupB", SUB, False),
        (TOPIC, "", SUB, False),
    ],
)
def test_the_example_file_decides_as_rocketmq(access, kind, name, action, allowed):
    if allowed:
        access.check("RocketMQ", kind, name, action)
    else:
        with pytest.raises(Forbidden):
            access.check("RocketMQ", kind, name, action)


def test_an_admin_may_do_everything_whatever_its_entries(access):
    for kind, name in [(TOPIC, "topicA"), (TOPIC, "anything"), (GROUP, "g"), (TOPIC, "%RETRY%g")]:
        for action in Action:
            access.check("rocketmq2", kind, name, action)


def test_a_refusal_names_the_account_resource_permission_and_what_to_change(access):
    with pytest.raises(Forbidden) as caught:
        access.check("RocketMQ", TOPIC, "topicC", PUB)
    assert str(caught.value) == (
        "access key 'RocketMQ' lacks PUB on topic 'topicC': its topicPerms entry is topicC=SUB; "
        "change it in plain_acl.yml, such as topicC=PUB|SUB"
    )
    assert (caught.value.access_key, caught.value.kind, caught.value.name, caught.value.action) == (
        "RocketMQ",
        "topic",
        "topicC",
        "PUB",
    )
    with pytest.raises(Forbidden) as caught:
        access.check("RocketMQ", TOPIC, "orders", ANY)
    assert str(caught.value) == (
        "access key 'RocketMQ' lacks PUB or SUB on topic 'orders': no topicPerms entry names it and "
        "defaultTopicPerm is DENY; add a topicPerms entry to its account in plain_acl.yml, such as orders=PUB|SUB"
    )
    with pytest.raises(Forbidden) as caught:
        access.check("RocketMQ", TOPIC, "%RETRY%groupA", SUB)
    assert str(caught.value).startswith(
        "access key 'RocketMQ' lacks SUB on group 'groupA' (retry topic '%RETRY%groupA'): its groupPerms entry is "
        "groupA=DENY"
    )
    assert (caught.value.kind, caught.value.name) == ("group", "groupA")


def test_deny_wins_over_any_bit_held_with_it():
    # A file cannot write DENY|PUB, but an Account built in code can: RocketMQ's checkPermission refuses it.
    for action in Action:
        assert not permits(AclPerm.DENY | AclPerm.PUB | AclPerm.SUB, action)
        assert permits(AclPerm.PUB | AclPerm.SUB, action)
    assert [permits(AclPerm.SUB, action) for action in Action] == [False, True, True]


def test_an_unknown_access_key_is_unauthenticated(access):
    with pytest.raises(Unauthenticated, match="unknown access key 'ghost'"):
        access.check("ghost", TOPIC, "topicB", SUB)


def test_the_secret_keys_are_the_files_and_read_only(access):
    assert dict(access.secret_keys) == {"RocketMQ": "12345678", "rocketmq2": "12345678"}
    with pytest.raises(TypeError):
        access.secret_keys["intruder"] = "secret12"  # type: ignore[index]


def test_the_table_cannot_be_changed_after_a_door_has_it(access):
    with pytest.raises(TypeError):
        access.accounts["intruder"] = access.accounts["RocketMQ"]  # type: ignore[index]
    with pytest.raises(TypeError):
        access.accounts["RocketMQ"].topic_perms["topicA"] = AclPerm.PUB  # type: ignore[index]
    assert "12345678" not in repr(access)


def test_an_account_filed_under_another_key_is_refused():
    with pytest.raises(ValueError, match="filed under access key 'b'"):
        AccessControl({"b": Account("a1234567", "secret12")})


# The reference: RocketMQ's rules written out plainly, on permission words rather than bits.
WORDS = ["DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB"]
NAMES = st.text("ab", min_size=1, max_size=2)


def reference(account: dict, kind: str, name: str, action: str) -> bool:
    if account["admin"]:
        return True
    if kind == "topic" and name.startswith("%RETRY%"):
        kind, name = "group", name[len("%RETRY%") :]
    if name == "":
        return False
    entries = account["topicPerms"] if kind == "topic" else account["groupPerms"]
    default = account["defaultTopicPerm"] if kind == "topic" else account["defaultGroupPerm"]
    held = set(entries.get(name, default).split("|"))
    if "DENY" in held:
        return False
    if action == "ANY":
        return "PUB" in held or "SUB" in held
    return action in held


def as_yaml(account: dict) -> str:
    lines = ["accounts:", "  - accessKey: generated", "    secretKey: generated-secret"]
    lines.append(f"    admin: {str(account['admin']).lower()}")
    for key in ("defaultTopicPerm", "defaultGroupPerm"):
        lines.append(f"    {key}: {account[key]}")
    for key in ("topicPerms", "groupPerms"):
        lines.append(f"    {key}:")
        lines += [f"      - {name}={word}" for name, word in account[key].items()]
    return "\n".join(lines) + "\n"


accounts = st.fixed_dictionaries(
    {
        "admin": st.booleans(),
        "defaultTopicPerm": st.sampled_from(WORDS),
        "defaultGroupPerm": st.sampled_from(WORDS),
        "topicPerms": st.dictionaries(NAMES, st.sampled_from(WORDS), max_size=4),
        "groupPerms": st.dictionaries(NAMES, st.sampled_from(WORDS), max_size=4),
    }
)
queries = st.tuples(
    st.sampled_from(["topic", "group"]),
    st.one_of(NAMES, NAMES.map(lambda name: "%RETRY%" + name), st.just(""), st.just("%RETRY%")),
    st.sampled_from(["PUB", "SUB", "ANY"]),
)


@given(account=accounts, query_list=st.lists(queries, min_size=1, max_size=20))
def test_the_decision_matches_the_reference(account: dict, query_list: list[tuple[str, str, str]]):
    access = parse_acl_text(as_yaml(account), "generated.yml")
    for kind, name, action in query_list:
        expected = reference(account, kind, name, action)
        try:
            access.check("generated", ResourceKind(kind), name, Action(action))
        except Forbidden as refused:
            assert not expected, f"{kind} {name!r} {action}: refused ({refused}), the reference allows it"
            assert "access key 'generated'" in str(refused)
            assert ("PUB or SUB" if action == "ANY" else action) in str(refused)
        else:
            assert expected, f"{kind} {name!r} {action}: allowed, the reference refuses it"
