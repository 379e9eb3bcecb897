"""Which broker groups a producer avoids for a while (RocketMQ's MQFaultStrategy with sendLatencyFaultEnable, and
LatencyFaultToleranceImpl). Pure code: the caller gives the time.

Every send tells how long it took; a failed one counts as ISOLATION_LATENCY_MS. The longer a group took, the longer
it is passed over, by RocketMQ 5's table:

    latency at least (ms)    50   100   550   1800   3000   5000   15000
    passed over for (ms)      0     0  2000   5000   6000  10000   30000

so a group that refuses or times out is left alone for 10 s and then tried again (one send; a success clears it).
Choosing a queue (`choose`): round robin over the write queues, taking the first one whose group is neither passed
over nor the group the previous attempt of this send failed on; when every group is passed over, the first queue
of another group than the failed one; failing that, the next queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core import MessageQueue

# RocketMQ 5's MQFaultStrategy.latencyMax and notAvailableDuration.
LATENCY_STEPS_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
PASSED_OVER_MS = (0, 0, 2000, 5000, 6000, 10000, 30000)
# A send that failed counts as this slow (MQFaultStrategy.updateFaultItem with isolation: 10 s -> passed over 10 s).
ISOLATION_LATENCY_MS = 10_000


def passed_over_ms(latency_ms: float) -> int:
    """How long a group that answered in `latency_ms` is passed over."""
    for step, duration in zip(reversed(LATENCY_STEPS_MS), reversed(PASSED_OVER_MS), strict=True):
        if latency_ms >= step:
            return duration
    return 0


@dataclass(slots=True)
class FaultItem:
    latency_ms: float
    available_from_ms: float


class LatencyFaults:
    def __init__(self) -> None:
        self._items: dict[str, FaultItem] = {}

    def update(self, broker_name: str, latency_ms: float, failed: bool, now_ms: float) -> None:
        """A send to `broker_name` took `latency_ms`, or failed."""
        latency = ISOLATION_LATENCY_MS if failed else latency_ms
        duration = passed_over_ms(latency)
        if duration == 0 and broker_name not in self._items:
            return  # the usual send: nothing to remember
        self._items[broker_name] = FaultItem(latency_ms, now_ms + duration)

    def available(self, broker_name: str, now_ms: float) -> bool:
        item = self._items.get(broker_name)
        return item is None or now_ms >= item.available_from_ms

    def passed_over(self, now_ms: float) -> list[str]:
        """The groups passed over now."""
        return sorted(name for name, item in self._items.items() if now_ms < item.available_from_ms)

    def choose(
        self, queues: Sequence[MessageQueue], start: int, last_failed: str | None, now_ms: float
    ) -> MessageQueue:
        """A queue for the next attempt (see the module docstring); `start` is the round-robin counter."""
        count = len(queues)
        for step in range(count):
            queue = queues[(start + step) % count]
            if queue.broker_name != last_failed and self.available(queue.broker_name, now_ms):
                return queue
        if last_failed is not None:
            for step in range(count):
                queue = queues[(start + step) % count]
                if queue.broker_name != last_failed:
                    return queue
        return queues[start % count]
