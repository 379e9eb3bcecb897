"""RocketMQ's plain_acl.yml (ACL 1.0, RocketMQ 4.4 to 5.3.2), read into an AccessControl: the file of `[grpc] acl_file`
and of the remoting port's `[remoting] acl_file`.

    accounts:
      - accessKey: RocketMQ           # at least 7 characters (RocketMQ refuses 6 or fewer), unique in the file
        secretKey: "12345678"         # at least 7 characters
        admin: false                  # optional, false; true may do everything, its entries are not consulted
        defaultTopicPerm: DENY        # optional, DENY: for topics that no topicPerms entry names
        defaultGroupPerm: SUB         # optional, DENY: for groups that no groupPerms entry names
        topicPerms:                   # optional: name=PERM, one per topic
          - topicA=DENY
          - topicB=PUB|SUB
        groupPerms:                   # optional: name=PERM, one per group (RocketMQ checks it on %RETRY%<group>)
          - groupA=DENY
          - groupB=PUB|SUB

A permission is DENY, PUB, SUB, PUB|SUB or SUB|PUB (upper case, as RocketMQ's Permission.parsePermFromString reads
it). A key written without quotes as a number (`secretKey: 12345678`) is taken as written, as RocketMQ's YAML
binding does for its String fields.

RocketMQ keys that are not implemented are accepted only when empty, which is what they mean in RocketMQ too:
- globalWhiteRemoteAddresses and an account's whiteRemoteAddress: in RocketMQ a client whose address matches skips
  the signature check and, for the account's list, every permission check as well. Behind a NAT or a proxy the
  address says little about the client, and a half-done copy of RocketMQ's pattern language (`*`, `10.0.0.1,2,3`,
  `10.0.0.{1,2}`, `10.0.0.1-9`, their IPv6 forms) would be worse than none; give the clients credentials instead.
- dataVersion: RocketMQ's admin tools count their edits of the file in it; it grants nothing.

Stricter than RocketMQ, which logs and goes on, or silently takes one of two values: unknown keys, a permission
word it does not know (RocketMQ reads it as DENY), a `name=PERM` entry given twice (RocketMQ keeps the last), an
accessKey given twice (RocketMQ keeps the first), an entry whose name starts with %RETRY% (RocketMQ would mix it
with the groups' entries), an accessKey the signature header cannot carry. Each is refused as
`file:line:column: account #N (accessKey 'x'): key: reason` at the offending YAML node.

Files are composed with libyaml when pyyaml has it (yaml.CSafeLoader): nodes keep their positions for the errors.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from acl.access_control import AccessControl, Account, AclPerm
from acl.errors import AclFileError
from core import RETRY_PREFIX

_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# RocketMQ's PlainPermissionManager.checkPlainAccessConfig refuses keys of length <= 6
# (AclConstants.ACCESS_KEY_MIN_LENGTH, SECRET_KEY_MIN_LENGTH).
MIN_ACCESS_KEY_LENGTH = 7
MIN_SECRET_KEY_LENGTH = 7
# A gRPC client sends the access key in the authorization header (proxy/signature.py): metadata values are printable
# ASCII, ',' separates the header's pairs, '/' ends the access key in Credential (the Go and C++ clients append region
# and service), and spaces around it are trimmed. A key with any of those could never authenticate there. A remoting
# client's extField could carry it, but one file serves both doors, so the narrower rule holds for both.
_ACCESS_KEY = re.compile(r"[!-~]+")
_ACCESS_KEY_FORBIDDEN = ",/"

PERMISSION_WORDS = {
    "DENY": AclPerm.DENY,
    "PUB": AclPerm.PUB,
    "SUB": AclPerm.SUB,
    "PUB|SUB": AclPerm.PUB | AclPerm.SUB,
    "SUB|PUB": AclPerm.PUB | AclPerm.SUB,
}
_WORDS = "DENY, PUB, SUB or PUB|SUB"

_FILE_KEYS = ("accounts", "globalWhiteRemoteAddresses", "dataVersion")
_ACCOUNT_KEYS = (
    "accessKey",
    "secretKey",
    "admin",
    "defaultTopicPerm",
    "defaultGroupPerm",
    "topicPerms",
    "groupPerms",
    "whiteRemoteAddress",
)
# RocketMQ keys without an implementation here: accepted only when empty. The reason is part of the refusal.
_NOT_SUPPORTED = {
    "globalWhiteRemoteAddresses": "in RocketMQ a matching client address skips authentication; give the clients "
    "credentials instead",
    "whiteRemoteAddress": "in RocketMQ a matching client address skips the account's signature and permission "
    "checks; give the clients credentials instead",
    "dataVersion": "RocketMQ's admin tools count their edits of the file in it and it grants nothing; delete it",
}

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"


def load_acl_file(path: str | Path) -> AccessControl:
    """Reads the ACL file at `path`; raises AclFileError (with file, line and column) if it cannot be used, and
    OSError if it cannot be read."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_acl_text(text, str(path))


