"""The schedule of repeatable jobs (REP-1, REP-5, A11): ``lane._check_repeat``,
``lane._cron_next`` and ``lane._repeat_next`` in Python.

The stored functions of sql/functions/08_schedule.sql are the authority; this module
applies the same rules for backends that are not PostgreSQL and for the worker, which
computes a successor's time (WORK-12). tests/postgres/test_schedule_agree.py feeds both
random documents, patterns and instants and compares. The rules (the SQL file's header says
the same):

* A repeat document is ``{"every_ms": n}`` or ``{"pattern": "<cron>"}`` plus optional
  ``tz`` (pattern only), ``limit`` (total runs, the first included), ``end_at`` (epoch
  milliseconds) and ``key``; a JSON null means "not given".
* Cron patterns have 5 fields (``min hour dom mon dow``), 6 (seconds first) or 7 (seconds
  first, a year that must be ``*``); ``*``, values, ``a-b``, ``/step``, lists, JAN-DEC,
  SUN-SAT, weekday 7 = Sunday, ``?`` alone for a day field. When both day fields are
  restricted (neither exactly ``*``/``?``) a day matches if either does (croniter's rule).
* Wall-clock times are those of ``tz`` (UTC when absent). A time the zone skips does not
  run that day; a time it repeats runs once, at its first occurrence, so nothing runs in the
  second pass of a repeated hour.
* ``every_ms`` is anchored to the previous scheduled time; slots that passed are skipped.

croniter only walks naive wall-clock times here (its own time-zone handling around DST is
not relied on); zoneinfo turns them into instants. croniter's 6-field form puts seconds
last, so patterns are handed to it as 6 fields with ``second_at_beginning=True`` and every
field expanded to a plain list of numbers, parsed by this module: croniter accepts more
than SQL does (``L``, ``W``, ``#``, ``H``, steps past the field) and must not decide.

This module imports nothing but the standard library, croniter and ``lane_pg.errors``.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeAlias
from zoneinfo import ZoneInfo, available_timezones

from lane_pg.errors import InvalidOptions

__all__ = [
    "MAX_END_AT_MS",
    "MAX_EVERY_MS",
    "MAX_LIMIT",
    "REPEAT_KEYS",
    "SEARCH_YEARS",
    "CronSchedule",
    "RepeatOptions",
    "RepeatSpec",
    "check_repeat",
    "cron_next",
    "is_zone_name",
    "parse_cron",
    "repeat_next",
]

_JSON: TypeAlias = Any

REPEAT_KEYS: tuple[str, ...] = ("end_at", "every_ms", "key", "limit", "pattern", "tz")
MAX_EVERY_MS = 9_223_372_036_854
"""As every other stored duration (``lane_pg.options.MAX_DURATION_MS``)."""
MAX_LIMIT = 2**31 - 1
MAX_END_AT_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last millisecond a ``datetime`` can hold."""
MAX_KEY_LENGTH = 255
SEARCH_YEARS = 8
"""A cron search gives up after the end of local year ``year(after) + SEARCH_YEARS``:
enough for the sparsest pattern the rules accept, Feb 29 (2096 -> 2104)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_INSTANT_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_ONE_US = timedelta(microseconds=1)


# --------------------------------------------------------------------------- cron patterns
@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    star_high: int
    """Where ``*`` and ``n/step`` stop: 6 for weekdays, whose 7 only aliases Sunday."""
    names: tuple[str, ...] = ()


_FIELDS = (
    _Field("second", 0, 59, 59),
    _Field("minute", 0, 59, 59),
    _Field("hour", 0, 23, 23),
    _Field("day-of-month", 1, 31, 31),
    _Field(
        "month",
        1,
        12,
        12,
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    ),
    _Field("day-of-week", 0, 7, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)
_ITEM = re.compile(r"(?:(\*)|([0-9]+|[A-Za-z]+)(?:-([0-9]+|[A-Za-z]+))?)(?:/([0-9]+))?")
_SEPARATOR = re.compile(r"[ \t]+")
_LONGEST_MONTH = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron pattern: the values each field allows (weekdays 0-6, Sunday 0), and
    whether each day field is unrestricted (exactly ``*`` or ``?``) for the day rule."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]
    any_day: bool
    any_weekday: bool

    def croniter_expressions(self) -> list[str]:
        """6-field croniter expressions (seconds first) whose matches together are this
        schedule's. With a day field at ``*`` croniter requires the other one alone, as the
        day rule does; with both restricted a day matches if either does, so one
        expression per day field with the other at ``*``, whose matches are merged (this
        keeps croniter's own ``day_or`` rule, which varies across versions, out of it)."""

        def listed(values: tuple[int, ...]) -> str:
            return ",".join(map(str, values))

        head = f"{listed(self.seconds)} {listed(self.minutes)} {listed(self.hours)}"
        months = listed(self.months)
        days = "*" if self.any_day else listed(self.days)
        weekdays = "*" if self.any_weekday else listed(self.weekdays)
        if self.any_day or self.any_weekday:
            return [f"{head} {days} {months} {weekdays}"]
        return [f"{head} {days} {months} *", f"{head} * {months} {weekdays}"]


def _fail_field(pattern: str, field: _Field, problem: str) -> InvalidOptions:
    return InvalidOptions(f"invalid cron pattern {pattern!r}: {field.name} field: {problem}")


def _field_value(pattern: str, field: _Field, token: str) -> int:
    if token.isascii() and token.isdigit():
        value = int(token)
        if not field.low <= value <= field.high:
            raise _fail_field(pattern, field, f"{token} is out of range {field.low}-{field.high}")
        return value
    upper = token.upper()
    if upper not in field.names:
        hint = f"use {' '.join(field.names)}" if field.names else "this field takes numbers only"
        raise _fail_field(pattern, field, f"unknown name {token!r} ({hint})")
    return field.low + field.names.index(upper)


def _parse_field(pattern: str, field: _Field, text: str) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise _fail_field(
                pattern,
                field,
                f"{item!r} is not *, a value, a range a-b, or one of those with /step"
                " (L, W, #, H and ? inside a list are not supported)",
            )
        star, first, last, step_text = match.groups()
        step = 1
        if step_text is not None:
            span = field.star_high - field.low + 1
            if not 1 <= int(step_text) <= span:
                raise _fail_field(pattern, field, f"step {step_text} must be between 1 and {span}")
            step = int(step_text)
        if star is not None:
            start, stop = field.low, field.star_high
        else:
            start = _field_value(pattern, field, first)
            if last is not None:
                stop = _field_value(pattern, field, last)
                if start > stop:
                    raise _fail_field(
                        pattern,
                        field,
                        f"range {item!r} runs backwards (write a-b with a <= b, or a list)",
                    )
            else:
                stop = start if step_text is None else max(start, field.star_high)
        values.update(range(start, stop + 1, step))
    return tuple(sorted(values))


@functools.lru_cache(maxsize=256)
def parse_cron(pattern: str) -> CronSchedule:
    """The schedule of ``pattern`` (``lane._cron_parse``); InvalidOptions when invalid."""
    if not isinstance(pattern, str):
        raise InvalidOptions(f"pattern must be a cron expression string, got {pattern!r}")
    fields = _SEPARATOR.split(pattern.strip(" \t"))
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) == 7:
        if fields[6] != "*":
            raise InvalidOptions(
                f"invalid cron pattern {pattern!r}: the year field (7th) must be *,"
                f" got {fields[6]!r}"
            )
        del fields[6]
    elif len(fields) != 6:
        raise InvalidOptions(
            f"invalid cron pattern {pattern!r}: use 5 fields (minute hour day-of-month month"
            " day-of-week), 6 (second first) or 7 (second first, year * last),"
            f" got {len(fields)}"
        )
    for index, (field, text) in enumerate(zip(_FIELDS, fields, strict=True)):
        if "?" in text and not (index in (3, 5) and text == "?"):
            raise _fail_field(
                pattern,
                field,
                f"{text!r} (? may only stand alone, for the day-of-month or day-of-week field)",
            )
    parsed = [
        _parse_field(pattern, field, text.replace("?", "*"))
        for field, text in zip(_FIELDS, fields, strict=True)
    ]
    seconds, minutes, hours, days, months, weekdays = parsed
    schedule = CronSchedule(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=tuple(sorted({weekday % 7 for weekday in weekdays})),
        any_day=fields[3] in ("*", "?"),
        any_weekday=fields[5] in ("*", "?"),
    )
    # Only the day of month decides (weekday `*`): it must exist in one of the months.
    if (
        not schedule.any_day
        and schedule.any_weekday
        and not any(days[0] <= _LONGEST_MONTH.get(month, 31) for month in months)
    ):
        raise InvalidOptions(
            f"invalid cron pattern {pattern!r} never matches: no day"
            f" {','.join(map(str, days))} in month(s) {','.join(map(str, months))}"
        )
    return schedule


