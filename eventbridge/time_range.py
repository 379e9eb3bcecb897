"""Points in time as the replay API and CLI take them: ISO 8601 or epoch milliseconds, to epoch milliseconds.

Pure. A store time is the broker's wall clock in milliseconds since the epoch (UTC), so a naive ISO time is read
as UTC: the server and its operator may be in different zones, and UTC is the one reading both agree on.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from eventbridge.errors import ReprocessError

# Epoch milliseconds of 9999-12-31T23:59:59.999Z, the last instant ISO 8601 and datetime can both write: a
# larger number is a mistake (microseconds or nanoseconds given as milliseconds), not a time.
MAX_EPOCH_MS = 253_402_300_799_999
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ONE_MS = datetime.timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class TimeRange:
    """Store times from `from_ms` to `to_ms`, both included (as AWS's EventStartTime and EventEndTime)."""

    from_ms: int
    to_ms: int

    def __post_init__(self) -> None:
        if self.from_ms > self.to_ms:
            raise ReprocessError(
                f"time range: 'from' ({format_ms(self.from_ms)}) is after 'to' ({format_ms(self.to_ms)}); swap them"
            )

    def __contains__(self, timestamp_ms: object) -> bool:
        return isinstance(timestamp_ms, int) and self.from_ms <= timestamp_ms <= self.to_ms


def parse_time_ms(value: object, field: str) -> int:
    """Epoch milliseconds from an int (or a string of digits) or an ISO 8601 string ('Z' or an offset; naive is
    UTC). Raises ReprocessError naming `field` and the accepted forms."""
    if isinstance(value, bool):  # a JSON true is an int to Python, and never a time
        value = str(value).lower()
    if isinstance(value, int):
        return _checked_ms(value, field)
    if isinstance(value, str) and value.strip().isdigit():
        return _checked_ms(int(value.strip()), field)
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            # Integer arithmetic: timestamp() is a float, and x.123 s times 1000 can come out as ...122.999.
            return _checked_ms((moment - _EPOCH) // _ONE_MS, field)
    raise ReprocessError(
        f"{field!r}: {value!r} is not a time; give ISO 8601 (2024-05-01T12:00:00Z, or with an offset; without one"
        " it is UTC) or epoch milliseconds (1714564800000)"
    )


def _checked_ms(value: int, field: str) -> int:
    if not 0 <= value <= MAX_EPOCH_MS:
        raise ReprocessError(
            f"{field!r}: {value} is out of range for epoch milliseconds (0 to {MAX_EPOCH_MS}); "
            "microseconds or nanoseconds given by mistake?"
        )
    return value


def format_ms(timestamp_ms: int) -> str:
    """RFC 3339 in UTC with milliseconds, as event times are written."""
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
