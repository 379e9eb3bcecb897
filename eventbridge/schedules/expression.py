"""Schedule expressions of scheduled rules, written as AWS EventBridge writes them, parsed and evaluated without a
clock or I/O: `parse_schedule(text)` gives a schedule whose `next_after(t)` is its first fire time strictly after
`t` (both in seconds since the epoch), or None when it will fire no more.

    rate(<value> <unit>)   a positive whole value; the unit minute, hour or day for 1, minutes, hours or days
                           otherwise (AWS refuses rate(1 minutes) and rate(5 minute); so does this)
    cron(<minutes> <hours> <day-of-month> <month> <day-of-week> <year>), in UTC:

    field          values               takes
    minutes        0-59                 , - * /
    hours          0-23                 , - * /
    day-of-month   1-31                 , - * / ?  L  LW  <day>W
    month          1-12 or JAN-DEC      , - * /
    day-of-week    1-7 or SUN-SAT       , - * ?  L  <weekday>L  <weekday>#<n>
    year           1970-2199            , - * /

`a-b` is a range, `a/n` is a, a+n, ... up to the field's last value, `a-b/n` the same up to b, `*/n` the same
from the field's first value. Exactly one of day-of-month and day-of-week is `?`: AWS takes a value (or `*`) in
one of them and `?` in the other. What L, LW, W and # mean is in schedule_days. They stand alone in their field,
as in AWS, which refuses `3#1,6#3`. Names are read in either case. Where AWS's documentation is silent, this
refuses rather than guesses: a range that runs backwards (`FRI-MON`, which Quartz would wrap) is refused with the
two ranges to write instead, and so is Quartz's `L-3` (third day before the last).

A rate() schedule fires at the multiples of its interval since the epoch: rate(5 minutes) at :00, :05, ...,
rate(1 hour) on the hour, rate(1 day) at 00:00 UTC, rate(7 days) on Thursdays (1970-01-01 was one). AWS counts
from the rule's creation instead, which a restart would forget: multiples of the interval are the same times
before and after a restart, so a restart neither repeats a fire nor shifts the ones after it.
"""

from __future__ import annotations

import calendar
import datetime
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from eventbridge.errors import ScheduleError
from eventbridge.schedules.days import (
    MAX_NTH,
    SATURDAY,
    AnyDay,
    DayField,
    LastDay,
    LastInMonth,
    LastWeekday,
    MonthDays,
    NearestWeekday,
    NthInMonth,
    Weekdays,
)

# AWS PutRule: a ScheduleExpression is at most 256 characters.
MAX_SCHEDULE_CHARS = 256
# rate(1000000 days) is 2,700 years: past the year 2199 that cron() stops at, and short of datetime's 9999.
MAX_RATE_VALUE = 1_000_000
FIRST_YEAR = 1970
LAST_YEAR = 2199
_UNIT_SECONDS = {"minute": 60, "hour": 3_600, "day": 86_400}
# The first instant past every cron() schedule: 2200-01-01T00:00:00Z.
_END_S = calendar.timegm((LAST_YEAR + 1, 1, 1, 0, 0, 0))
_DIGITS = re.compile(r"[0-9]+")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    takes: str
    names: Mapping[str, int] = field(default_factory=dict)

    @property
    def accepted(self) -> str:
        if not self.names:
            return f"{self.low}-{self.high}"
        names = list(self.names)
        return f"{self.low}-{self.high} or {names[0]}-{names[-1]}"


_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # AWS numbers them 1 to 7
_MONTH_NAMES = {name: number for number, name in enumerate(_MONTHS, 1)}
_WEEKDAY_NAMES = {name: number for number, name in enumerate(_WEEKDAYS, 1)}

MINUTES = _Field("minutes", 0, 59, ", - * /")
HOURS = _Field("hours", 0, 23, ", - * /")
DAY_OF_MONTH = _Field("day-of-month", 1, 31, ", - * / ? L W")
MONTH = _Field("month", 1, 12, ", - * /", _MONTH_NAMES)
DAY_OF_WEEK = _Field("day-of-week", 1, 7, ", - * ? L #", _WEEKDAY_NAMES)
YEAR = _Field("year", FIRST_YEAR, LAST_YEAR, ", - * /")
_FIELDS = (MINUTES, HOURS, DAY_OF_MONTH, MONTH, DAY_OF_WEEK, YEAR)


