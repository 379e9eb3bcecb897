"""Who may do what on the gRPC endpoint: the account table of an ACL file and the permission decision, after
RocketMQ's ACL 1.0 (PlainPermissionChecker, Permission, PlainAccessResource).

The endpoint builds an AccessControl once at start (acl_file.load_acl_file) and, for every call, authenticates it
and checks each resource the call touches:

    access_key = access.authenticate(context.invocation_metadata())        # raises Unauthenticated
    access.check(access_key, ResourceKind.TOPIC, topic, Action.PUB)        # raises Forbidden

What each RPC needs (after the checks of RocketMQ's proxy for gRPC: PlainAccessResource.parse in ACL 1.0,
DefaultAuthorizationContextBuilder in ACL 2.0); every RPC also needs the call authenticated:

    RPC                                   topic                         group
    SendMessage                           PUB, each distinct topic      -
    EndTransaction, RecallMessage         PUB                           -
    QueryRoute                            ANY (PUB or SUB)              -
    ReceiveMessage, AckMessage,           SUB                           SUB
      ChangeInvisibleDuration,
      ForwardMessageToDeadLetterQueue,
      QueryAssignment
    PullMessage, GetOffset, UpdateOffset, SUB                           SUB
      SyncLiteSubscription
    QueryOffset                           SUB                           - (the request names none)
    Heartbeat                             -                             SUB when the client is a consumer
    NotifyClientTermination               -                             SUB when a group is given
    Telemetry, Settings command           PUB each publishing topic,    SUB the subscription's group
                                          SUB each subscribed topic
    Telemetry, other commands             -                             -

Where RocketMQ differs, and why the table is as it is:
- SendMessage: ACL 1.0 refuses a batch whose messages name different topics, ACL 2.0 checks the first message's
  topic only; checking every distinct topic refuses what either would refuse and lets no topic through unchecked.
- ChangeInvisibleDuration: ACL 2.0 checks the group only; ACL 1.0 and this table check the topic too (the request
  names it, and the call delays that topic's message).
- PullMessage, the three offset RPCs and SyncLiteSubscription: neither RocketMQ builder lists them, so RocketMQ
  checks nothing but the signature for them over gRPC. They are checked here as their remoting counterparts are
  (PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET: topic SUB and group SUB); reading offsets by time
  or queue end (QueryOffset) has no group, and needs topic SUB where RocketMQ 2.0 would ask for GET, which the
  ACL 1.0 file format cannot grant.
- RecallMessage came after ACL 1.0; ACL 2.0 checks topic PUB, as here.
- Heartbeat: a consumer is a push, simple or pull consumer (ACL 2.0). RocketMQ refuses a consumer's heartbeat that
  names no group ("Consumer heartbeat doesn't have group"), and a Settings command with neither publishing nor
  subscription; those refusals are the endpoint's (bad requests), not this module's.
- Names are checked as the endpoint passes them. ACL 1.0 prefixes a resource with the call's namespace
  (`ns%topic`), ACL 2.0 does not; the core has no namespaces, so the endpoint passes the name it stores under,
  and the file names the same (were x-mq-namespace ever mapped onto names, entries would name mapped names).

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
from proxy.signature import Metadata, authenticate


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
    """What a call needs on a resource. ANY is RocketMQ's need of QueryRoute: PUB or SUB, either will do."""

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
        # Frozen means frozen: the tables cannot be changed through the account after the endpoint has it.
        object.__setattr__(self, "topic_perms", MappingProxyType(dict(self.topic_perms)))
        object.__setattr__(self, "group_perms", MappingProxyType(dict(self.group_perms)))


@dataclass(frozen=True, slots=True)
class AccessControl:
    """The whole account table, by access key, and where it was read from (named in refusals, so the operator knows
    which file to edit). The endpoint gets one at start; it never changes."""

    accounts: Mapping[str, Account]
    source: str = "the ACL file"
    _secret_keys: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for access_key, account in self.accounts.items():
            if account.access_key != access_key:
                raise ValueError(f"account {account.access_key!r} is filed under access key {access_key!r}")
        object.__setattr__(self, "accounts", MappingProxyType(dict(self.accounts)))
        secrets = {key: account.secret_key for key, account in self.accounts.items()}
        object.__setattr__(self, "_secret_keys", MappingProxyType(secrets))

    def authenticate(self, metadata: Metadata) -> str:
        """The access key that signed the call (signature.authenticate); raises Unauthenticated."""
        return authenticate(metadata, self._secret_keys, self.source)

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