def parse_acl_text(text: str, path: str = "<acl>") -> AccessControl:
    """Reads an ACL file's text; `path` names it in errors and in the AccessControl's refusals."""
    reader = _Reader(path)
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise AclFileError(path, line, column, f"not valid YAML: {error.problem or error}") from error
    if root is None:
        raise AclFileError(path, 1, 1, "the file is empty; it needs an 'accounts' list")
    keys = reader.mapping(root, "the file", _FILE_KEYS)
    for key in keys:
        if key in _NOT_SUPPORTED:
            reader.refuse_unless_empty(keys[key], key, "the file")
    if "accounts" not in keys:
        raise reader.error(root, "the file has no 'accounts' list")
    account_nodes = reader.sequence(keys["accounts"][1], "accounts")
    if not account_nodes:
        raise reader.error(keys["accounts"][1], "accounts is empty: every client would be refused; add an account")
    accounts: dict[str, Account] = {}
    first_seen: dict[str, tuple[int, Node]] = {}
    for index, node in enumerate(account_nodes, start=1):
        account = reader.account(node, index)
        if account.access_key in accounts:
            first_index, first_node = first_seen[account.access_key]
            raise reader.error(
                node,
                f"account #{index} (accessKey {account.access_key!r}): the accessKey of account #{first_index} "
                f"(line {first_node.start_mark.line + 1}) too; each account needs its own",
            )
        accounts[account.access_key] = account
        first_seen[account.access_key] = (index, node)
    return AccessControl(accounts, source=path)


