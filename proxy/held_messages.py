"""Messages a push consumer holds while its listener works on them, kept invisible for it by the endpoint (the
proxy's auto-renew: ReceiptHandleProcessor / DefaultReceiptHandleManager). Pure bookkeeping, no I/O.

A PushConsumer receives with `auto_renew` and no invisible duration: the endpoint pops each message invisible for
RENEW_SLICE_MS and, while the client is connected, makes it invisible again (a change of invisible time) whenever
less than RENEW_AHEAD_MS of that is left, for at most RENEW_MAX_MS. Each change gives the message a new receipt
handle; the client keeps the one it received, so acks and changes that come with it are applied to the newest
(`take`). When the client goes away (NotifyClientTermination, its Telemetry stream closes, or it is silent past the
session expiry) its messages are made visible again after CLEAR_INVISIBLE_MS, to be delivered to another consumer.
"""

from __future__ import annotations

from dataclasses import dataclass

# ProxyConfig: defaultInvisibleTimeMills, renewAheadTimeMillis, renewMaxTimeMillis, renewSchedulePeriodMillis,
# invisibleTimeMillisWhenClear.
RENEW_SLICE_MS = 60_000
RENEW_AHEAD_MS = 10_000
RENEW_MAX_MS = 3 * 3600 * 1000
RENEW_PERIOD_S = 5.0
CLEAR_INVISIBLE_MS = 1_000


@dataclass(slots=True)
class Held:
    group: str
    handle: str  # the newest receipt handle of the message
    invisible_until_ms: float  # on the caller's clock
    held_since_ms: float


class HeldMessages:
    """One client's auto-renewed messages, by the receipt handle the client was given."""

    def __init__(self) -> None:
        self._held: dict[str, Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def add(self, group: str, handle: str, now_ms: float) -> None:
        self._held[handle] = Held(group, handle, now_ms + RENEW_SLICE_MS, now_ms)

    def current(self, given: str) -> str:
        """The newest handle of the message the client names with `given` (itself when not held)."""
        held = self._held.get(given)
        return held.handle if held is not None else given

    def take(self, given: str) -> str:
        """Stop renewing the message (acked, changed or forwarded by the client); its newest handle."""
        held = self._held.pop(given, None)
        return held.handle if held is not None else given

    def due(self, now_ms: float) -> list[tuple[str, Held]]:
        """(the client's handle, what is held) for every message to renew now; messages held past RENEW_MAX_MS
        are let go (they become visible when their invisible time ends) and not returned."""
        due = []
        for given, held in list(self._held.items()):
            if now_ms - held.held_since_ms >= RENEW_MAX_MS:
                del self._held[given]
            elif held.invisible_until_ms - now_ms <= RENEW_AHEAD_MS:
                due.append((given, held))
        return due

    def renewed(self, given: str, handle: str, now_ms: float) -> None:
        held = self._held.get(given)
        if held is not None:
            held.handle = handle
            held.invisible_until_ms = now_ms + RENEW_SLICE_MS

    def drop(self, given: str) -> None:
        self._held.pop(given, None)

    def release_all(self) -> list[Held]:
        """Everything held, forgotten: the client is gone."""
        held = list(self._held.values())
        self._held.clear()
        return held
