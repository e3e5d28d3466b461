"""lane_pg.types.schedule on its own (REP-1, REP-4, REP-5, A11): the repeat document, cron
patterns, daylight saving time and the next occurrence. tests/postgres/test_schedule_sql.py
runs the same cases (tests/schedule_cases.py) against the stored functions, and
tests/postgres/test_schedule_agree.py compares the two on random input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lane_pg.errors import InvalidOptions
from lane_pg.types.schedule import (
    RepeatOptions,
    RepeatSpec,
    check_repeat,
    cron_next,
    is_zone_name,
    parse_cron,
    repeat_next,
)
from tests.schedule_cases import (
    CRON_CASES,
    INVALID_DOCUMENTS,
    REPEAT_NEXT_CASES,
    VALID_DOCUMENTS,
    utc,
)


@pytest.mark.parametrize(
    ("pattern", "tz", "after", "expected", "shows"),
    CRON_CASES,
    ids=[f"{case[4]}: {case[0]!r} {case[1]}" for case in CRON_CASES],
)
def test_cron_next_REP_5(
    pattern: str, tz: str | None, after: datetime, expected: datetime | None, shows: str
) -> None:
    """REP-5: 5-, 6- and 7-field patterns, the day rule, and wall-clock times of a zone
    across its daylight-saving switches (skipped times do not run, repeated ones once)."""
    assert cron_next(pattern, tz, after) == expected


def test_a_day_of_daily_runs_across_both_berlin_switches_REP_5() -> None:
    """REP-5: 02:30 daily in Europe/Berlin runs every day but 2026-03-29 (02:30 does not
    exist) and once on 2026-10-25 (02:30 happens twice)."""

    def runs(pattern: str, start: datetime, end: datetime) -> list[datetime]:
        found, after = [], start
        while (following := cron_next(pattern, "Europe/Berlin", after)) and following < end:
            found.append(following)
            after = following
        return found

    march = runs("30 2 * * *", utc("2026-03-27 12:00"), utc("2026-03-31 12:00"))
    assert march == [utc("2026-03-28 01:30"), utc("2026-03-30 00:30"), utc("2026-03-31 00:30")]
    october = runs("30 2 * * *", utc("2026-10-24 12:00"), utc("2026-10-26 12:00"))
    assert october == [utc("2026-10-25 00:30"), utc("2026-10-26 01:30")]
    # Every minute through the fall-back night: the repeated hour runs in its first pass
    # only, so no run has the instants 01:00Z-01:59Z (the second 02:xx) and none repeats.
    night = runs("* * * * *", utc("2026-10-24 23:00"), utc("2026-10-25 03:00"))
    assert len(night) == len(set(night)) == 4 * 60 - 60 - 1
    assert not [run for run in night if utc("2026-10-25 01:00") <= run < utc("2026-10-25 02:00")]
    # Hourly through the spring-forward night: 01:00, 03:00, 04:00 local.
    spring = runs("0 * * * *", utc("2026-03-28 23:30"), utc("2026-03-29 02:30"))
    assert spring == [utc("2026-03-29 00:00"), utc("2026-03-29 01:00"), utc("2026-03-29 02:00")]


def test_equivalent_forms_parse_to_the_same_schedule_REP_5() -> None:
    """REP-5, A11: the seed's 7 fields, 6 seconds-first fields, and 5 fields."""
    seven = parse_cron("0 0 2 * * * *")
    assert parse_cron("0 0 2 * * *") == parse_cron("0 2 * * *") == seven
    assert seven.seconds == (0,) and seven.minutes == (0,) and seven.hours == (2,)
    assert parse_cron("0 0 * * 0,7").weekdays == (0,)
    assert parse_cron("0 0 * * SUN-SAT/2").weekdays == (0, 2, 4, 6)
    assert parse_cron("0 0 ? * MON") == parse_cron("0 0 * * 1")


@pytest.mark.parametrize("document", VALID_DOCUMENTS, ids=repr)
def test_valid_repeat_documents_REP_1(document: dict[str, Any]) -> None:
    spec = check_repeat(document)
    assert spec == RepeatSpec(**{k: v for k, v in document.items() if k != "bogus"})


@pytest.mark.parametrize(
    ("document", "fragment", "shows"),
    INVALID_DOCUMENTS,
    ids=[case[2] for case in INVALID_DOCUMENTS],
)
def test_invalid_repeat_documents_are_refused_clearly_REP_1_REP_5(
    document: Any, fragment: str, shows: str
) -> None:
    """REP-1, REP-5: each invalid document is refused with InvalidOptions (LN003) whose
    message names the problem."""
    with pytest.raises(InvalidOptions) as refused:
        check_repeat(document)
    assert fragment in str(refused.value)
    assert refused.value.sqlstate == "LN003"


