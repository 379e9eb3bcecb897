"""Who may do what: the account table of a plain ACL file and the permission decision, after RocketMQ's ACL 1.0
(PlainPermissionChecker, Permission, PlainAccessResource). The same decision serves every door that has access
control: the gRPC endpoint (proxy/) and the broker's remoting port.

A door builds an AccessControl once at start (acl_file.load_acl_file). For every request it finds who signed it,
with its own protocol's signature and the account's secret key (`secret_keys`), then checks each resource the
request touches:

    access_key = <the door's signature check>(request, access.secret_keys)     # raises Unauthenticated
    access.check(access_key, ResourceKind.TOPIC, topic, Action.PUB)            # raises Forbidden

What each request needs is the door's table, in terms of Action and ResourceKind: the gRPC endpoint's RPCs are in
proxy/rpc_support.py; the remoting port maps RocketMQ 4's request codes (SEND_MESSAGE, PULL_MESSAGE, ...) onto the
same actions, as RocketMQ's PlainAccessResource.parse does.

Names are checked as the door passes them. ACL 1.0 prefixes a resource with the call's namespace (`ns%topic`),
ACL 2.0 does not; the core has no namespaces, so a door passes the name it stores under, and the file names the
same.

The decision (check) follows PlainPermissionChecker:
- An admin account may do everything; its permission entries are not consulted.
- A topic named `%RETRY%<group>` is checked as the group `<group>` (its groupPerms entry, else defaultGroupPerm).
- The name's entry in topicPerms (groupPerms) decides; without one, defaultTopicPerm (defaultGroupPerm) does.
- DENY allows nothing; PUB allows PUB, SUB allows SUB, PUB|SUB both; ANY needs PUB or SUB.
RocketMQ's ACL 1.0 also lets every authenticated account publish to its message-trace topic RMQ_SYS_TRACE_TOPIC;
this does not: ACL 2.0 dropped that exception too, and mqgate has no trace topic.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from acl.errors import Forbidden, Unauthenticated
from core import RETRY_PREFIX


class AclPerm(enum.Flag):
    """What an account holds on a topic or group (the bit values are RocketMQ's Permission constants). An ACL file
    writes one of DENY, PUB, SUB, PUB|SUB (or SUB|PUB)."""

    DENY = 1
    PUB = 1 << 2
    SUB = 1 << 3

    @property
    def word(self) -> str:
        """The word an ACL file writes for this permission: DENY, PUB, SUB or PUB|SUB."""
        return "|".join(str(member.name) for member in (AclPerm.PUB, AclPerm.SUB, AclPerm.DENY) if member in self)


class Action(enum.StrEnum):
    """What a request needs on a resource. ANY is PUB or SUB, either will do (RocketMQ's need of gRPC's
    QueryRoute)."""

    PUB = "PUB"
    SUB = "SUB"
    ANY = "ANY"


class ResourceKind(enum.StrEnum):
    TOPIC = "topic"
    GROUP = "group"


def permits(held: AclPerm, action: Action) -> bool:
    """Whether holding `held` allows `action` (RocketMQ's Permission.checkPermission): DENY allows nothing."""
    if AclPerm.DENY in held:
        return False
    if action is Action.ANY:
        return bool(held & (AclPerm.PUB | AclPerm.SUB))
    return AclPerm[action.value] in held


@dataclass(frozen=True, slots=True)
class Account:
    """One account of an ACL file. topic_perms and group_perms map a name to what the account holds on it."""

    access_key: str
    # Kept out of repr so that logging an account never writes its secret.
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: AclPerm = AclPerm.DENY
    default_group_perm: AclPerm = AclPerm.DENY
    topic_perms: Mapping[str, AclPerm] = field(default_factory=dict)
    group_perms: Mapping[str, AclPerm] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Frozen means frozen: the tables cannot be changed through the account after a door has it.
        object.__setattr__(self, "topic_perms", MappingProxyType(dict(self.topic_perms)))
        object.__setattr__(self, "group_perms", MappingProxyType(dict(self.group_perms)))


@dataclass(frozen=True, slots=True)
class AccessControl:
    """The whole account table, by access key, and where it was read from (named in refusals, so the operator knows
    which file to edit). A door gets one at start; it never changes. `secret_keys` (access key to secret key) is what
    a door's signature check needs."""

    accounts: Mapping[str, Account]
    source: str = "the ACL file"
    # Kept out of repr so that logging the table never writes a secret.
    secret_keys: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for access_key, account in self.accounts.items():
            if account.access_key != access_key:
                raise ValueError(f"account {account.access_key!r} is filed under access key {access_key!r}")
        object.__setattr__(self, "accounts", MappingProxyType(dict(self.accounts)))
        secrets = {key: account.secret_key for key, account in self.accounts.items()}
        object.__setattr__(self, "secret_keys", MappingProxyType(secrets))

    @staticmethod
    def _default(account: Account, kind: ResourceKind) -> AclPerm:
        return account.default_topic_perm if kind is ResourceKind.TOPIC else account.default_group_perm

    def check(self, access_key: str, kind: ResourceKind, name: str, action: Action) -> None:
        """Returns if `access_key` may `action` on the topic or group `name`; raises Forbidden naming the account,
        the resource, the permission missing and the entry that decided."""
        account = self.accounts.get(access_key)
        if account is None:
            raise Unauthenticated(f"unknown access key {access_key!r}: no account of {self.source} has it")
        if account.admin:
            return
        what = f"{kind.value} {name!r}"
        if kind is ResourceKind.TOPIC and name.startswith(RETRY_PREFIX):
            # A retry topic belongs to its group: RocketMQ keeps group permissions under the retry topic's name.
            retry_topic = name
            kind, name = ResourceKind.GROUP, name[len(RETRY_PREFIX) :]
            what = f"group {name!r} (retry topic {retry_topic!r})"
        if not name:
            raise _forbidden(account, kind, name, action, f"{what}: the call names no {kind.value}")
        entries = account.topic_perms if kind is ResourceKind.TOPIC else account.group_perms
        entry = entries.get(name)
        held = entry if entry is not None else self._default(account, kind)
        if permits(held, action):
            return
        if entry is not None:
            why = f"its {kind.value}Perms entry is {name}={held.word}; change it in {self.source}"
        else:
            why = (
                f"no {kind.value}Perms entry names it and default{kind.value.capitalize()}Perm is {held.word}; "
                f"add a {kind.value}Perms entry to its account in {self.source}"
            )
        why += f", such as {name}={_granting(held, action).word}"
        raise _forbidden(account, kind, name, action, f"{what}: {why}")


def _forbidden(account: Account, kind: ResourceKind, name: str, action: Action, where_and_why: str) -> Forbidden:
    need = "PUB or SUB" if action is Action.ANY else action.value
    return Forbidden(
        f"access key {account.access_key!r} lacks {need} on {where_and_why}",
        access_key=account.access_key,
        kind=kind.value,
        name=name,
        action=action.value,
    )


def _granting(held: AclPerm, action: Action) -> AclPerm:
    """`held` widened to allow `action` (DENY dropped), for the refusal's suggestion."""
    kept = AclPerm(0) if AclPerm.DENY in held else held
    if action is Action.ANY:
        return kept | AclPerm.PUB | AclPerm.SUB
    return kept | AclPerm[action.value]
