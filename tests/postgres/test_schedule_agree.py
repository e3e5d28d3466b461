"""lane_pg.types.schedule against the stored functions of sql/functions/08_schedule.sql (REP-1,
REP-5, A11), on random input from Hypothesis.

* ``check_repeat`` and ``lane._check_repeat`` accept exactly the same documents: patterns
  drawn from a grammar of valid and invalid pieces, zones valid and not, every other key
  given good values, near misses and junk.
* ``cron_next`` and ``lane._cron_next`` give the same instant for valid patterns in zones
  with whole-hour, half-hour and no daylight saving, after instants drawn mostly within two
  days of one of those zones' switches.
* ``repeat_next`` and ``lane._repeat_next`` agree on intervals (exact microseconds) and
  patterns, with and without a previous time and end_at.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from lane_pg.errors import InvalidOptions
from lane_pg.types.schedule import (
    MAX_END_AT_MS,
    MAX_EVERY_MS,
    MAX_LIMIT,
    check_repeat,
    cron_next,
    repeat_next,
)

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
    "CET",
]
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _switches(zone_name: str, first_year: int, last_year: int) -> list[datetime]:
    """The instants (to the second) at which the zone's UTC offset changes."""
    zone = ZoneInfo(zone_name)

    def offset(instant: datetime) -> timedelta | None:
        return instant.astimezone(zone).utcoffset()

    found = []
    instant = datetime(first_year, 1, 1, tzinfo=UTC)
    end = datetime(last_year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=6)
    while instant < end:
        later = instant + step
        if offset(instant) != offset(later):
            low, high = instant, later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
            found.append(high)
        instant = later
    return found


SWITCHES = sorted({s for zone in ZONES for s in _switches(zone, 2024, 2028)})
assert len(SWITCHES) > 20  # Berlin, New York and Lord Howe switch twice a year

near_switches = st.builds(
    lambda switch, seconds, micros: switch + timedelta(seconds=seconds, microseconds=micros),
    st.sampled_from(SWITCHES),
    st.integers(-2 * 86400, 2 * 86400) | st.sampled_from([-3601, -3600, -1, 0, 1, 1799, 3599]),
    st.sampled_from([0, 0, 0, 1, 500_000, 999_999]),
)
anywhere = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
instants = st.one_of(near_switches, near_switches, near_switches, anywhere)

# ------------------------------------------------------------------ pattern grammar
_RANGES = {
    "second": (0, 59, []),
    "minute": (0, 59, []),
    "hour": (0, 23, []),
    "dom": (1, 31, []),
    "month": (1, 12, ["JAN", "feb", "Mar", "APR", "may", "JUN", "jul", "AUG", "sep", "DEC"]),
    "dow": (0, 7, ["SUN", "mon", "Tue", "WED", "thu", "FRI", "sat"]),
}


# The strategies a draw uses are built once, here, not inside the draws: a strategy built
# per draw is validated again each time, which was half of these tests' CPU time.
def _values(field: str, valid: bool) -> st.SearchStrategy[str]:
    low, high, names = _RANGES[field]
    value = st.integers(low, high).map(str)
    if names:
        value = value | st.sampled_from(names)
    if not valid:  # values a field refuses, next to good ones
        value = value | st.sampled_from(
            [str(low - 1), str(high + 1), "99", "007", "L", "W", "5W", "1#2", "H", "?", "", "X"]
        )
    return value


_VALUES = {(field, valid): _values(field, valid) for field in _RANGES for valid in (True, False)}
_STEPS = {
    True: st.integers(1, 6).map(str),
    False: st.sampled_from(["0", "1", "2", "61", "100", "x", ""]),
}
_SHAPES = st.sampled_from(["*", "value", "value", "range", "step", "start-step"])


@st.composite
def _item(draw: st.DrawFn, field: str, valid: bool) -> str:
    low, _, names = _RANGES[field]
    value = _VALUES[field, valid]
    first = draw(value)
    shape = draw(_SHAPES)
    step = draw(_STEPS[valid])
    if shape == "*":
        return f"*/{step}"
    if shape == "value":
        return first
    if shape == "start-step":
        return f"{first}/{step}"
    second = draw(value)

    def position(token: str) -> int:
        return (
            int(token) if token.isdigit() else low + [n.upper() for n in names].index(token.upper())
        )

    if valid and position(first) > position(second):
        first, second = second, first
    text = f"{first}-{second}"
    return f"{text}/{step}" if shape == "step" else text


