"""Reading plain_acl.yml (acl/acl_file.py): what is accepted, and every refusal with its full message:
file, line and column, the account by index and accessKey, the key, what to do."""

from pathlib import Path

import pytest

from acl.access_control import AclPerm
from acl.acl_file import load_acl_file, parse_acl_text
from acl.errors import AclFileError

GOOD_ACCOUNT = """\
  - accessKey: RocketMQ
    secretKey: "12345678"
"""


def refusal(text: str) -> str:
    with pytest.raises(AclFileError) as caught:
        parse_acl_text(text, "acl.yml")
    error = caught.value
    assert str(error) == f"acl.yml:{error.line}:{error.column}: {error.reason}"
    return str(error)


def test_rocketmqs_own_example_file_is_read():
    # distribution/conf/plain_acl.yml of RocketMQ 4.x/5.x, without its address white lists (not supported here).
    access = parse_acl_text(
        """\
globalWhiteRemoteAddresses:

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    # if it is admin, it could access all resources
    admin: true
""",
        "plain_acl.yml",
    )
    first, second = access.accounts["RocketMQ"], access.accounts["rocketmq2"]
    assert first.secret_key == "12345678" and not first.admin
    assert (first.default_topic_perm, first.default_group_perm) == (AclPerm.DENY, AclPerm.SUB)
    assert dict(first.topic_perms) == {
        "topicA": AclPerm.DENY,
        "topicB": AclPerm.PUB | AclPerm.SUB,
        "topicC": AclPerm.SUB,
    }
    assert dict(first.group_perms) == {
        "groupA": AclPerm.DENY,
        "groupB": AclPerm.PUB | AclPerm.SUB,
        "groupC": AclPerm.SUB,
    }
    assert second.admin and (second.default_topic_perm, second.default_group_perm) == (AclPerm.DENY, AclPerm.DENY)
    assert access.source == "plain_acl.yml"


def test_a_number_written_without_quotes_is_the_key_as_written():
    # YAML reads 01234567 as the octal number 342391; the client is given the text it sees in the file. (A gRPC
    # client signing with it: tests/proxy/test_signature.py.)
    access = parse_acl_text("accounts:\n  - accessKey: 76543210\n    secretKey: 01234567\n")
    assert dict(access.secret_keys) == {"76543210": "01234567"}


