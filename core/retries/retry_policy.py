"""How long a consumer group's failed messages wait before they are delivered again (RocketMQ 5's GroupRetryPolicy,
the `groupRetryPolicy` member of a subscriptionGroup.json entry). RocketMQ 5's push consumers receive it in their
settings and wait that long after a failure (the gRPC endpoint sends it); in-process consumers use delay levels.

    "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000, 10000]}}
    "groupRetryPolicy": {"type": "EXPONENTIAL",
                         "exponentialRetryPolicy": {"initial": 5000, "max": 7200000, "multiplier": 2}}

CUSTOMIZED waits next[attempt - 1] milliseconds after delivery attempt `attempt` fails (the last one again past the
end of the list); EXPONENTIAL waits initial * multiplier^(attempt - 1), at most `max`. RocketMQ's defaults: CUSTOMIZED
with 1 s, 5 s, 10 s, 30 s, 1 min to 10 min a minute apart, 20 min, 30 min, 1 h, 2 h; EXPONENTIAL from 5 s to 2 h,
doubling. A missing member takes its default; anything else is refused with GroupConfigError.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from core.errors import GroupConfigError

DEFAULT_NEXT_MS = (
    1_000, 5_000, 10_000, 30_000,
    60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000, 600_000,
    1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip
DEFAULT_INITIAL_MS = 5_000
DEFAULT_MAX_MS = 2 * 3600 * 1000
DEFAULT_MULTIPLIER = 2


class RetryPolicyType(enum.Enum):
    CUSTOMIZED = "CUSTOMIZED"
    EXPONENTIAL = "EXPONENTIAL"


@dataclass(slots=True, frozen=True)
class GroupRetryPolicy:
    type: RetryPolicyType = RetryPolicyType.CUSTOMIZED
    next_ms: tuple[int, ...] = DEFAULT_NEXT_MS
    initial_ms: int = DEFAULT_INITIAL_MS
    max_ms: int = DEFAULT_MAX_MS
    multiplier: int = DEFAULT_MULTIPLIER

    def delay_ms(self, attempt: int) -> int:
        """The wait after delivery attempt `attempt` (1 first) failed."""
        attempt = max(attempt, 1)
        if self.type is RetryPolicyType.CUSTOMIZED:
            return self.next_ms[min(attempt, len(self.next_ms)) - 1]
        return min(self.initial_ms * self.multiplier ** min(attempt - 1, 64), self.max_ms)

    def to_json(self) -> dict[str, object]:
        if self.type is RetryPolicyType.CUSTOMIZED:
            return {"type": self.type.value, "customizedRetryPolicy": {"next": list(self.next_ms)}}
        return {
            "type": self.type.value,
            "exponentialRetryPolicy": {"initial": self.initial_ms, "max": self.max_ms, "multiplier": self.multiplier},
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> GroupRetryPolicy:
        if not isinstance(data, Mapping):
            raise GroupConfigError(f"{where}: groupRetryPolicy must be an object, found {data!r}")
        name = data.get("type", RetryPolicyType.CUSTOMIZED.value)
        try:
            kind = RetryPolicyType(name)
        except ValueError:
            raise GroupConfigError(
                f"{where}: groupRetryPolicy type is {name!r}; use CUSTOMIZED or EXPONENTIAL"
            ) from None
        if kind is RetryPolicyType.CUSTOMIZED:
            member = data.get("customizedRetryPolicy") or {}
            if not isinstance(member, Mapping):
                raise GroupConfigError(f"{where}: customizedRetryPolicy must be an object, found {member!r}")
            given = member.get("next", list(DEFAULT_NEXT_MS))
            if not isinstance(given, list) or not given or not all(_is_ms(v) for v in given):
                raise GroupConfigError(
                    f"{where}: customizedRetryPolicy next is {given!r}; give a non-empty list of milliseconds"
                    " (whole numbers from 0)"
                )
            return cls(kind, next_ms=tuple(given))
        member = data.get("exponentialRetryPolicy") or {}
        if not isinstance(member, Mapping):
            raise GroupConfigError(f"{where}: exponentialRetryPolicy must be an object, found {member!r}")
        initial = member.get("initial", DEFAULT_INITIAL_MS)
        maximum = member.get("max", DEFAULT_MAX_MS)
        multiplier = member.get("multiplier", DEFAULT_MULTIPLIER)
        if not (_is_ms(initial) and _is_ms(maximum) and initial <= maximum):
            raise GroupConfigError(
                f"{where}: exponentialRetryPolicy initial {initial!r} and max {maximum!r} must be milliseconds,"
                " initial at most max"
            )
        if not _is_ms(multiplier) or multiplier < 1:
            raise GroupConfigError(f"{where}: exponentialRetryPolicy multiplier is {multiplier!r}; use 1 or more")
        return cls(kind, initial_ms=initial, max_ms=maximum, multiplier=multiplier)


DEFAULT_RETRY_POLICY = GroupRetryPolicy()


def _is_ms(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
