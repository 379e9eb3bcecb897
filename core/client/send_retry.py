"""How long a producer's send may take and what of it is tried again (RocketMQ's DefaultMQProducerImpl.
sendDefaultImpl), in process.

- Time: the whole send, retries and pauses included, has `timeout_ms` (RocketMQ's sendMsgTimeout, 3000 ms). Each
  attempt gets only what is left. A send that runs out of time raises RequestTimeoutError (RocketMQ:
  "sendDefaultImpl call timeout"), saying whether the message may have been stored.
- Retried: what trying again can cure. In process that is the store refusing writes (ServiceNotAvailableError,
  RocketMQ's SERVICE_NOT_AVAILABLE, one of its retryResponseCodes): nothing was written, so a retry cannot
  duplicate. With `retry_when_not_stored_ok` (RocketMQ's retryAnotherBrokerWhenNotStoreOK, off by default) also a
  result other than SEND_OK (FLUSH_DISK_TIMEOUT): that message is in the log already, so the retry stores a second
  copy with the same UNIQ_KEY; when every attempt ends so, the last result is returned, as RocketMQ does.
- Not retried: bad input (IllegalMessageError, TopicNotFoundError, NoPermissionError, ...): the same message is
  refused again. RocketMQ retries TOPIC_NOT_EXIST and NO_PERMISSION because another broker may take the message;
  the in-process broker is the only one.
- Pauses: RocketMQ 4's remoting client resends at once, to another broker; with one broker an immediate retry
  meets the same refusal, so attempts are spaced as RocketMQ 5's gRPC producers space them (the proxy's
  grpcClientProducerBackoff: 10 ms, doubling, at most 1 s), within the time left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from core.errors import IllegalArgumentError, RequestTimeoutError, ServiceNotAvailableError

log = logging.getLogger(__name__)

# RocketMQ's DefaultMQProducer defaults.
DEFAULT_SEND_TIMEOUT_MS = 3_000
DEFAULT_RETRY_TIMES = 2
# The pause before the first retry, its growth and its cap (RocketMQ 5's grpcClientProducerBackoff*).
FIRST_PAUSE_S = 0.010
PAUSE_MULTIPLIER = 2
MAX_PAUSE_S = 1.0

Result = TypeVar("Result")


@dataclass(slots=True, frozen=True)
class SendRetryPolicy:
    timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    retries: int = DEFAULT_RETRY_TIMES
    retry_when_not_stored_ok: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.timeout_ms, bool) or not isinstance(self.timeout_ms, int) or self.timeout_ms < 1:
            raise IllegalArgumentError(
                f"send_msg_timeout_ms must be a whole number of ms, 1 or more, not {self.timeout_ms!r}"
            )
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise IllegalArgumentError(f"retry times must be a whole number, 0 or more, not {self.retries!r}")


async def send_with_retries(
    attempt: Callable[[], Awaitable[Result]],
    policy: SendRetryPolicy,
    stored_ok: Callable[[Result], bool],
    what: str,
    may_wait: bool = True,
    first_refused: ServiceNotAvailableError | None = None,
    first_not_ok: Result | None = None,
) -> Result:
    """Run `attempt` until it succeeds, as `policy` allows; `what` names the message in logs and errors ("topic 't':
    message <UNIQ_KEY>"). Returns the attempt's result; raises RequestTimeoutError when time runs out, the last
    ServiceNotAvailableError when every attempt was refused, or at once whatever else an attempt raises.

    `may_wait=False` says an attempt answers without suspending (an in-process broker under ASYNC_FLUSH): it cannot
    outlast the deadline, so no timer is armed for it (the timer cost a fifth of such a send).

    A caller that made the first attempt itself, without suspending, passes what became of it: `first_refused` (it
    was refused) or `first_not_ok` (stored but not confirmed); the retries go on from the second attempt."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + policy.timeout_ms / 1000
    pause = FIRST_PAUSE_S
    attempts = policy.retries + 1
    not_ok: Result | None = None
    refused: ServiceNotAvailableError | None = None
    for number in range(1, attempts + 1):
        given = number == 1 and (first_refused is not None or first_not_ok is not None)
        if not given:
            left = deadline - loop.time()
            if left <= 0:
                raise _timed_out(what, policy, number - 1, refused, not_ok is not None)
        try:
            if given:
                if first_refused is not None:
                    raise first_refused
                result: Result = first_not_ok  # type: ignore[assignment]
            elif may_wait:
                result = await _attempt_within(attempt, left, what, policy, number, attempts)
            else:
                result = await attempt()
        except ServiceNotAvailableError as exc:
            refused = exc
            if number < attempts:
                _log_retry(what, number, attempts, exc)
        else:
            if stored_ok(result) or not policy.retry_when_not_stored_ok:
                return result
            not_ok = result
            if number < attempts:
                _log_retry(what, number, attempts, None)
        if number < attempts:
            left = deadline - loop.time()
            if left <= 0:
                raise _timed_out(what, policy, number, refused, not_ok is not None)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * PAUSE_MULTIPLIER, MAX_PAUSE_S)
    if not_ok is not None:
        return not_ok
    assert refused is not None
    times = "once" if attempts == 1 else f"{attempts} times"
    error = ServiceNotAvailableError(f"{what}: refused {times}, the last time: {refused}")
    error.__cause__ = refused  # not `raise ... from refused`: compiled by mypyc, which ignores `from`
    raise error


def _log_retry(what: str, number: int, attempts: int, refused: ServiceNotAvailableError | None) -> None:
    """Attempt `number` was refused (`refused`), or stored but not confirmed (None): another follows."""
    if refused is not None:
        log.warning("%s: attempt %d of %d refused (%s); trying again", what, number, attempts, refused)
    else:
        log.warning("%s: attempt %d of %d stored but not confirmed; storing again", what, number, attempts)


async def _attempt_within(
    attempt: Callable[[], Awaitable[Result]],
    left: float,
    what: str,
    policy: SendRetryPolicy,
    number: int,
    attempts: int,
) -> Result:
    scope = asyncio.timeout(left)
    try:
        async with scope:
            return await attempt()
    except TimeoutError:
        if not scope.expired():
            raise
        raise RequestTimeoutError(
            f"{what}: no answer within send_msg_timeout_ms {policy.timeout_ms} (attempt {number} of {attempts} was"
            " cut off while the broker stored it); the message may or may not have been stored: look it up by its"
            " UNIQ_KEY before sending it again"
        ) from None


def _timed_out(
    what: str, policy: SendRetryPolicy, attempts: int, refused: ServiceNotAvailableError | None, stored: bool
) -> RequestTimeoutError:
    """Time ran out between attempts: the earlier attempts tell what became of the message."""
    if stored:
        outcome = "it was stored but not confirmed on disk: look it up by its UNIQ_KEY before sending it again"
    elif refused is not None:
        outcome = f"no attempt stored it (the last was refused: {refused}); send it again once the store takes writes"
    else:
        outcome = "it was not sent"
    return RequestTimeoutError(
        f"{what}: send_msg_timeout_ms {policy.timeout_ms} ran out after {attempts} attempts; {outcome}"
    )