# --------------------------------------------------------------------------- time zones
_ZONE_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")


@functools.cache
def _zone_names() -> frozenset[str]:
    # localtime names the host's own zone, not one of the tz database's.
    return frozenset(available_timezones()) - {"localtime", "posixrules"}


def is_zone_name(tz: object) -> bool:
    """True for a tz database zone name (``lane._is_zone_name``): the names of
    ``zoneinfo.available_timezones()`` but ``localtime``, spelt exactly as listed."""
    return (
        isinstance(tz, str)
        and len(tz) <= 255
        and _ZONE_SHAPE.fullmatch(tz) is not None
        and not tz.startswith(("posix/", "right/"))
        and tz in _zone_names()
    )


@functools.lru_cache(maxsize=64)
def _zone(tz: str | None) -> tzinfo:
    if tz is None:
        return UTC
    if not is_zone_name(tz):
        raise InvalidOptions(f"unknown time zone {tz!r}")
    return ZoneInfo(tz)


def _first_instant(local: datetime, zone: tzinfo) -> datetime | None:
    """The earliest instant whose wall-clock time in ``zone`` is the naive ``local``, or
    None when the zone skips that time. ``fold=0`` picks the earlier of a repeated time;
    for a skipped one it gives an instant whose wall clock reads differently."""
    instant = local.replace(tzinfo=zone).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != local:
        return None
    return instant


