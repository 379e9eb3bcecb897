"""The day fields of a cron schedule expression: which days of a given month a day-of-month or a day-of-week field
names. Each form AWS takes is its own small type, with `days(year, month)` giving those days in ascending order:

    ?            AnyDay         the field names nothing of its own: the other day field decides
    1,15 1-5 */2 MonthDays      days of the month (a day the month lacks, 31 in April, is not there)
    L            LastDay        the last day of the month
    LW           LastWeekday    the last Monday-to-Friday day of the month
    15W          NearestWeekday the Monday-to-Friday day nearest the 15th, never in another month
    MON-FRI 1,7  Weekdays       days of the week; `L` alone in day-of-week is 7, Saturday (the week's last day)
    6L           LastInMonth    the last Friday of the month
    2#1          NthInMonth     the first Monday of the month (no day if the month has no such one, as a 5th)

Weekdays are numbered as AWS numbers them, 1 = SUN to 7 = SAT (Python's `date.weekday()` counts from Monday, 0).
Pure: no clock, no I/O.
"""

from __future__ import annotations

import calendar
import datetime
from dataclasses import dataclass
from typing import Protocol

SUNDAY = 1
SATURDAY = 7
# How many of one weekday a month can hold: `#` counts from 1 to this.
MAX_NTH = 5


def aws_weekday(year: int, month: int, day: int) -> int:
    """1 = Sunday ... 7 = Saturday."""
    return (datetime.date(year, month, day).weekday() + 1) % 7 + 1


def month_length(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def is_workday(weekday: int) -> bool:
    """Monday to Friday: what AWS's W means by a weekday."""
    return weekday not in (SUNDAY, SATURDAY)


class DayField(Protocol):
    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of this month that the field names, ascending."""
        ...


@dataclass(frozen=True, slots=True)
class AnyDay:
    def days(self, year: int, month: int) -> tuple[int, ...]:
        return tuple(range(1, month_length(year, month) + 1))


@dataclass(frozen=True, slots=True)
class MonthDays:
    values: frozenset[int]

    def days(self, year: int, month: int) -> tuple[int, ...]:
        last = month_length(year, month)
        return tuple(day for day in sorted(self.values) if day <= last)


@dataclass(frozen=True, slots=True)
class LastDay:
    def days(self, year: int, month: int) -> tuple[int, ...]:
        return (month_length(year, month),)


@dataclass(frozen=True, slots=True)
class LastWeekday:
    def days(self, year: int, month: int) -> tuple[int, ...]:
        day = month_length(year, month)
        while not is_workday(aws_weekday(year, month, day)):
            day -= 1
        return (day,)


@dataclass(frozen=True, slots=True)
class NearestWeekday:
    """`<day>W`. As Quartz (whose syntax AWS's cron follows) reads it, the nearest weekday stays in the month: the
    1st on a Saturday gives Monday the 3rd, not Friday of the month before; a last day on a Sunday gives the
    Friday before. A day the month lacks (31W in April) names no day that month."""

    day: int

    def days(self, year: int, month: int) -> tuple[int, ...]:
        last = month_length(year, month)
        if self.day > last:
            return ()
        weekday = aws_weekday(year, month, self.day)
        if weekday == SATURDAY:
            return (self.day - 1,) if self.day > 1 else (self.day + 2,)
        if weekday == SUNDAY:
            return (self.day + 1,) if self.day < last else (self.day - 2,)
        return (self.day,)


@dataclass(frozen=True, slots=True)
class Weekdays:
    values: frozenset[int]

    def days(self, year: int, month: int) -> tuple[int, ...]:
        first = aws_weekday(year, month, 1)
        return tuple(
            day for day in range(1, month_length(year, month) + 1) if (first - 1 + day - 1) % 7 + 1 in self.values
        )


@dataclass(frozen=True, slots=True)
class LastInMonth:
    """`<weekday>L`: the last such weekday of the month (6L, the last Friday)."""

    weekday: int

    def days(self, year: int, month: int) -> tuple[int, ...]:
        last = month_length(year, month)
        back = (aws_weekday(year, month, last) - self.weekday) % 7
        return (last - back,)


@dataclass(frozen=True, slots=True)
class NthInMonth:
    """`<weekday>#<nth>`: the nth such weekday of the month (3#2, the second Tuesday)."""

    weekday: int
    nth: int

    def days(self, year: int, month: int) -> tuple[int, ...]:
        first = 1 + (self.weekday - aws_weekday(year, month, 1)) % 7
        day = first + 7 * (self.nth - 1)
        return (day,) if day <= month_length(year, month) else ()