_ITEM_LISTS = {
    (field, valid): st.lists(_item(field, valid), min_size=1, max_size=3)
    for field in _RANGES
    for valid in (True, False)
}


@st.composite
def _field(draw: st.DrawFn, field: str, valid: bool) -> str:
    if field in ("dom", "dow") and draw(st.integers(0, 4)) == 0:
        return "?"
    if draw(st.integers(0, 2)) == 0:
        return "*"
    return ",".join(draw(_ITEM_LISTS[field, valid]))


_FIELDS = {(field, valid): _field(field, valid) for field in _RANGES for valid in (True, False)}


@st.composite
def patterns(draw: st.DrawFn, valid_items: bool = True) -> str:
    """Mostly well-formed patterns of 5, 6 or 7 fields (some still refused: ranges of
    names running backwards, days that never occur); with ``valid_items=False`` the
    pieces include values out of range, bad steps and unsupported syntax."""
    six = [draw(_FIELDS[name, valid_items]) for name in _RANGES]
    count = draw(st.sampled_from([5, 6, 6, 7, 7]))
    fields = six[1:] if count == 5 else six
    if count == 7:
        fields = [*fields, draw(st.sampled_from(["*", "*", "*", "2026", "?", "*/2"]))]
    separator = draw(st.sampled_from([" ", " ", "  ", "\t"]))
    return separator.join(fields)


mangled_patterns = st.one_of(
    patterns(valid_items=False),
    st.builds(lambda p, extra: f"{p} {extra}", patterns(), st.sampled_from(["*", "0"])),
    patterns().map(lambda p: p.split(" ", 1)[-1]),
    st.sampled_from(["", " ", "@daily", "0 0 30 2 *", "0 0 31 4,6 *", "* * * * *\n"]),
    st.text(alphabet="0123456789*/-,?LW# \tJANMOX", max_size=20),
)

# ------------------------------------------------------------------ documents
# jsonb holds no NUL and no lone surrogate (json.dumps would write them as escapes).
_storable = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
_text = st.text(_storable, max_size=4)
near_misses = st.sampled_from([None, True, False, -1, 0, 1.5, "1", [], {}, 10**20])
zones = st.sampled_from(
    [*ZONES, "EST5EDT", "Etc/GMT+5", "europe/berlin", "UTC+3", "PST", "posix/CET", "localtime"]
)
VALID_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "every_ms": st.integers(1, MAX_EVERY_MS) | st.sampled_from([1, MAX_EVERY_MS]),
    "pattern": patterns(),
    "tz": zones,
    "limit": st.integers(1, MAX_LIMIT) | st.sampled_from([1, MAX_LIMIT]),
    "end_at": st.integers(0, MAX_END_AT_MS) | st.sampled_from([0, MAX_END_AT_MS]),
    "key": st.text(_storable, min_size=1, max_size=8) | st.just("k" * 255),
}
FAULTY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "every_ms": near_misses | st.sampled_from([MAX_EVERY_MS + 1, "60000"]),
    "pattern": mangled_patterns | near_misses,
    "tz": near_misses | st.sampled_from(["", "Europe//Berlin", "Mars/Olympus", "right/UTC"]),
    "limit": near_misses | st.sampled_from([MAX_LIMIT + 1]),
    "end_at": near_misses | st.sampled_from([MAX_END_AT_MS + 1, "2026-01-01"]),
    "key": near_misses | st.sampled_from(["", "k" * 256]),
}


@st.composite
def repeat_documents(draw: st.DrawFn) -> Any:
    schedule = draw(st.sampled_from(["every_ms", "pattern", "pattern", "pattern", "both", "none"]))
    keys = {"every_ms", "pattern"} if schedule == "both" else set()
    if schedule in ("every_ms", "pattern"):
        keys.add(schedule)
    keys.update(draw(st.sets(st.sampled_from(["tz", "limit", "end_at", "key"]), max_size=3)))
    document: dict[str, Any] = {key: draw(VALID_VALUES[key]) for key in sorted(keys)}
    if keys and draw(st.integers(0, 2)) == 0:
        key = draw(st.sampled_from(sorted(keys)))
        document[key] = draw(FAULTY_VALUES[key])
    if draw(st.integers(0, 5)) == 0:
        document[draw(st.sampled_from(["bogus", "every", "Pattern", "", "tz "]))] = draw(
            st.none() | _text
        )
    if draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([[], "0 * * * *", 5, None]))
    return document