def _matches_after(schedule: CronSchedule, start: datetime) -> Iterator[datetime]:
    """The naive wall-clock times matching ``schedule`` strictly after ``start``, in order."""
    # Imported here: croniter (and the dateutil it loads) is 35 ms of every process's
    # import of lane_pg, and only a cron schedule's next run needs it.
    from croniter import CroniterBadDateError, croniter

    def walk(expression: str) -> Iterator[datetime]:
        times = croniter(
            expression,
            start,
            second_at_beginning=True,
            max_years_between_matches=SEARCH_YEARS + 2,
        )
        while True:
            try:
                yield times.get_next(datetime)
            except CroniterBadDateError:
                return

    previous = None
    for local in heapq.merge(*map(walk, schedule.croniter_expressions())):
        if local != previous:
            yield local
        previous = local


def cron_next(pattern: str, tz: str | None, after: datetime) -> datetime | None:
    """The first instant strictly after ``after`` whose wall-clock time in ``tz`` (UTC when
    None) matches ``pattern``, in UTC; None when there is none by the end of local year
    ``year(after) + SEARCH_YEARS`` (``lane._cron_next``). Skipped wall-clock times do not
    run; repeated ones run at their first occurrence only."""
    schedule = parse_cron(pattern)
    zone = _zone(tz)
    if after.tzinfo is None or after.utcoffset() is None:
        raise ValueError(f"after must be an aware datetime, got {after!r}")
    try:
        local_after = after.astimezone(zone).replace(tzinfo=None)
        last_year = local_after.year + SEARCH_YEARS
        for local in _matches_after(schedule, local_after):
            if local.year > last_year:
                return None
            instant = _first_instant(local, zone)
            # Not after `after`: the first occurrence of a time whose repeat `after` is in.
            if instant is not None and instant > after:
                return instant
    except (OverflowError, ValueError):  # past year 9999, where SQL says NULL as well
        return None
    return None


