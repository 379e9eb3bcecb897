"""Retry policies: schedules with a seeded RNG, limits, and which statuses are retried."""

from __future__ import annotations

import random

import pytest

from eventbridge.targets.retry_policy import BackoffRetry, ExponentialDecayRetry, retryable


def schedule(policy: BackoffRetry | ExponentialDecayRetry, seed: int) -> list[float]:
    rng = random.Random(seed)
    delays: list[float] = []
    elapsed = 0.0
    attempt = 1
    while (delay := policy.next_delay(attempt, rng, elapsed)) is not None:
        delays.append(delay)
        elapsed += delay
        attempt += 1
    return delays


def test_backoff_retry_three_retries_10_to_20_s_apart() -> None:
    delays = schedule(BackoffRetry(), seed=7)
    assert len(delays) == 3
    assert all(10.0 <= d <= 20.0 for d in delays)
    assert len(set(delays)) == 3  # jittered, not fixed
    assert schedule(BackoffRetry(), seed=7) == delays


def test_backoff_retry_gives_up_after_its_retries() -> None:
    rng = random.Random(1)
    assert BackoffRetry().next_delay(3, rng) is not None
    assert BackoffRetry().next_delay(4, rng) is None
    assert BackoffRetry(retries=0).next_delay(1, rng) is None


def test_exponential_decay_grows_then_caps_with_jitter() -> None:
    policy = ExponentialDecayRetry()
    rng = random.Random(42)
    firsts = [policy.next_delay(n, rng) for n in range(1, 6)]
    for n, delay in enumerate(firsts, start=1):
        ceiling = 2.0 ** (n - 1)
        assert delay is not None
        assert ceiling / 2 <= delay <= ceiling
    late = policy.next_delay(50, rng)
    assert late is not None
    assert 450.0 <= late <= 900.0


def test_exponential_decay_stops_within_24_hours_and_185_retries() -> None:
    for seed in range(5):
        delays = schedule(ExponentialDecayRetry(), seed)
        assert 0 < len(delays) <= 185
        assert sum(delays) <= 24 * 3600
    # With no age limit to speak of, the retry count is what stops it.
    assert len(schedule(ExponentialDecayRetry(max_age_s=1e12), seed=3)) == 185
    # A short age limit stops it first.
    short = schedule(ExponentialDecayRetry(max_age_s=60.0), seed=3)
    assert sum(short) <= 60.0
    assert len(short) < 10


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    assert schedule(ExponentialDecayRetry(), 11) == schedule(ExponentialDecayRetry(), 11)
    assert schedule(ExponentialDecayRetry(), 11) != schedule(ExponentialDecayRetry(), 12)


@pytest.mark.parametrize(
    ("status", "expected"),
    [(None, True), (408, True), (429, True), (500, True), (502, True), (503, True),
     (400, False), (401, False), (403, False), (404, False), (413, False), (422, False)],
)  # fmt: skip
def test_retryable(status: int | None, expected: bool) -> None:
    assert retryable(status) is expected


def test_bad_parameters_refused() -> None:
    with pytest.raises(ValueError):
        BackoffRetry(min_delay_s=20, max_delay_s=10)
    with pytest.raises(ValueError):
        ExponentialDecayRetry(base_delay_s=0)
    with pytest.raises(ValueError):
        BackoffRetry().next_delay(0, random.Random(0))
