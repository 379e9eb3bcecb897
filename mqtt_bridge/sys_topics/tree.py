"""The `$SYS/broker/...` topics, as Mosquitto publishes them (its src/sys_tree.c), computed without I/O.

`SysTree.update(now_s, figures)` takes the gateway's figures at one moment (`BrokerFigures`: counters since the
start and current counts) and returns the topics whose payload changed, with their new payload; the caller
publishes them as retained messages. Mosquitto's rules, kept here:

- `uptime` ("N seconds") on every update; `version` on the first; every other topic only when its value changed.
- `clients/total` counts sessions (connected, and persistent ones of disconnected clients), `clients/connected`
  the connected ones, `clients/disconnected` the difference, `clients/maximum` the highest total seen.
- `messages/*` count MQTT control packets of every type, `publish/messages/*` PUBLISH packets only.
- `load/<figure>/{1min,5min,15min}`: exponentially weighted moving averages of the figure's rate per minute. Each
  update measures the rate over the interval since the last one, r = delta * 60 / seconds, and moves the average
  towards it: new = r + exp(-seconds / window) * (old - r), the window being 60, 300 or 900 s (the weighting of
  Unix load averages). The first update publishes 0.00; later ones publish when the value moved by 0.01 or more.
  Payloads have two decimals.
- `store/messages/count` and `store/messages/bytes` (with `messages/stored`): Mosquitto counts the messages its
  in-memory store holds. Ours are on disk in the core; what is held in memory for delivery is the gateway's
  message cache (message_cache.py), and that is what these report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

PREFIX = "$SYS/broker/"
# Moving-average windows (s) and the names of their topics, as Mosquitto's.
LOAD_WINDOWS = ((60.0, "1min"), (300.0, "5min"), (900.0, "15min"))
# A load average is published again only once it moved by this much (Mosquitto: 0.01, its payload's precision).
LOAD_PUBLISH_STEP = 0.01


@dataclass(slots=True, frozen=True)
class BrokerFigures:
    """The gateway at one moment: counters since the start and current counts."""

    clients_connected: int = 0
    sessions: int = 0
    subscriptions: int = 0
    shared_subscriptions: int = 0
    retained: int = 0
    cached_messages: int = 0
    cached_bytes: int = 0
    # Counters since the start.
    packets_received: int = 0
    packets_sent: int = 0
    publishes_received: int = 0
    publishes_sent: int = 0
    publishes_dropped: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    sockets: int = 0  # network connections opened
    connects: int = 0  # CONNECTs accepted


# load/<name> topic -> the counter of BrokerFigures whose rate it averages.
LOAD_FIGURES = {
    "messages/received": "packets_received",
    "messages/sent": "packets_sent",
    "publish/received": "publishes_received",
    "publish/sent": "publishes_sent",
    "publish/dropped": "publishes_dropped",
    "bytes/received": "bytes_received",
    "bytes/sent": "bytes_sent",
    "sockets": "sockets",
    "connections": "connects",
}


def load_average(old: float, rate_per_minute: float, seconds: float, window_s: float) -> float:
    """The moving average `old` after `seconds` at `rate_per_minute` (see the module docstring)."""
    return rate_per_minute + math.exp(-seconds / window_s) * (old - rate_per_minute)


class SysTree:
    def __init__(self, version: str, started_s: float) -> None:
        self.version = version
        self.started_s = started_s
        self.values: dict[str, str] = {}  # every topic's last payload: what a new subscriber gets, retained
        self._last: tuple[float, BrokerFigures] | None = None
        self._loads: dict[str, float] = {}
        self._maximum = 0

    def update(self, now_s: float, figures: BrokerFigures) -> dict[str, str]:
        """The topics whose payload is new at `now_s` (also kept in `values`)."""
        changed: dict[str, str] = {}

        def put(topic: str, payload: str, force: bool = False) -> None:
            topic = PREFIX + topic
            if force or self.values.get(topic) != payload:
                self.values[topic] = changed[topic] = payload

        first = self._last is None
        if first:
            put("version", f"mqgate version {self.version}")
        put("uptime", f"{max(int(now_s - self.started_s), 0)} seconds", force=True)
        self._maximum = max(self._maximum, figures.sessions)
        put("clients/total", str(figures.sessions))
        put("clients/maximum", str(self._maximum))
        put("clients/connected", str(figures.clients_connected))
        put("clients/active", str(figures.clients_connected))  # Mosquitto's older name, still published
        put("clients/disconnected", str(figures.sessions - figures.clients_connected))
        put("clients/inactive", str(figures.sessions - figures.clients_connected))
        put("messages/received", str(figures.packets_received))
        put("messages/sent", str(figures.packets_sent))
        put("publish/messages/received", str(figures.publishes_received))
        put("publish/messages/sent", str(figures.publishes_sent))
        put("publish/messages/dropped", str(figures.publishes_dropped))
        put("bytes/received", str(figures.bytes_received))
        put("bytes/sent", str(figures.bytes_sent))
        put("subscriptions/count", str(figures.subscriptions))
        put("shared_subscriptions/count", str(figures.shared_subscriptions))
        put("retained messages/count", str(figures.retained))
        put("messages/stored", str(figures.cached_messages))
        put("store/messages/count", str(figures.cached_messages))
        put("store/messages/bytes", str(figures.cached_bytes))
        self._update_loads(now_s, figures, put)
        self._last = (now_s, figures)
        return changed

    def _update_loads(self, now_s: float, figures: BrokerFigures, put: Callable[..., None]) -> None:
        last = self._last
        for name, counter in LOAD_FIGURES.items():
            for window_s, suffix in LOAD_WINDOWS:
                topic = f"load/{name}/{suffix}"
                if last is None:
                    self._loads[topic] = 0.0
                    put(topic, "0.00", force=True)
                    continue
                seconds = now_s - last[0]
                if seconds <= 0:
                    continue
                rate = (getattr(figures, counter) - getattr(last[1], counter)) * 60.0 / seconds
                old = self._loads[topic]
                new = load_average(old, rate, seconds, window_s)
                self._loads[topic] = new
                if abs(new - old) >= LOAD_PUBLISH_STEP:
                    put(topic, f"{new:.2f}", force=True)