@dataclass(frozen=True, slots=True)
class RateSchedule:
    """Equal by interval: rate(60 minutes) is rate(1 hour)."""

    interval_s: int
    text: str = field(compare=False)

    def next_after(self, after_s: float) -> int | None:
        return (math.floor(after_s / self.interval_s) + 1) * self.interval_s

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True, repr=False)
class CronSchedule:
    """Equal by the minutes it fires at, however written: cron(0 0 ? * 2-6 *) is cron(0 0 ? * MON-FRI *)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    day_of_month: DayField
    months: tuple[int, ...]
    day_of_week: DayField
    years: tuple[int, ...]
    text: str = field(compare=False)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"CronSchedule({self.text!r})"

    def next_after(self, after_s: float) -> int | None:
        """The first minute strictly after `after_s` that every field names. Walks the fields from the year down,
        each from its value in the start minute while the fields above it are still at theirs, from its first value
        once one of them has moved on: at most a few thousand steps, even for a schedule that fires no more."""
        if after_s >= _END_S:
            return None
        start = datetime.datetime.fromtimestamp((math.floor(after_s / 60) + 1) * 60, datetime.UTC)
        days_of = self.day_of_month.days if not isinstance(self.day_of_month, AnyDay) else self.day_of_week.days
        for year in self.years:
            if year < start.year:
                continue
            at_year = year == start.year
            for month in self.months:
                if at_year and month < start.month:
                    continue
                at_month = at_year and month == start.month
                for day in days_of(year, month):
                    if at_month and day < start.day:
                        continue
                    at_day = at_month and day == start.day
                    for hour in self.hours:
                        if at_day and hour < start.hour:
                            continue
                        at_hour = at_day and hour == start.hour
                        for minute in self.minutes:
                            if at_hour and minute < start.minute:
                                continue
                            return calendar.timegm((year, month, day, hour, minute, 0))
        return None


Schedule = RateSchedule | CronSchedule


def parse_schedule(text: str) -> Schedule:
    """Parse a `rate(...)` or `cron(...)` expression; ScheduleError says what is wrong and where (`offset`)."""
    if len(text) > MAX_SCHEDULE_CHARS:
        raise ScheduleError(f"longer than {MAX_SCHEDULE_CHARS} characters (AWS's limit)", MAX_SCHEDULE_CHARS)
    body = text.strip()
    lead = len(text) - len(text.lstrip())
    for keyword in ("rate", "cron"):
        if body.startswith(keyword + "("):
            if not body.endswith(")"):
                raise ScheduleError(f"{keyword}(...) is not closed: end it with ')'", lead + len(body))
            inner_offset = lead + len(keyword) + 1
            inner = body[len(keyword) + 1 : -1]
            return _rate(inner, inner_offset, body) if keyword == "rate" else _cron(inner, inner_offset, body)
    raise ScheduleError(
        "a schedule is rate(<value> <unit>), as rate(5 minutes), or cron(<minutes> <hours> <day-of-month> <month>"
        " <day-of-week> <year>), as cron(0 10 * * ? *)",
        lead,
    )


def _words(inner: str, offset: int) -> list[tuple[str, int]]:
    return [(match.group(), offset + match.start()) for match in _WORD.finditer(inner)]


def _rate(inner: str, offset: int, text: str) -> RateSchedule:
    words = _words(inner, offset)
    if len(words) != 2:
        raise ScheduleError(
            "rate(...) takes a value and a unit, as rate(5 minutes)", words[2][1] if words[2:] else offset
        )
    (value_text, value_at), (unit, unit_at) = words
    if _DIGITS.fullmatch(value_text) is None or not 1 <= int(value_text) <= MAX_RATE_VALUE:
        raise ScheduleError(f"rate value {value_text!r}: give a whole number from 1 to {MAX_RATE_VALUE}", value_at)
    value = int(value_text)
    singular = unit[:-1] if unit.endswith("s") else unit
    if singular not in _UNIT_SECONDS:
        raise ScheduleError(f"rate unit {unit!r}: give minute(s), hour(s) or day(s)", unit_at)
    if value == 1 and unit != singular:
        raise ScheduleError(f"rate(1 {unit}): a value of 1 takes the singular unit, {singular}", unit_at)
    if value != 1 and unit == singular:
        raise ScheduleError(f"rate({value} {unit}): a value other than 1 takes the plural unit, {unit}s", unit_at)
    return RateSchedule(value * _UNIT_SECONDS[singular], text)


def _cron(inner: str, offset: int, text: str) -> CronSchedule:
    words = _words(inner, offset)
    if len(words) != len(_FIELDS):
        where = words[len(_FIELDS)][1] if len(words) > len(_FIELDS) else offset + len(inner)
        raise ScheduleError(
            f"cron(...) takes 6 fields, minutes hours day-of-month month day-of-week year, not {len(words)}", where
        )
    (minutes, hours, day_of_month, month, day_of_week, year) = words
    dom = _day_of_month(*day_of_month)
    dow = _day_of_week(*day_of_week)
    if isinstance(dom, AnyDay) and isinstance(dow, AnyDay):
        raise ScheduleError("day-of-week: only one of day-of-month and day-of-week can be '?'", day_of_week[1])
    if not isinstance(dom, AnyDay) and not isinstance(dow, AnyDay):
        raise ScheduleError(
            "day-of-week: one of day-of-month and day-of-week must be '?' (AWS takes a value or '*' in only one"
            " of them), as cron(0 10 * * ? *) or cron(0 10 ? * MON *)",
            day_of_week[1],
        )
    return CronSchedule(
        _sorted(MINUTES, *minutes),
        _sorted(HOURS, *hours),
        dom,
        _sorted(MONTH, *month),
        dow,
        _sorted(YEAR, *year),
        text,
    )


_NEAREST_WEEKDAY = re.compile(r"([0-9]+)W")
_LAST_IN_MONTH = re.compile(r"([0-9]+|[A-Z]{3})L")
_NTH_IN_MONTH = re.compile(r"([0-9]+|[A-Z]{3})#([0-9]+)")


def _day_of_month(text: str, offset: int) -> DayField:
    upper = text.upper()
    if upper == "?":
        return AnyDay()
    if upper == "L":
        return LastDay()
    if upper == "LW":
        return LastWeekday()
    nearest = _NEAREST_WEEKDAY.fullmatch(upper)
    if nearest is not None:
        return NearestWeekday(_value(DAY_OF_MONTH, nearest[1], offset))
    for mark, meaning in (("?", "?"), ("L", "L and LW"), ("W", "<day>W")):
        if mark in upper:
            raise ScheduleError(
                f"day-of-month {text!r}: {meaning} stand(s) alone in the field, without lists, ranges or offsets",
                offset + upper.index(mark),
            )
    return MonthDays(frozenset(_values(DAY_OF_MONTH, text, offset)))


def _day_of_week(text: str, offset: int) -> DayField:
    upper = text.upper()
    if upper == "?":
        return AnyDay()
    if upper == "L":
        return Weekdays(frozenset({SATURDAY}))
    last = _LAST_IN_MONTH.fullmatch(upper)
    if last is not None:
        return LastInMonth(_value(DAY_OF_WEEK, last[1], offset))
    nth = _NTH_IN_MONTH.fullmatch(upper)
    if nth is not None:
        weekday = _value(DAY_OF_WEEK, nth[1], offset)
        count_at = offset + len(nth[1]) + 1
        if not 1 <= int(nth[2]) <= MAX_NTH:
            raise ScheduleError(f"day-of-week {text!r}: after '#' give 1 to {MAX_NTH} (which such day of the month)",
                                count_at)  # fmt: skip
        return NthInMonth(weekday, int(nth[2]))
    for mark, meaning in (("#", "a '#' expression"), ("L", "L"), ("?", "?")):
        if mark in upper:
            raise ScheduleError(
                f"day-of-week {text!r}: {meaning} stands alone in the field (AWS takes one, as 6#3, and refuses"
                " lists such as 3#1,6#3)",
                offset + upper.index(mark),
            )
    if "/" in upper:
        raise ScheduleError(
            f"day-of-week {text!r}: '/' is not taken here; it takes , - * ? L #", offset + upper.index("/")
        )
    return Weekdays(frozenset(_values(DAY_OF_WEEK, text, offset)))


def _sorted(spec: _Field, text: str, offset: int) -> tuple[int, ...]:
    return tuple(sorted(_values(spec, text, offset)))


def _values(spec: _Field, text: str, offset: int) -> set[int]:
    found: set[int] = set()
    at = offset
    for item in text.split(","):
        found.update(_item(spec, item, at))
        at += len(item) + 1
    return found


def _item(spec: _Field, item: str, offset: int) -> range:
    if not item:
        raise ScheduleError(f"{spec.name}: an empty item in a list; write values between the commas", offset)
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        span = spec.high - spec.low + 1
        step_at = offset + len(base) + 1
        if _DIGITS.fullmatch(step_text) is None or not 1 <= int(step_text) <= span:
            raise ScheduleError(f"{spec.name}: increment {step_text!r} after '/': give a whole number from 1 to {span}",
                                step_at)  # fmt: skip
        step = int(step_text)
    if base == "*":
        return range(spec.low, spec.high + 1, step)
    first, dash, last = base.partition("-")
    start = _value(spec, first, offset)
    if not dash:
        return range(start, (spec.high if slash else start) + 1, step)
    end = _value(spec, last, offset + len(first) + 1)
    if end < start:
        raise ScheduleError(
            f"{spec.name}: the range {base!r} runs backwards, and AWS ranges do not wrap around; write it as two,"
            f" {first}-{spec.high},{spec.low}-{last}",
            offset,
        )
    return range(start, end + 1, step)


def _value(spec: _Field, text: str, offset: int) -> int:
    if _DIGITS.fullmatch(text) is not None:
        value = int(text)
        if not spec.low <= value <= spec.high:
            raise ScheduleError(f"{spec.name}: {value} is out of range; give {spec.accepted}", offset)
        return value
    named = spec.names.get(text.upper())
    if named is not None:
        return named
    if text in ("*", "?") or (text and text[0] in "?LW#"):
        raise ScheduleError(f"{spec.name}: {text!r} cannot be used here; {spec.name} takes {spec.takes}", offset)
    if not text:
        raise ScheduleError(f"{spec.name}: a value is missing (before or after '-'); give {spec.accepted}", offset)
    raise ScheduleError(f"{spec.name}: {text!r} is not a value; give {spec.accepted}", offset)
