"""What an RPC needs to be allowed: the resources it touches (a topic, a consumer group) and the action on each
(publish, subscribe, or either: a route lookup). The endpoint asks its Access, when access control is configured,
before it does anything else."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Protocol


class Resource(enum.Enum):
    TOPIC = "topic"
    GROUP = "group"


class Action(enum.Enum):
    PUB = "PUB"
    SUB = "SUB"
    ANY = "ANY"  # PUB or SUB will do


class Access(Protocol):
    def check(self, metadata: Sequence[tuple[str, str | bytes]], needs: Iterable[tuple[Resource, str, Action]]) -> None:
        """Return when the caller the metadata authenticates may do all of `needs`; raise an error carrying the
        protocol's code (UNAUTHORIZED, FORBIDDEN) otherwise."""
