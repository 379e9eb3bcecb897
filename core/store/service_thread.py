"""Background threads of the store (RocketMQ's ServiceThread): started once, woken by others, stopped on close."""

from __future__ import annotations

import abc
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ServiceThread(abc.ABC):
    """Subclasses implement `run`, looping `while not self.stopped` and sleeping in `wait`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stopped = False
        # True while the thread sleeps waiting for work (subclasses that wait for work raise it around `wait`):
        # producers of work call `wake_sleeping` only then, so a busy thread costs them nothing.
        self.sleeping = False
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def run(self) -> None: ...

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        """Started and not stopped since."""
        return self._thread is not None

    def wake(self) -> None:
        self._wakeup.set()

    def wake_sleeping(self) -> None:
        """Wake the thread that `sleeping` says waits for work (callers test the flag first, inline). The flag drops
        at once: a burst of producers running while the woken thread waits for the GIL sets the event once, not once
        each (an Event.set is about a microsecond of interpreted code)."""
        self.sleeping = False
        self._wakeup.set()

    def wait(self, timeout: float) -> None:
        """Sleep until woken, stopped, or `timeout` seconds pass."""
        self._wakeup.wait(timeout)
        self._wakeup.clear()

    def stop(self) -> None:
        """Stop the loop and join the thread; subclasses finish their last round after calling this."""
        self.stopped = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class PeriodicService(ServiceThread):
    """Calls `action` every `interval_s` seconds; an exception is logged and the next round runs as usual."""

    def __init__(self, name: str, interval_s: float, action: Callable[[], object]) -> None:
        super().__init__(name)
        self.interval_s = interval_s
        self.action = action

    def run(self) -> None:
        while not self.stopped:
            self.wait(self.interval_s)
            if self.stopped:
                return
            try:
                self.action()
            except Exception:
                log.exception("%s failed", self.name)
