"""Schedule expressions: the examples of AWS's documentation with their fire times worked out by hand, every
refusal with the offset it points at, and generated cron expressions checked against a plain reference that walks
the calendar minute by minute and tests each field as the documentation words it."""

from __future__ import annotations

import calendar
import datetime
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventbridge.errors import ScheduleError
from eventbridge.schedules.expression import CronSchedule, RateSchedule, parse_schedule


def at(text: str) -> int:
    return calendar.timegm(datetime.datetime.fromisoformat(text).timetuple())


def iso(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%a %Y-%m-%d %H:%M")


def fires(expression: str, after: str, count: int) -> list[str]:
    schedule = parse_schedule(expression)
    found = []
    moment: int | None = at(after)
    for _ in range(count):
        assert moment is not None
        moment = schedule.next_after(moment)
        if moment is None:
            break
        found.append(iso(moment))
    return found


# AWS's examples (eb-scheduled-rule-pattern, eb-cron-expressions), from Friday 2024-03-29 12:00 UTC, a leap year.
AWS_EXAMPLES = [
    # 10:00 every day
    ("cron(0 10 * * ? *)", ["Sat 2024-03-30 10:00", "Sun 2024-03-31 10:00", "Mon 2024-04-01 10:00"]),
    # 12:15 every day
    ("cron(15 12 * * ? *)", ["Fri 2024-03-29 12:15", "Sat 2024-03-30 12:15", "Sun 2024-03-31 12:15"]),
    # 18:00 Monday to Friday
    ("cron(0 18 ? * MON-FRI *)", ["Fri 2024-03-29 18:00", "Mon 2024-04-01 18:00", "Tue 2024-04-02 18:00"]),
    # 08:00 on the first day of every month
    ("cron(0 8 1 * ? *)", ["Mon 2024-04-01 08:00", "Wed 2024-05-01 08:00", "Sat 2024-06-01 08:00"]),
    # every 15 minutes
    ("cron(0/15 * * * ? *)", ["Fri 2024-03-29 12:15", "Fri 2024-03-29 12:30", "Fri 2024-03-29 12:45"]),
    # every 10 minutes, Monday to Friday
    ("cron(0/10 * ? * MON-FRI *)", ["Fri 2024-03-29 12:10", "Fri 2024-03-29 12:20", "Fri 2024-03-29 12:30"]),
    # every 5 minutes between 08:00 and 17:55, Monday to Friday
    ("cron(0/5 8-17 ? * MON-FRI *)", ["Fri 2024-03-29 12:05", "Fri 2024-03-29 12:10", "Fri 2024-03-29 12:15"]),
    # 09:00 on the first Monday of every month
    ("cron(0 9 ? * 2#1 *)", ["Mon 2024-04-01 09:00", "Mon 2024-05-06 09:00", "Mon 2024-06-03 09:00"]),
    # midnight on the last day of every month
    ("cron(0 0 L * ? *)", ["Sun 2024-03-31 00:00", "Tue 2024-04-30 00:00", "Fri 2024-05-31 00:00"]),
    # midnight on the last Friday of every month
    ("cron(0 0 ? * 6L *)", ["Fri 2024-04-26 00:00", "Fri 2024-05-31 00:00", "Fri 2024-06-28 00:00"]),
    # midnight on the weekday nearest the 1st: 2024-06-01 is a Saturday, and Friday the 31st is in May: Monday
    ("cron(0 0 1W * ? *)", ["Mon 2024-04-01 00:00", "Wed 2024-05-01 00:00", "Mon 2024-06-03 00:00"]),
]


@pytest.mark.parametrize(("expression", "expected"), AWS_EXAMPLES)
def test_aws_documentation_examples(expression: str, expected: list[str]) -> None:
    assert fires(expression, "2024-03-29T12:00:00", 3) == expected


def test_the_documented_wildcards() -> None:
    # 1/10: every tenth minute from the first (the 11th, 21st, 31st ...).
    assert fires("cron(1/10 * * * ? *)", "2024-01-01T00:00:00", 4)[1:] == [
        "Mon 2024-01-01 00:11", "Mon 2024-01-01 00:21", "Mon 2024-01-01 00:31"]  # fmt: skip
    # MON-FRI: from Friday's last fire to Monday's first.
    assert fires("cron(0/10 * ? * MON-FRI *)", "2024-03-29T23:45:00", 2) == [
        "Fri 2024-03-29 23:50", "Mon 2024-04-01 00:00"]  # fmt: skip
    # 3#2: the second Tuesday. JAN,FEB,MAR: a list of names. 2024 and 2026 only, by a year range and increment.
    assert fires("cron(30 6 ? JAN,FEB,MAR 3#2 2024-2026/2)", "2024-01-01T00:00:00", 4) == [
        "Tue 2024-01-09 06:30", "Tue 2024-02-13 06:30", "Tue 2024-03-12 06:30", "Tue 2026-01-13 06:30"]  # fmt: skip
    # LW: the last weekday; 2024-08-31 is a Saturday. L alone in day-of-week: Saturday.
    assert fires("cron(0 0 LW 8 ? 2024)", "2024-01-01T00:00:00", 2) == ["Fri 2024-08-30 00:00"]
    assert fires("cron(0 0 ? * L *)", "2024-01-01T00:00:00", 2) == ["Sat 2024-01-06 00:00", "Sat 2024-01-13 00:00"]
    # 30W: 2024-06-30 is the last day and a Sunday: the Friday before, as the Monday is in July.
    assert fires("cron(0 0 30W 6 ? 2024)", "2024-01-01T00:00:00", 1) == ["Fri 2024-06-28 00:00"]
    # A name in any case; the 5th Sunday only where there is one: a February has one in a leap year that
    # begins it on a Sunday (2032), none from 2024 to 2031.
    assert fires("cron(0 0 ? feb sun#5 2024-2031)", "2024-01-01T00:00:00", 1) == []
    assert fires("cron(0 0 ? feb sun#5 *)", "2024-01-01T00:00:00", 1) == ["Sun 2032-02-29 00:00"]


def test_fires_are_strictly_after_and_stop_after_their_last_year() -> None:
    schedule = parse_schedule("cron(0 12 31 12 ? 2199)")
    last = at("2199-12-31T12:00:00")
    assert schedule.next_after(last - 0.5) == last
    assert schedule.next_after(last) is None
    assert parse_schedule("cron(0 0 30 FEB ? *)").next_after(at("2024-01-01T00:00:00")) is None
    assert parse_schedule("cron(0 0 * * ? 1999)").next_after(at("2024-01-01T00:00:00")) is None


def test_equal_schedules_compare_equal_however_written() -> None:
    assert parse_schedule("cron(0 0 ? * MON-FRI *)") == parse_schedule("cron(0  0 ? * 2-6 *)")
    assert parse_schedule("cron(0 0 ? * L *)") == parse_schedule("cron(0 0 ? * SAT *)")
    assert parse_schedule("rate(60 minutes)") == parse_schedule("rate(1 hour)")
    assert parse_schedule("rate(5 minutes)") != parse_schedule("rate(6 minutes)")


@pytest.mark.parametrize(
    ("expression", "interval_s"),
    [
        ("rate(1 minute)", 60),
        ("rate(5 minutes)", 300),
        ("rate(1 hour)", 3600),
        ("rate(12 hours)", 43200),
        ("rate(1 day)", 86400),
        ("rate(7 days)", 604800),
    ],
)
def test_rate_fires_at_multiples_of_its_interval(expression: str, interval_s: int) -> None:
    schedule = parse_schedule(expression)
    assert isinstance(schedule, RateSchedule) and schedule.interval_s == interval_s
    now = at("2024-03-29T12:34:56")
    first = schedule.next_after(now)
    assert first is not None and first % interval_s == 0 and now < first <= now + interval_s
    assert schedule.next_after(first) == first + interval_s


def test_rate_days_fire_at_midnight_utc_and_weeks_on_thursday() -> None:
    assert fires("rate(1 day)", "2024-03-29T12:00:00", 1) == ["Sat 2024-03-30 00:00"]
    assert fires("rate(7 days)", "2024-03-29T12:00:00", 1) == ["Thu 2024-04-04 00:00"]


REFUSALS = [
    # (expression, what the reason says, the offset it points at)
    ("rate(1 minutes)", "a value of 1 takes the singular unit, minute", 7),
    ("rate(5 minute)", "a value other than 1 takes the plural unit, minutes", 7),
    ("rate(0 minutes)", "give a whole number from 1", 5),
    ("rate(-1 minutes)", "give a whole number from 1", 5),
    ("rate(1.5 hours)", "give a whole number from 1", 5),
    ("rate(5 weeks)", "give minute(s), hour(s) or day(s)", 7),
    ("rate(5)", "takes a value and a unit", 5),
    ("rate(5 minutes", "not closed", 14),
    ("every 5 minutes", "a schedule is rate(<value> <unit>)", 0),
    ("Cron(0 10 * * ? *)", "a schedule is rate(<value> <unit>)", 0),
    ("cron(0 10 * * ?)", "takes 6 fields", 15),
    ("cron(0 10 * * ? * *)", "takes 6 fields", 18),
    ("cron(60 10 * * ? *)", "minutes: 60 is out of range; give 0-59", 5),
    ("cron(0 24 * * ? *)", "hours: 24 is out of range; give 0-23", 7),
    ("cron(0 10 0 * ? *)", "day-of-month: 0 is out of range; give 1-31", 10),
    ("cron(0 10 * 13 ? *)", "month: 13 is out of range; give 1-12 or JAN-DEC", 12),
    ("cron(0 10 * FOO ? *)", "month: 'FOO' is not a value", 12),
    ("cron(0 10 ? * 0 *)", "day-of-week: 0 is out of range; give 1-7 or SUN-SAT", 14),
    ("cron(0 10 ? * 8 *)", "day-of-week: 8 is out of range", 14),
    ("cron(0 10 * * ? 1969)", "year: 1969 is out of range; give 1970-2199", 16),
    ("cron(0 10 * * ? 2200)", "year: 2200 is out of range", 16),
    ("cron(0 10 * * * *)", "one of day-of-month and day-of-week must be '?'", 14),
    ("cron(0 10 1 * MON *)", "one of day-of-month and day-of-week must be '?'", 14),
    ("cron(0 10 ? * ? *)", "only one of day-of-month and day-of-week can be '?'", 14),
    ("cron(? 10 * * ? *)", "minutes: '?' cannot be used here; minutes takes , - * /", 5),
    ("cron(0 L * * ? *)", "hours: 'L' cannot be used here", 7),
    ("cron(0 10 * * ? 2024#1)", "year: '2024#1' is not a value", 16),
    ("cron(0 10 ? * 3#1,6#3 *)", "a '#' expression stands alone", 15),
    ("cron(0 10 ? * 2#6 *)", "after '#' give 1 to 5", 16),
    ("cron(0 10 ? * 1,L *)", "L stands alone", 16),
    ("cron(0 10 ? * MON/2 *)", "'/' is not taken here", 17),
    ("cron(0 10 L-2 * ? *)", "L and LW stand(s) alone", 10),
    ("cron(0 10 1W,15 * ? *)", "<day>W stand(s) alone", 11),
    ("cron(0 10 32W * ? *)", "day-of-month: 32 is out of range", 10),
    ("cron(0/0 10 * * ? *)", "increment '0' after '/': give a whole number from 1 to 60", 7),
    ("cron(0/x 10 * * ? *)", "increment 'x'", 7),
    ("cron(0 22-2 * * ? *)", "runs backwards, and AWS ranges do not wrap around; write it as two, 22-23,0-2", 7),
    ("cron(0 10 ? * FRI-MON *)", "write it as two, FRI-7,1-MON", 14),
    ("cron(0,,5 10 * * ? *)", "an empty item in a list", 7),
    ("cron(-5 10 * * ? *)", "a value is missing", 5),
    ("cron(0 10 * * ? " + "1" * 250 + ")", "longer than 256 characters", 256),
]


@pytest.mark.parametrize(("expression", "reason", "offset"), REFUSALS)
def test_refusals_say_what_and_where(expression: str, reason: str, offset: int) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse_schedule(expression)
    assert reason in refused.value.reason
    assert refused.value.offset == offset, (refused.value.offset, expression[refused.value.offset :])


# --- generated expressions against a reference -------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """A generated field: its text, and the values it names, worked out here apart from the parser."""

    text: str
    values: frozenset[int]


def _render(value: int, names: tuple[str, ...] | None, low: int, use_name: bool) -> str:
    return names[value - low] if names is not None and use_name else str(value)


@st.composite
def plain_field(
    draw: st.DrawFn, low: int, high: int, names: tuple[str, ...] | None = None, steps: bool = True
) -> Field:
    """A list of `*`, values, ranges and increments, the values it names counted by hand."""
    items: list[str] = []
    values: set[int] = set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["star", "value", "range", "step", "range-step", "star-step"]))
        if not steps and kind.endswith("step"):
            kind = "range"
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, high))
        n = draw(st.integers(1, high - low + 1))
        name = draw(st.booleans())
        if kind == "star":
            items.append("*")
            values.update(range(low, high + 1))
        elif kind == "value":
            items.append(_render(a, names, low, name))
            values.add(a)
        elif kind == "range":
            items.append(f"{_render(a, names, low, name)}-{_render(b, names, low, name)}")
            values.update(range(a, b + 1))
        elif kind == "step":
            items.append(f"{_render(a, names, low, name)}/{n}")
            values.update(v for v in range(low, high + 1) if v >= a and (v - a) % n == 0)
        elif kind == "range-step":
            items.append(f"{a}-{b}/{n}")
            values.update(v for v in range(a, b + 1) if (v - a) % n == 0)
        else:
            items.append(f"*/{n}")
            values.update(v for v in range(low, high + 1) if (v - low) % n == 0)
    return Field(",".join(items), frozenset(values))


MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def aws_weekday(day: datetime.date) -> int:
    return day.isoweekday() % 7 + 1  # ISO: Monday 1 .. Sunday 7; AWS: Sunday 1 .. Saturday 7


def last_day(day: datetime.date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def workdays(day: datetime.date) -> list[int]:
    return [d for d in range(1, last_day(day) + 1) if aws_weekday(day.replace(day=d)) not in (1, 7)]


@st.composite
def day_fields(draw: st.DrawFn) -> tuple[str, str, Callable[[datetime.date], bool]]:
    """Day-of-month and day-of-week texts (one of them '?') and a test of a date, as the documentation words it."""
    if draw(st.booleans()):
        kind = draw(st.sampled_from(["list", "list", "L", "LW", "W"]))
        if kind == "list":
            days = draw(plain_field(1, 31))
            return days.text, "?", lambda d: d.day in days.values
        if kind == "L":
            return "L", "?", lambda d: d.day == last_day(d)
        if kind == "LW":
            return "LW", "?", lambda d: d.day == max(workdays(d))
        target = draw(st.integers(1, 31))
        # The nearest Monday-to-Friday day of the same month (never a tie: a weekend day has Friday and Monday at
        # distances 1 and 2); no day when the month is too short.
        return f"{target}W", "?", lambda d: target <= last_day(d) and d.day == min(
            workdays(d), key=lambda w: abs(w - target))  # fmt: skip
    kind = draw(st.sampled_from(["list", "list", "L", "last", "nth"]))
    weekday = draw(st.integers(1, 7))
    text = draw(st.sampled_from([str(weekday), WEEKDAYS[weekday - 1], WEEKDAYS[weekday - 1].lower()]))
    if kind == "list":
        weekdays = draw(plain_field(1, 7, WEEKDAYS, steps=False))
        return "?", weekdays.text, lambda d: aws_weekday(d) in weekdays.values
    if kind == "L":
        return "?", "L", lambda d: aws_weekday(d) == 7
    if kind == "last":
        return "?", f"{text}L", lambda d: aws_weekday(d) == weekday and d.day + 7 > last_day(d)
    nth = draw(st.integers(1, 5))
    return "?", f"{text}#{nth}", lambda d: aws_weekday(d) == weekday and (d.day - 1) // 7 + 1 == nth


@st.composite
def year_fields(draw: st.DrawFn) -> Field:
    """Years near the generated start times (1970 to 2199 would rarely fire within the reference's walk)."""
    kind = draw(st.sampled_from(["star", "star", "star-step", "near"]))
    if kind == "star":
        return Field("*", frozenset(range(1970, 2200)))
    if kind == "star-step":
        n = draw(st.integers(1, 4))
        return Field(f"*/{n}", frozenset(range(1970, 2200, n)))
    a = draw(st.integers(2022, 2028))
    b = draw(st.integers(a, 2028))
    n = draw(st.integers(1, 3))
    text, values = draw(st.sampled_from([
        (str(a), {a}), (f"{a}-{b}", set(range(a, b + 1))), (f"{a}/{n}", set(range(a, 2200, n))),
        (f"{a}-{b}/{n}", set(range(a, b + 1, n))), (f"{a},{b}", {a, b})]))  # fmt: skip
    return Field(text, frozenset(values))


@dataclass(frozen=True)
class CronCase:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    day_test: Callable[[datetime.date], bool]

    def date_matches(self, day: datetime.date) -> bool:
        return day.month in self.months and day.year in self.years and self.day_test(day)

    def time_matches(self, moment: datetime.datetime) -> bool:
        return moment.minute in self.minutes and moment.hour in self.hours


@st.composite
def cron_cases(draw: st.DrawFn) -> CronCase:
    minutes = draw(plain_field(0, 59))
    hours = draw(plain_field(0, 23))
    months = draw(plain_field(1, 12, MONTHS))
    years = draw(year_fields())
    dom, dow, day_test = draw(day_fields())
    text = f"cron({minutes.text} {hours.text} {dom} {months.text} {dow} {years.text})"
    return CronCase(text, minutes.values, hours.values, months.values, years.values, day_test)


# How far the reference walks: two years of minutes.
REFERENCE_DAYS = 2 * 366


def reference_next(after: float, case: CronCase) -> int | None:
    """Minute by minute from the one after `after`; a day whose date fails the date tests is passed whole, as none
    of its minutes can match."""
    moment = datetime.datetime.fromtimestamp((int(after // 60) + 1) * 60, datetime.UTC)
    end = moment + datetime.timedelta(days=REFERENCE_DAYS)
    while moment < end:
        if not case.date_matches(moment.date()):
            moment = (moment + datetime.timedelta(days=1)).replace(hour=0, minute=0)
            continue
        if case.time_matches(moment):
            return int(moment.timestamp())
        moment += datetime.timedelta(minutes=1)
    return None


START = at("2023-01-01T00:00:00")
END = at("2027-12-31T00:00:00")


@settings(max_examples=300, deadline=None)
@given(cron_cases(), st.integers(START, END), st.sampled_from([0.0, 0.25, 59.999]))
def test_generated_cron_expressions_fire_when_the_reference_says(case: CronCase, start: int, fraction: float) -> None:
    schedule = parse_schedule(case.text)
    assert isinstance(schedule, CronSchedule)
    after: float = start + fraction
    for _ in range(3):  # and from each fire time, which is not itself next
        expected = reference_next(after, case)
        found = schedule.next_after(after)
        if expected is None:
            # Nothing in the reference's two years: the schedule's next fire, if any, is past them and matches.
            horizon = after + REFERENCE_DAYS * 86_400
            assert found is None or (found >= horizon - 60 and case.date_matches(_utc(found).date())), case.text
            return
        assert found == expected, (case.text, _utc(after), _utc(found) if found else None, _utc(expected))
        after = found


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2000), st.sampled_from(["minute", "hour", "day"]), st.floats(0, 4e9, allow_nan=False))
def test_generated_rates_fire_at_the_next_multiple(value: int, unit: str, after: float) -> None:
    schedule = parse_schedule(f"rate({value} {unit}{'s' if value != 1 else ''})")
    interval = value * {"minute": 60, "hour": 3600, "day": 86400}[unit]
    found = schedule.next_after(after)
    assert found is not None and found % interval == 0 and after < found <= after + interval