# --------------------------------------------------------------------------- documents
@dataclass(frozen=True, slots=True)
class RepeatSpec:
    """A repeat document ``check_repeat`` accepted; ``end_at`` in epoch milliseconds."""

    every_ms: int | None = None
    pattern: str | None = None
    tz: str | None = None
    limit: int | None = None
    end_at: int | None = None
    key: str | None = None


def _is_count(value: _JSON, maximum: int) -> bool:
    """A JSON integer in 0..maximum (Python's True is an int, JSON's true is not)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def _jsonb_key_order(key: str) -> tuple[int, bytes]:
    """jsonb keeps an object's keys shorter first, then bytewise (``jsonb_each`` order)."""
    encoded = key.encode()
    return (len(encoded), encoded)


def check_repeat(value: _JSON) -> RepeatSpec:
    """``lane._check_repeat``: the spec of a repeat document, or InvalidOptions naming the
    first problem (an unknown key in jsonb order, then every_ms / pattern, tz, limit,
    end_at, key)."""
    if not isinstance(value, dict):
        raise InvalidOptions(f"repeat options must be a JSON object, got {value!r}")
    for key in sorted(value, key=_jsonb_key_order):
        if value[key] is not None and key not in REPEAT_KEYS:
            raise InvalidOptions(
                f"unknown repeat option {key!r}: known repeat options are {', '.join(REPEAT_KEYS)}"
            )
    every, pattern, tz = value.get("every_ms"), value.get("pattern"), value.get("tz")
    limit, end_at, series = value.get("limit"), value.get("end_at"), value.get("key")
    if every is not None and pattern is not None:
        raise InvalidOptions("repeat options take every_ms or pattern, not both")
    if every is None and pattern is None:
        raise InvalidOptions(
            "repeat options need every_ms (an interval in milliseconds) or pattern (a cron"
            " expression)"
        )
    if every is not None:
        if not _is_count(every, MAX_EVERY_MS) or every == 0:
            raise InvalidOptions(
                "every_ms must be an integer number of milliseconds between 1 and"
                f" {MAX_EVERY_MS}, got {every!r}"
            )
        if tz is not None:
            raise InvalidOptions(
                "tz applies only to a pattern: an every_ms interval does not depend on a time zone"
            )
    else:
        if not isinstance(pattern, str):
            raise InvalidOptions(f"pattern must be a cron expression string, got {pattern!r}")
        parse_cron(pattern)
        if tz is not None and not is_zone_name(tz):
            raise InvalidOptions(
                f"unknown time zone {tz!r}: use a tz database name such as Europe/Berlin or UTC"
            )
    if limit is not None and (not _is_count(limit, MAX_LIMIT) or limit == 0):
        raise InvalidOptions(
            f"limit must be an integer between 1 and {MAX_LIMIT} (total runs, the first"
            f" included), got {limit!r}"
        )
    if end_at is not None and not _is_count(end_at, MAX_END_AT_MS):
        raise InvalidOptions(
            "end_at must be integer milliseconds since 1970-01-01 UTC, between 0 and"
            f" {MAX_END_AT_MS} (9999-12-31), got {end_at!r}"
        )
    # NUL: no jsonb string holds one, so SQL never accepts it either.
    if series is not None and (
        not isinstance(series, str) or not 1 <= len(series) <= MAX_KEY_LENGTH or "\x00" in series
    ):
        raise InvalidOptions(
            f"key must be a string of 1-{MAX_KEY_LENGTH} characters, got {series!r}"
        )
    return RepeatSpec(
        every_ms=every, pattern=pattern, tz=tz, limit=limit, end_at=end_at, key=series
    )


def _epoch_us(instant: datetime) -> int:
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got {instant!r}")
    return (instant - _EPOCH) // _ONE_US


