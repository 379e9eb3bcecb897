"""The timers of scheduled rules: at each fire time of an enabled rule's schedule (schedule_expression), one event
is put on the rule's bus, restricted to that rule (OnlyFor, as replayed and redriven copies are), so that only its
targets receive it, through the same routing, retries and dead letters as any event.

The event, in the bus's structured CloudEvents JSON form (as PutEvents stores events):

    specversion      1.0
    id               a UUID 5 of (bus, rule, fire time): a receiver can drop a repeat, even across a restart
    source           mqgate.events
    type             Scheduled Event (AWS's detail-type of scheduled events)
    subject          <bus>/<rule>
    time             the fire time, RFC 3339 UTC (a fire that is put late still carries the time it was due)
    datacontenttype  application/json
    data             {}

Timers run on the runtime's Clock (clock.py), each as its own asyncio task that looks at the wall clock at least
once a minute (MAX_SLEEP_S): a put waits for its event to be durable in the core, and delays nothing else. A put
that fails (a full disk) is logged and tried again, FIRE_ATTEMPTS times in all and only before the schedule's next
fire time; then that fire is counted as missed.

No catch-up: a timer starts at the first fire time after it starts, so fires due while the process was down are not
made up, as AWS and cron do not, and a fire is never made twice across a restart. A timer that wakes late (the
process was stalled past later fire times) makes the fire it waited for and goes on from the first fire time after
now; the ones in between are not made. A reload keeps the timer of a rule whose schedule is unchanged (its pattern or
targets may have changed); a rule whose schedule changed gets a new timer, from zero counts; a disabled or deleted
rule's timer stops.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eventbridge.bus import OnlyFor
from eventbridge.rules.model import Rule, RuleKey
from eventbridge.schedules.expression import Schedule
from eventbridge.targets.clock import Clock

log = logging.getLogger(__name__)

SCHEDULED_EVENT_SOURCE = "mqgate.events"
SCHEDULED_EVENT_TYPE = "Scheduled Event"
# The namespace of scheduled events' ids (a UUID 5 of the name "mqgate scheduled event"): fixed, so that an id
# computed again after a restart or on another server is the same.
SCHEDULED_EVENT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "mqgate scheduled event")
# The longest a timer sleeps before it looks at the clock again. asyncio's sleep follows the monotonic clock, which
# stops while the machine is suspended and ignores the wall clock being set (NTP): a rate(1 day) timer sleeping in
# one piece would fire that much late. Fire times are wall-clock times; in steps of a minute, at most a minute late.
MAX_SLEEP_S = 60.0
# Puts of one fire, in all: the first and three retries, 1, 2 and 4 s apart, within a minute, the shortest interval.
FIRE_ATTEMPTS = 4
FIRST_RETRY_S = 1.0


class EventPutter(Protocol):
    """What the scheduler needs of the buses (bus.EventBuses)."""

    async def put(
        self, bus: str, events: Sequence[Mapping[str, Any]], only_for: OnlyFor | None = None
    ) -> Sequence[object]: ...


def rfc3339(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat().replace("+00:00", "Z")


def scheduled_event(key: RuleKey, fire_s: int) -> dict[str, Any]:
    """The event a fire of rule `key` at `fire_s` (seconds since the epoch) puts on its bus."""
    time = rfc3339(fire_s)
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid5(SCHEDULED_EVENT_NAMESPACE, f"{key.bus}/{key.name}/{time}")),
        "source": SCHEDULED_EVENT_SOURCE,
        "type": SCHEDULED_EVENT_TYPE,
        "subject": str(key),
        "time": time,
        "datacontenttype": "application/json",
        "data": {},
    }


@dataclass(slots=True)
class ScheduleState:
    """A running timer, as GET /rules shows it."""

    schedule: Schedule
    next_fire: int | None = None  # seconds since the epoch; None when the schedule fires no more
    fires: int = 0  # events put
    missed: int = 0  # fires whose put failed every attempt
    last_error: str | None = None


@dataclass(slots=True)
class _Timer:
    state: ScheduleState
    task: asyncio.Task[None]


class Scheduler:
    def __init__(
        self,
        buses: EventPutter,
        clock: Clock,
        *,
        attempts: int = FIRE_ATTEMPTS,
        first_retry_s: float = FIRST_RETRY_S,
    ) -> None:
        self.buses = buses
        self.clock = clock
        self.attempts = attempts
        self.first_retry_s = first_retry_s
        self._timers: dict[RuleKey, _Timer] = {}
        # Stopped timers' tasks until they have ended: the loop keeps only weak references to tasks.
        self._stopping: set[asyncio.Task[None]] = set()

    def update(self, rules: Iterable[Rule]) -> None:
        """Run a timer for each enabled rule with a schedule, and none for any other (see the module docstring)."""
        wanted = {rule.key: rule.schedule for rule in rules if rule.enabled and rule.schedule is not None}
        for key, timer in list(self._timers.items()):
            if wanted.get(key) != timer.state.schedule:
                self._stop(key)
                log.info("eventbridge: schedule of rule %s stopped", key)
        for key, schedule in wanted.items():
            if schedule is not None and key not in self._timers:
                # The first fire is known before the task first runs: GET /rules shows it at once.
                state = ScheduleState(schedule, schedule.next_after(self.clock.time()))
                task = asyncio.get_running_loop().create_task(self._run(key, state), name=f"schedule {key}")
                self._timers[key] = _Timer(state, task)
                log.info("eventbridge: schedule %s of rule %s started", schedule, key)

    def state(self, key: RuleKey) -> ScheduleState | None:
        timer = self._timers.get(key)
        return timer.state if timer is not None else None

    async def close(self) -> None:
        for key in list(self._timers):
            self._stop(key)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    def _stop(self, key: RuleKey) -> None:
        task = self._timers.pop(key).task
        task.cancel()
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _run(self, key: RuleKey, state: ScheduleState) -> None:
        schedule = state.schedule
        fire = state.next_fire
        while fire is not None:
            state.next_fire = fire
            # A manual clock wakes sleepers only when it is moved: never sleep for nothing.
            while (now := self.clock.time()) < fire:
                await self.clock.sleep(min(fire - now, MAX_SLEEP_S))
            following = schedule.next_after(fire)
            await self._fire(key, state, fire, following)
            now = self.clock.time()
            if following is not None and following <= now:
                log.warning("eventbridge: rule %s: the fires from %s to %s were not made (the timer woke late)",
                            key, rfc3339(following), rfc3339(int(now)))  # fmt: skip
                following = schedule.next_after(now)
            fire = following
        state.next_fire = None
        log.info("eventbridge: schedule %s of rule %s fires no more", schedule, key)

    async def _fire(self, key: RuleKey, state: ScheduleState, fire: int, following: int | None) -> None:
        event = scheduled_event(key, fire)
        delay = self.first_retry_s
        for attempt in range(1, self.attempts + 1):
            try:
                await self.buses.put(key.bus, [event], OnlyFor(str(key)))
            except Exception as exc:  # a timer outlives any one failure: BusError, a full disk, ...
                state.last_error = f"{rfc3339(fire)}: {exc}"
                log.warning("eventbridge: rule %s: the fire of %s not put (attempt %d of %d): %s",
                            key, rfc3339(fire), attempt, self.attempts, exc)  # fmt: skip
                if attempt == self.attempts or (following is not None and self.clock.time() + delay >= following):
                    break
                await self.clock.sleep(delay)
                delay *= 2
            else:
                state.fires += 1
                return
        state.missed += 1
        log.error("eventbridge: rule %s: the fire of %s is missed (%d missed so far): %s",
                  key, rfc3339(fire), state.missed, state.last_error)  # fmt: skip
