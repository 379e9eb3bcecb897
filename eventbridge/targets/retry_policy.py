"""Retry policies of an EventBridge target: how long to wait before the next delivery attempt, and when to give up.

Pure objects: the caller counts attempts and passes its own `random.Random`, so a test with a seeded generator
sees the same schedule every time. After the policy gives up, the event goes to the target's dead-letter topic.

- BACKOFF_RETRY, as rocketmq-eventbridge: 3 retries after the first attempt, each 10 to 20 s later (uniform).
- EXPONENTIAL_DECAY_RETRY, as AWS EventBridge: up to 185 retries within 24 hours of the first attempt, the delay
  doubling from 1 s up to a cap of 15 minutes, with "equal jitter" (half fixed, half random) so that retries of a
  burst spread out yet never come back at once.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

# rocketmq-eventbridge's BACKOFF_RETRY: "retry 3 times, 10 to 20 seconds apart".
BACKOFF_RETRIES = 3
BACKOFF_MIN_DELAY_S = 10.0
BACKOFF_MAX_DELAY_S = 20.0

# AWS EventBridge: "retries for up to 24 hours and up to 185 times with exponential back off and jitter".
EXPONENTIAL_MAX_RETRIES = 185
EXPONENTIAL_MAX_AGE_S = 24 * 3600.0
EXPONENTIAL_BASE_DELAY_S = 1.0
# Not published by AWS; 15 minutes keeps 185 retries spread over most of the 24 hours.
EXPONENTIAL_MAX_DELAY_S = 15 * 60.0

# Client errors a retry cannot fix, except these two, which say "later" (Request Timeout, Too Many Requests).
_RETRYABLE_CLIENT_ERRORS = frozenset({408, 429})


class RetryStrategy(enum.Enum):
    BACKOFF_RETRY = "BACKOFF_RETRY"
    EXPONENTIAL_DECAY_RETRY = "EXPONENTIAL_DECAY_RETRY"


def retryable(status: int | None) -> bool:
    """Whether a failed delivery may be tried again. None stands for no answer (refused, reset, timed out)."""
    if status is None:
        return True
    if status in _RETRYABLE_CLIENT_ERRORS:
        return True
    return status >= 500


@dataclass(frozen=True, slots=True)
class BackoffRetry:
    """A fixed number of retries, each after a uniformly random delay in [min_delay_s, max_delay_s]."""

    retries: int = BACKOFF_RETRIES
    min_delay_s: float = BACKOFF_MIN_DELAY_S
    max_delay_s: float = BACKOFF_MAX_DELAY_S

    strategy = RetryStrategy.BACKOFF_RETRY

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries is {self.retries}; give 0 or more")
        if not 0 <= self.min_delay_s <= self.max_delay_s:
            raise ValueError(f"delays {self.min_delay_s}..{self.max_delay_s} s: need 0 <= min_delay_s <= max_delay_s")

    def next_delay(self, attempt: int, rng: random.Random, elapsed_s: float = 0.0) -> float | None:
        """Seconds to wait after failed attempt number `attempt` (1 is the first delivery), or None: give up."""
        if attempt < 1:
            raise ValueError(f"attempt is {attempt}; attempts count from 1")
        if attempt > self.retries:
            return None
        return rng.uniform(self.min_delay_s, self.max_delay_s)


@dataclass(frozen=True, slots=True)
class ExponentialDecayRetry:
    """Delays doubling from base_delay_s up to max_delay_s, with equal jitter; bounded in retries and in age."""

    retries: int = EXPONENTIAL_MAX_RETRIES
    max_age_s: float = EXPONENTIAL_MAX_AGE_S
    base_delay_s: float = EXPONENTIAL_BASE_DELAY_S
    max_delay_s: float = EXPONENTIAL_MAX_DELAY_S

    strategy = RetryStrategy.EXPONENTIAL_DECAY_RETRY

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries is {self.retries}; give 0 or more")
        if self.max_age_s <= 0:
            raise ValueError(f"max_age_s is {self.max_age_s}; give a positive number of seconds")
        if not 0 < self.base_delay_s <= self.max_delay_s:
            raise ValueError(f"delays {self.base_delay_s}..{self.max_delay_s} s: need 0 < base_delay_s <= max_delay_s")

    def next_delay(self, attempt: int, rng: random.Random, elapsed_s: float = 0.0) -> float | None:
        """Seconds to wait after failed attempt `attempt` (from 1), `elapsed_s` after the first; None: give up.

        Gives up when the retries are spent or when the next attempt would come later than max_age_s after the
        first one.
        """
        if attempt < 1:
            raise ValueError(f"attempt is {attempt}; attempts count from 1")
        if attempt > self.retries:
            return None
        # min() before the power would overflow a float after ~1000 doublings; the exponent is capped too.
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(attempt - 1, 64))
        delay = ceiling / 2 + rng.uniform(0.0, ceiling / 2)
        if elapsed_s + delay > self.max_age_s:
            return None
        return delay


RetryPolicy = BackoffRetry | ExponentialDecayRetry