def repeat_next(spec: RepeatSpec, prev: datetime | None, now: datetime) -> datetime | None:
    """When the next occurrence is due (``lane._repeat_next``), in UTC; None when that
    would be after ``end_at`` (or after 9999, or no cron match within the bound). The
    caller counts runs against ``limit``.

    * every_ms, no ``prev``: ``now`` (the first run is due at once);
    * every_ms after ``prev``: the first ``prev + k * every`` (k >= 1) strictly after
      ``now``: anchored to the schedule, passed slots skipped (A11);
    * pattern: the first match strictly after ``max(prev, now)``.

    Catch-up after downtime is the caller's choice of ``now``: the real time skips missed
    ticks; ``now=prev`` yields the first missed tick (in the past: it runs at once), once,
    since its own completion passes the real time.
    """
    following: datetime | None
    if spec.every_ms is not None:
        now_us = _epoch_us(now)
        if prev is None:
            following = now.astimezone(UTC)
        else:
            prev_us, step_us = _epoch_us(prev), spec.every_ms * 1000
            elapsed_us = now_us - prev_us
            steps = 1 if elapsed_us < 0 else elapsed_us // step_us + 1
            next_us = prev_us + steps * step_us
            if next_us > _LAST_INSTANT_US:
                return None
            following = _EPOCH + timedelta(microseconds=next_us)
    elif spec.pattern is not None:
        following = cron_next(spec.pattern, spec.tz, now if prev is None else max(prev, now))
    else:
        raise InvalidOptions(f"not a repeat spec (no every_ms or pattern): {spec!r}")
    if (
        following is not None
        and spec.end_at is not None
        and _epoch_us(following) > spec.end_at * 1000
    ):
        return None
    return following


@dataclass(frozen=True, slots=True)
class RepeatOptions:
    """How a job repeats (REP-1), as the caller builds it; ``to_json()`` is the document
    to store under the job options' ``"repeat"`` key. Checked when built."""

    every_ms: int | None = None
    pattern: str | None = None
    tz: str | None = None
    limit: int | None = None
    end_at: int | None = None
    """Epoch milliseconds."""
    key: str | None = None

    def __post_init__(self) -> None:
        check_repeat(self.to_json())

    @classmethod
    def every(
        cls,
        interval: timedelta | float,
        *,
        limit: int | None = None,
        end_at: datetime | None = None,
        key: str | None = None,
    ) -> RepeatOptions:
        """Every ``interval`` (a timedelta or seconds), rounded to whole milliseconds."""
        if isinstance(interval, timedelta):
            every_ms = (interval // _ONE_US + 500) // 1000
        elif (
            isinstance(interval, int | float)
            and not isinstance(interval, bool)
            and math.isfinite(interval)
        ):
            every_ms = round(interval * 1000)
        else:
            raise InvalidOptions(f"interval must be a timedelta or seconds, got {interval!r}")
        return cls(every_ms=every_ms, limit=limit, end_at=_end_at_ms(end_at), key=key)

    @classmethod
    def cron(
        cls,
        pattern: str,
        *,
        tz: str | None = None,
        limit: int | None = None,
        end_at: datetime | None = None,
        key: str | None = None,
    ) -> RepeatOptions:
        """On the wall-clock times of ``tz`` (UTC when None) that ``pattern`` matches."""
        return cls(pattern=pattern, tz=tz, limit=limit, end_at=_end_at_ms(end_at), key=key)

    def to_json(self) -> dict[str, _JSON]:
        return {
            name: value
            for name, value in (
                ("every_ms", self.every_ms),
                ("pattern", self.pattern),
                ("tz", self.tz),
                ("limit", self.limit),
                ("end_at", self.end_at),
                ("key", self.key),
            )
            if value is not None
        }

    def spec(self) -> RepeatSpec:
        return check_repeat(self.to_json())


def _end_at_ms(end_at: datetime | None) -> int | None:
    if end_at is None:
        return None
    if not isinstance(end_at, datetime) or end_at.utcoffset() is None:
        raise InvalidOptions(f"end_at must be an aware datetime, got {end_at!r}")
    return _epoch_us(end_at) // 1000