class _Reader:
    """Reads one file's node tree, raising AclFileError at the offending node."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, node: Node, reason: str) -> AclFileError:
        return AclFileError(self.path, node.start_mark.line + 1, node.start_mark.column + 1, reason)

    def mapping(self, node: Node, what: str, allowed: Sequence[str]) -> dict[str, tuple[Node, Node]]:
        """The key and value nodes of a mapping, by key; refuses keys given twice and keys not in `allowed`."""
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping of keys ({', '.join(allowed)})")
        found: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag != _STR:
                raise self.error(key_node, f"{what}: keys must be text")
            key = key_node.value
            if key in found:
                raise self.error(key_node, f"{what}: {key!r} given twice")
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(allowed)}"
                raise self.error(key_node, f"{what}: unknown key {key!r}; {hint}")
            found[key] = (key_node, value_node)
        return found

    def sequence(self, node: Node, what: str) -> list[Node]:
        if isinstance(node, ScalarNode) and node.tag == _NULL:
            return []
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"{what} must be a list")
        return list(node.value)

    def refuse_unless_empty(self, key_and_value: tuple[Node, Node], key: str, what: str) -> None:
        key_node, value = key_and_value
        empty = (isinstance(value, ScalarNode) and (value.tag == _NULL or value.value == "")) or (
            isinstance(value, SequenceNode | MappingNode) and not value.value
        )
        if not empty:
            raise self.error(key_node, f"{what}: {key!r} is not supported yet: {_NOT_SUPPORTED[key]}")

    def account(self, node: Node, index: int) -> Account:
        what = f"account #{index}"
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                named = isinstance(key_node, ScalarNode) and key_node.value == "accessKey"
                if named and isinstance(value_node, ScalarNode) and value_node.value:
                    what = f"account #{index} (accessKey {value_node.value!r})"
        keys = self.mapping(node, what, _ACCOUNT_KEYS)
        if "whiteRemoteAddress" in keys:
            self.refuse_unless_empty(keys["whiteRemoteAddress"], "whiteRemoteAddress", what)
        for required in ("accessKey", "secretKey"):
            if required not in keys:
                raise self.error(node, f"{what}: {required!r} is missing")
        access_key = self.key_text(keys["accessKey"][1], f"{what}: accessKey", MIN_ACCESS_KEY_LENGTH)
        if _ACCESS_KEY.fullmatch(access_key) is None or any(c in access_key for c in _ACCESS_KEY_FORBIDDEN):
            raise self.error(
                keys["accessKey"][1],
                f"{what}: accessKey may hold printable ASCII other than ',' and '/' and no spaces: a gRPC "
                "client sends it in the authorization header, which could not carry it",
            )
        secret_key = self.key_text(keys["secretKey"][1], f"{what}: secretKey", MIN_SECRET_KEY_LENGTH)
        admin = False
        if "admin" in keys:
            value = keys["admin"][1]
            if not isinstance(value, ScalarNode) or value.tag != _BOOL:
                raise self.error(value, f"{what}: admin must be true or false")
            # YAML 1.1 booleans, as pyyaml (and RocketMQ's snakeyaml) resolve them: true/yes/on, false/no/off.
            admin = value.value.lower() in ("true", "yes", "on")
        return Account(
            access_key=access_key,
            secret_key=secret_key,
            admin=admin,
            default_topic_perm=self.default_perm(keys, "defaultTopicPerm", what),
            default_group_perm=self.default_perm(keys, "defaultGroupPerm", what),
            topic_perms=self.entries(keys, "topicPerms", what),
            group_perms=self.entries(keys, "groupPerms", what),
        )

    def key_text(self, node: Node, what: str, min_length: int) -> str:
        """An accessKey or secretKey, as written: a number written without quotes is taken as its digits."""
        if not isinstance(node, ScalarNode) or node.tag == _NULL or not node.value:
            raise self.error(node, f"{what} is empty")
        if node.tag not in (_STR, _INT):
            raise self.error(node, f"{what} must be text; put it in quotes")
        text: str = node.value
        if len(text) < min_length:
            raise self.error(
                node, f"{what} has {len(text)} characters; RocketMQ requires at least {min_length}, give a longer one"
            )
        return text

    def default_perm(self, keys: dict[str, tuple[Node, Node]], key: str, what: str) -> AclPerm:
        if key not in keys:
            # RocketMQ: Permission.parsePermFromString(null) is DENY.
            return AclPerm.DENY
        node = keys[key][1]
        if not isinstance(node, ScalarNode) or node.tag != _STR or not node.value:
            raise self.error(node, f"{what}: {key} must be one of {_WORDS} (leaving it out means DENY)")
        return self.perm_word(node, node.value, f"{what}: {key}")

    def perm_word(self, node: Node, text: str, what: str) -> AclPerm:
        word = text.strip()
        perm = PERMISSION_WORDS.get(word)
        if perm is not None:
            return perm
        hint = f"; write it in upper case, {word.upper()!r}" if word.upper() in PERMISSION_WORDS else ""
        raise self.error(node, f"{what}: unknown permission {word!r}; use {_WORDS}{hint}")

    def entries(self, keys: dict[str, tuple[Node, Node]], key: str, what: str) -> dict[str, AclPerm]:
        """A topicPerms or groupPerms list as a mapping of name to permission."""
        if key not in keys:
            return {}
        kind = "topic" if key == "topicPerms" else "group"
        example = f"{kind}A=PUB|SUB"
        perms: dict[str, AclPerm] = {}
        lines: dict[str, int] = {}
        for node in self.sequence(keys[key][1], f"{what}: {key}"):
            if not isinstance(node, ScalarNode) or node.tag != _STR:
                raise self.error(node, f"{what}: {key}: each entry is text 'name=PERM', such as {example}")
            name, equals, word = node.value.partition("=")
            name = name.strip()
            if not equals or "=" in word or not name or not word.strip():
                raise self.error(
                    node, f"{what}: {key}: entry {node.value!r} is not 'name=PERM' (one '='), such as {example}"
                )
            if any(c.isspace() for c in name):
                raise self.error(node, f"{what}: {key}: {kind} name {name!r} has a space; names have none")
            if name.startswith(RETRY_PREFIX):
                raise self.error(
                    node,
                    f"{what}: {key}: {name!r} is a retry topic; permissions on it are its group's: write "
                    f"{name[len(RETRY_PREFIX) :]}={word.strip()} under groupPerms",
                )
            if name in perms:
                raise self.error(node, f"{what}: {key}: {name!r} is given twice (also at line {lines[name]})")
            perms[name] = self.perm_word(node, word, f"{what}: {key}: entry {node.value!r}")
            lines[name] = node.start_mark.line + 1
        return perms