@pytest.mark.parametrize(
    ("document", "prev", "now", "expected", "shows"),
    REPEAT_NEXT_CASES,
    ids=[case[4] for case in REPEAT_NEXT_CASES],
)
def test_repeat_next_A11(
    document: dict[str, Any],
    prev: datetime | None,
    now: datetime,
    expected: datetime | None,
    shows: str,
) -> None:
    """A11: every_ms is anchored to the previous scheduled time and skips passed slots; a
    pattern runs at its first match after max(prev, now); end_at (REP-4) ends the series;
    passing now=prev is the catch-up primitive."""
    assert repeat_next(check_repeat(document), prev, now) == expected


def test_end_at_ends_an_every_minute_series_after_two_runs_REP_4() -> None:
    """REP-4's check: every 60 s, first run at T, end_at = T+90 s: exactly 2 runs."""
    start = utc("2026-05-01 12:00")
    spec = RepeatOptions.every(60, end_at=start + timedelta(seconds=90)).spec()
    runs: list[datetime] = []
    prev: datetime | None = None
    while (due := repeat_next(spec, prev, prev or start)) is not None:
        runs.append(due)
        prev = due
    assert runs == [start, start + timedelta(seconds=60)]


def test_catch_up_after_downtime_is_the_callers_choice_of_now_A11() -> None:
    """After three missed hourly ticks: now=real time skips them; now=prev runs the first
    missed tick (due at once) and, passed the real time after it, skips the rest."""
    spec = RepeatOptions.cron("0 * * * *").spec()
    last, real_now = utc("2026-05-01 10:00"), utc("2026-05-01 13:30")
    assert repeat_next(spec, last, real_now) == utc("2026-05-01 14:00")
    missed = repeat_next(spec, last, last)
    assert missed == utc("2026-05-01 11:00")
    assert repeat_next(spec, missed, real_now) == utc("2026-05-01 14:00")


def test_repeat_options_build_the_document_REP_1() -> None:
    end = datetime(2030, 1, 1, tzinfo=UTC)
    every = RepeatOptions.every(timedelta(minutes=1), limit=3, key="crm-heartbeat", end_at=end)
    assert every.to_json() == {
        "every_ms": 60_000,
        "limit": 3,
        "end_at": 1_893_456_000_000,
        "key": "crm-heartbeat",
    }
    assert RepeatOptions.every(0.25).to_json() == {"every_ms": 250}
    assert RepeatOptions.every(timedelta(microseconds=1500)).to_json() == {"every_ms": 2}
    cron = RepeatOptions.cron("0 0 2 * * * *", tz="Europe/Berlin")
    assert cron.to_json() == {"pattern": "0 0 2 * * * *", "tz": "Europe/Berlin"}
    assert cron.spec() == RepeatSpec(pattern="0 0 2 * * * *", tz="Europe/Berlin")


@pytest.mark.parametrize(
    "build",
    [
        lambda: RepeatOptions.every(0),
        lambda: RepeatOptions.every(timedelta(microseconds=400)),
        lambda: RepeatOptions.every(-1.0),
        lambda: RepeatOptions.every(float("nan")),
        lambda: RepeatOptions.every(60, limit=0),
        lambda: RepeatOptions.every(60, end_at=datetime(2030, 1, 1)),  # naive
        lambda: RepeatOptions.cron("0 0 2 * * * 2030"),
        lambda: RepeatOptions.cron("0 2 * * *", tz="Berlin"),
        lambda: RepeatOptions(every_ms=1, pattern="* * * * *"),
    ],
)
def test_repeat_options_refuse_what_check_repeat_refuses_REP_1(build: Any) -> None:
    with pytest.raises(InvalidOptions):
        build()


def test_zone_names_are_the_tz_database_names() -> None:
    assert is_zone_name("Europe/Berlin") and is_zone_name("UTC") and is_zone_name("EST5EDT")
    assert not is_zone_name("europe/berlin")  # spelt as the tz database does
    assert not is_zone_name("posix/Europe/Berlin")
    assert not is_zone_name("localtime")
    assert not is_zone_name(None)


def test_cron_next_needs_an_aware_instant_and_a_known_zone() -> None:
    with pytest.raises(ValueError, match="aware"):
        cron_next("* * * * *", None, datetime(2026, 1, 1))
    with pytest.raises(InvalidOptions, match="unknown time zone"):
        cron_next("* * * * *", "Nowhere/Else", utc("2026-01-01 00:00"))