async def _sql_accepts(conn: asyncpg.Connection, document: Any) -> bool:
    try:
        async with conn.transaction():
            await conn.execute("SELECT lane._check_repeat($1::jsonb)", json.dumps(document))
    except asyncpg.PostgresError as error:
        assert error.sqlstate == "LN003", (document, error)
        return False
    return True


def _python_accepts(document: Any) -> bool:
    try:
        check_repeat(document)
    except InvalidOptions:
        return False
    return True


@SETTINGS
@given(document=repeat_documents())
@example(document={"pattern": "0 0 2 * * * *", "tz": "CET"})
@example(document={"pattern": "0 0 * * FRI-MON"})
@example(document={"pattern": "0 0 30,31 2 *"})
@example(document={"pattern": "0 0 30,31 2 1"})
@example(document={"pattern": "0 0 2 * * * *", "tz": "EST5EDT"})
@example(document={"every_ms": 1000, "tz": None, "bogus": None})
async def test_check_repeat_agrees_with_sql_REP_1_REP_5(
    conn: asyncpg.Connection, document: Any
) -> None:
    """REP-1, REP-5: the same documents are accepted and refused (LN003) on both sides."""
    python = _python_accepts(document)
    event("accepted" if python else "refused")
    assert await _sql_accepts(conn, document) == python, document


@st.composite
def valid_patterns(draw: st.DrawFn) -> str:
    pattern = draw(patterns())
    try:
        check_repeat({"pattern": pattern})
    except InvalidOptions:
        # Make it valid the blunt way: every field a plain list of in-range numbers would
        # shrink badly, so fall back to a dense or a sparse well-known pattern.
        return draw(st.sampled_from(["* * * * * *", "*/7 * * * *", "0 30 1,2 * * *"]))
    return pattern


@SETTINGS
@given(
    pattern=valid_patterns()
    | st.sampled_from(["* * * * * *", "* * * * *", "0 * * * *", "30 2 * * *", "0,30 * * * *"]),
    tz=st.sampled_from([*ZONES, None]),
    after=instants,
)
@example(pattern="0 0 */2 * 1", tz=None, after=datetime(2026, 3, 3, tzinfo=UTC))
@example(pattern="0 0 0 29 2 *", tz="Australia/Lord_Howe", after=datetime(2096, 3, 1, tzinfo=UTC))
@example(pattern="* * * * * *", tz="Europe/Berlin", after=datetime(2026, 10, 25, 1, tzinfo=UTC))
@example(
    pattern="15-45 1 * * *",
    tz="Australia/Lord_Howe",
    after=datetime(2026, 4, 4, 15, 10, tzinfo=UTC),
)
async def test_cron_next_agrees_with_sql_REP_5(
    conn: asyncpg.Connection, pattern: str, tz: str | None, after: datetime
) -> None:
    """REP-5: the same next instant, daylight-saving switches included."""
    python = cron_next(pattern, tz, after)
    sql = await conn.fetchval("SELECT lane._cron_next($1, $2, $3)", pattern, tz, after)
    event("found" if python is not None else "none")
    assert sql == python, (pattern, tz, after)


@SETTINGS
@given(
    document=st.one_of(
        st.fixed_dictionaries(
            {"every_ms": st.integers(1, 10**7) | st.integers(1, MAX_EVERY_MS)},
            optional={"end_at": st.integers(0, MAX_END_AT_MS)},
        ),
        st.fixed_dictionaries(
            {"pattern": valid_patterns(), "tz": st.sampled_from([*ZONES, None])},
            optional={"end_at": st.integers(1_700_000_000_000, 1_900_000_000_000)},
        ),
    ),
    prev=st.none() | instants,
    now=instants,
)
async def test_repeat_next_agrees_with_sql_A11(
    conn: asyncpg.Connection, document: dict[str, Any], prev: datetime | None, now: datetime
) -> None:
    """A11: the same next due time for intervals (to the microsecond) and patterns."""
    python = repeat_next(check_repeat(document), prev, now)
    sql = await conn.fetchval(
        "SELECT lane._repeat_next($1::jsonb, $2, $3)", json.dumps(document), prev, now
    )
    assert sql == python, (document, prev, now)
