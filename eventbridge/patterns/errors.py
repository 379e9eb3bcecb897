"""The exception raised for an event pattern that cannot be compiled."""

from __future__ import annotations

from eventbridge.errors import EventBridgeError


class PatternError(EventBridgeError, ValueError):
    """An event pattern is invalid: `path` names the place in the pattern (``detail.temp[0].numeric``), `reason`
    says what is wrong there and what is expected."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path or '<pattern>'}: {reason}")