def test_spaces_around_names_and_words_are_trimmed_and_sub_pub_is_pub_sub():
    access = parse_acl_text(f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - ' orders = SUB|PUB '\n")
    assert dict(access.accounts["RocketMQ"].topic_perms) == {"orders": AclPerm.PUB | AclPerm.SUB}


def test_empty_lists_of_entries_are_accepted():
    access = parse_acl_text(f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n    groupPerms: []\n")
    assert dict(access.accounts["RocketMQ"].topic_perms) == {}


def test_load_acl_file_names_the_path(tmp_path: Path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(f"accounts:\n{GOOD_ACCOUNT}")
    assert load_acl_file(path).source == str(path)
    path.write_text(f"accounts:\n{GOOD_ACCOUNT}    topicPerm: []\n")
    with pytest.raises(AclFileError) as caught:
        load_acl_file(path)
    assert str(caught.value).startswith(f"{path}:4:5: account #1 (accessKey 'RocketMQ'): unknown key 'topicPerm'")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "acl.yml:1:1: the file is empty; it needs an 'accounts' list"),
        (
            "- a\n",
            "acl.yml:1:1: the file must be a mapping of keys (accounts, globalWhiteRemoteAddresses, dataVersion)",
        ),
        ("acounts: []\n", "acl.yml:1:1: the file: unknown key 'acounts'; did you mean 'accounts'?"),
        ("globalWhiteRemoteAddresses: []\n", "acl.yml:1:1: the file has no 'accounts' list"),
        ("accounts: []\n", "acl.yml:1:11: accounts is empty: every client would be refused; add an account"),
        ("accounts: {}\n", "acl.yml:1:11: accounts must be a list"),
        (
            f"accounts:\n{GOOD_ACCOUNT}    secretkey: x\n",
            "acl.yml:4:5: account #1 (accessKey 'RocketMQ'): unknown key 'secretkey'; did you mean 'secretKey'?",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    admin: true\n    admin: false\n",
            "acl.yml:5:5: account #1 (accessKey 'RocketMQ'): 'admin' given twice",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}  - secretKey: '12345678'\n",
            "acl.yml:4:5: account #2: 'accessKey' is missing",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n",
            "acl.yml:2:5: account #1 (accessKey 'RocketMQ'): 'secretKey' is missing",
        ),
        (
            "accounts:\n  - accessKey:\n    secretKey: '12345678'\n",
            "acl.yml:2:15: account #1: accessKey is empty",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: '123456'\n",
            "acl.yml:3:16: account #1 (accessKey 'RocketMQ'): secretKey has 6 characters; RocketMQ requires at "
            "least 7, give a longer one",
        ),
        (
            "accounts:\n  - accessKey: Rocket\n    secretKey: '12345678'\n",
            "acl.yml:2:16: account #1 (accessKey 'Rocket'): accessKey has 6 characters; RocketMQ requires at "
            "least 7, give a longer one",
        ),
        (
            "accounts:\n  - accessKey: RocketMQ\n    secretKey: 3.14159265\n",
            "acl.yml:3:16: account #1 (accessKey 'RocketMQ'): secretKey must be text; put it in quotes",
        ),
        (
            "accounts:\n  - accessKey: team/orders\n    secretKey: '12345678'\n",
            "acl.yml:2:16: account #1 (accessKey 'team/orders'): accessKey may hold printable ASCII other than ',' "
            "and '/' and no spaces: a gRPC client sends it in the authorization header, which could not carry it",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}{GOOD_ACCOUNT}",
            "acl.yml:4:5: account #2 (accessKey 'RocketMQ'): the accessKey of account #1 (line 2) too; each account "
            "needs its own",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    admin: 'yes'\n",
            "acl.yml:4:12: account #1 (accessKey 'RocketMQ'): admin must be true or false",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    defaultTopicPerm: READ\n",
            "acl.yml:4:23: account #1 (accessKey 'RocketMQ'): defaultTopicPerm: unknown permission 'READ'; use "
            "DENY, PUB, SUB or PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    defaultGroupPerm:\n",
            "acl.yml:4:22: account #1 (accessKey 'RocketMQ'): defaultGroupPerm must be one of DENY, PUB, SUB or "
            "PUB|SUB (leaving it out means DENY)",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - topicA=pub\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: entry 'topicA=pub': unknown permission "
            "'pub'; use DENY, PUB, SUB or PUB|SUB; write it in upper case, 'PUB'",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - topicA=DENY|PUB\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: entry 'topicA=DENY|PUB': unknown "
            "permission 'DENY|PUB'; use DENY, PUB, SUB or PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - topicA\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: entry 'topicA' is not 'name=PERM' (one "
            "'='), such as topicA=PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    groupPerms:\n      - groupA=SUB=PUB\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): groupPerms: entry 'groupA=SUB=PUB' is not "
            "'name=PERM' (one '='), such as groupA=PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    groupPerms:\n      - =SUB\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): groupPerms: entry '=SUB' is not 'name=PERM' (one "
            "'='), such as groupA=PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - topicA: PUB\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: each entry is text 'name=PERM', such as "
            "topicA=PUB|SUB",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms: topicA=PUB\n",
            "acl.yml:4:17: account #1 (accessKey 'RocketMQ'): topicPerms must be a list",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - my topic=PUB\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: topic name 'my topic' has a space; names "
            "have none",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - topicA=PUB\n      - topicA=SUB\n",
            "acl.yml:6:9: account #1 (accessKey 'RocketMQ'): topicPerms: 'topicA' is given twice (also at line 5)",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    topicPerms:\n      - '%RETRY%groupA=SUB'\n",
            "acl.yml:5:9: account #1 (accessKey 'RocketMQ'): topicPerms: '%RETRY%groupA' is a retry topic; "
            "permissions on it are its group's: write groupA=SUB under groupPerms",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}    whiteRemoteAddress: 192.168.0.*\n",
            "acl.yml:4:5: account #1 (accessKey 'RocketMQ'): 'whiteRemoteAddress' is not supported yet: in "
            "RocketMQ a matching client address skips the account's signature and permission checks; give the "
            "clients credentials instead",
        ),
        (
            f"globalWhiteRemoteAddresses:\n  - 10.10.103.*\naccounts:\n{GOOD_ACCOUNT}",
            "acl.yml:1:1: the file: 'globalWhiteRemoteAddresses' is not supported yet: in RocketMQ a matching "
            "client address skips authentication; give the clients credentials instead",
        ),
        (
            f"accounts:\n{GOOD_ACCOUNT}dataVersion:\n  - counter: 1\n    timestamp: 1700000000000\n",
            "acl.yml:4:1: the file: 'dataVersion' is not supported yet: RocketMQ's admin tools count their edits "
            "of the file in it and it grants nothing; delete it",
        ),
    ],
)
def test_a_bad_file_is_refused_where_and_why(text: str, expected: str):
    assert refusal(text) == expected


def test_a_file_that_is_not_yaml_is_refused_at_the_error():
    # libyaml and pyyaml's own parser word the problem differently; both give its position.
    assert refusal("accounts: [\n").startswith("acl.yml:2:1: not valid YAML: ")


def test_unsupported_keys_left_empty_are_accepted():
    text = f"globalWhiteRemoteAddresses: []\ndataVersion: ~\naccounts:\n{GOOD_ACCOUNT}    whiteRemoteAddress: ''\n"
    assert list(parse_acl_text(text).accounts) == ["RocketMQ"]
