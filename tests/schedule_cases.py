"""Schedule cases worked out by hand, shared by tests/test_schedule.py (lane_pg.types.schedule)
and tests/postgres/test_schedule_sql.py (the stored functions): both must give these.

Zone transitions used (tz database 2025b, the same on both sides here):
Europe/Berlin 2026-03-29 01:00Z (02:00 CET -> 03:00 CEST) and 2026-10-25 01:00Z
(03:00 CEST -> 02:00 CET, 02:00-02:59 repeated); America/New_York 2026-03-08 07:00Z
(02:00 EST -> 03:00 EDT) and 2026-11-01 06:00Z (02:00 EDT -> 01:00 EST); Australia/Lord_Howe
(+10:30 / +11) 2026-04-04 15:00Z (02:00 -> 01:30) and 2026-10-03 15:30Z (02:00 -> 02:30).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any


def utc(text: str) -> datetime:
    """An instant written as ``YYYY-MM-DD HH:MM[:SS[.ffffff]]`` in UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (pattern, tz, after, the expected next instant in UTC, what it shows)
CRON_CASES: list[tuple[str, str | None, datetime, datetime | None, str]] = [
    # REP-5: the seed's seven fields, and the same schedule in six and five fields.
    ("0 0 2 * * * *", None, utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "seed 7-field"),
    ("0 0 2 * * *", None, utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "6-field"),
    ("0 2 * * *", None, utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "5-field"),
    ("0 0 2 ? * * *", None, utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "? for dom"),
    ("0 0 2 * * ?", None, utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "? for dow"),
    ("\t0  0 2 * * * * ", None, utc("2026-03-03 01:00"), utc("2026-03-03 02:00"), "blanks"),
    ("0 0 2 * * * *", None, utc("2026-03-04 02:00"), utc("2026-03-05 02:00"), "strictly after"),
    (
        "0 0 2 * * * *",
        None,
        utc("2026-03-04 01:59:59.999999"),
        utc("2026-03-04 02:00"),
        "a microsecond before",
    ),
    ("* * * * * *", None, utc("2026-03-04 01:59:59.5"), utc("2026-03-04 02:00"), "each second"),
    ("0 0 0 29 2 *", None, utc("2026-03-03 00:00"), utc("2028-02-29 00:00"), "Feb 29"),
    ("0 0 0 29 2 *", None, utc("2096-03-01 00:00"), utc("2104-02-29 00:00"), "2100 not leap"),
    ("0 0 0 31 * *", None, utc("2026-04-01 00:00"), utc("2026-05-31 00:00"), "31st skips Apr"),
    # The day rule: both day fields restricted -> either; one at * -> the other alone.
    ("0 0 1 * MON", None, utc("2026-03-03 10:00"), utc("2026-03-09 00:00"), "OR: a Monday"),
    ("0 0 1 * MON", None, utc("2026-03-30 00:00"), utc("2026-04-01 00:00"), "OR: the 1st"),
    ("0 0 1-31 * 1", None, utc("2026-03-03 10:00"), utc("2026-03-04 00:00"), "OR: all days"),
    ("0 0 */2 * 1", None, utc("2026-03-03 10:00"), utc("2026-03-05 00:00"), "*/2 restricts"),
    ("0 0 1 * *", None, utc("2026-03-03 10:00"), utc("2026-04-01 00:00"), "dom alone"),
    ("0 0 * * 7", None, utc("2026-03-03 10:00"), utc("2026-03-08 00:00"), "7 is Sunday"),
    ("0 0 * * sun", None, utc("2026-03-03 10:00"), utc("2026-03-08 00:00"), "names any case"),
    ("0 0 * * 5-7", None, utc("2026-03-07 10:00"), utc("2026-03-08 00:00"), "range to 7"),
    ("0 0 * * 1/2", None, utc("2026-03-06 10:00"), utc("2026-03-09 00:00"), "n/step to Sat"),
    ("0 0 1 jan *", None, utc("2026-03-03 10:00"), utc("2027-01-01 00:00"), "month name"),
    ("0 0 1 Feb-Mar/1 *", None, utc("2026-03-03 10:00"), utc("2027-02-01 00:00"), "name range"),
    # Steps, ranges, lists.
    ("*/15 * * * *", None, utc("2026-03-03 10:07"), utc("2026-03-03 10:15"), "*/15"),
    ("5/20 * * * *", None, utc("2026-03-03 10:07"), utc("2026-03-03 10:25"), "a/n"),
    ("10-30/10 * * * *", None, utc("2026-03-03 10:31"), utc("2026-03-03 11:10"), "a-b/n"),
    ("0 8,12-13 * * *", None, utc("2026-03-03 12:00"), utc("2026-03-03 13:00"), "list"),
    ("30 59 23 31 12 *", None, utc("2026-06-01 00:00"), utc("2026-12-31 23:59:30"), "year end"),
    # Time zones: wall-clock times of the zone.
    ("0 9 * * *", "Asia/Kolkata", utc("2026-03-03 00:00"), utc("2026-03-03 03:30"), "+05:30"),
    ("0 12 * * *", "CET", utc("2026-07-01 00:00"), utc("2026-07-01 10:00"), "CET has DST"),
    ("0 2 * * *", "UTC", utc("2026-03-03 10:00"), utc("2026-03-04 02:00"), "UTC named"),
    # Europe/Berlin spring forward 2026-03-29: 02:00-02:59 do not exist.
    ("30 2 * * *", "Europe/Berlin", utc("2026-03-28 12:00"), utc("2026-03-30 00:30"), "gap"),
    ("0 * * * *", "Europe/Berlin", utc("2026-03-29 00:30"), utc("2026-03-29 01:00"), "no 02:00"),
    ("* * * * *", "Europe/Berlin", utc("2026-03-29 00:59"), utc("2026-03-29 01:00"), "gap min"),
    ("* * * * * *", "Europe/Berlin", utc("2026-03-29 00:59:59"), utc("2026-03-29 01:00"), "s"),
    # Europe/Berlin fall back 2026-10-25: 02:00-02:59 happen twice; only the first counts.
    ("30 2 * * *", "Europe/Berlin", utc("2026-10-24 12:00"), utc("2026-10-25 00:30"), "first"),
    ("30 2 * * *", "Europe/Berlin", utc("2026-10-25 00:30"), utc("2026-10-26 01:30"), "once"),
    ("* * * * *", "Europe/Berlin", utc("2026-10-25 00:58"), utc("2026-10-25 00:59"), "pass 1"),
    ("* * * * *", "Europe/Berlin", utc("2026-10-25 00:59"), utc("2026-10-25 02:00"), "no pass 2"),
    ("* * * * *", "Europe/Berlin", utc("2026-10-25 01:20"), utc("2026-10-25 02:00"), "in pass 2"),
    ("0 * * * *", "Europe/Berlin", utc("2026-10-25 00:00"), utc("2026-10-25 02:00"), "hourly"),
    # America/New_York.
    ("30 2 * * *", "America/New_York", utc("2026-03-07 12:00"), utc("2026-03-09 06:30"), "gap"),
    ("30 1 * * *", "America/New_York", utc("2026-10-31 12:00"), utc("2026-11-01 05:30"), "EDT"),
    ("30 1 * * *", "America/New_York", utc("2026-11-01 05:30"), utc("2026-11-02 06:30"), "once"),
    # Australia/Lord_Howe: half-hour shifts.
    ("15 2 * * *", "Australia/Lord_Howe", utc("2026-10-03 00:00"), utc("2026-10-04 15:15"), "gap"),
    ("45 1 * * *", "Australia/Lord_Howe", utc("2026-04-04 00:00"), utc("2026-04-04 14:45"), "1st"),
    ("45 1 * * *", "Australia/Lord_Howe", utc("2026-04-04 14:45"), utc("2026-04-05 15:15"), "1x"),
]

T = utc("2026-05-01 12:00")
MINUTE = timedelta(minutes=1)

# (repeat document, prev, now, the expected next due time, what it shows)
REPEAT_NEXT_CASES: list[tuple[dict[str, Any], datetime | None, datetime, datetime | None, str]] = [
    ({"every_ms": 60_000}, None, T, T, "first run at once"),
    ({"every_ms": 60_000}, T, T + timedelta(seconds=5), T + MINUTE, "anchored to prev"),
    ({"every_ms": 60_000}, T, T + MINUTE, T + 2 * MINUTE, "a slot at now has passed"),
    ({"every_ms": 60_000}, T, T + 2.5 * MINUTE, T + 3 * MINUTE, "passed slots skipped"),
    ({"every_ms": 60_000}, T, T - timedelta(seconds=10), T + MINUTE, "now before prev"),
    ({"every_ms": 60_000}, T, T, T + MINUTE, "catch-up: now=prev gives the next slot"),
    ({"every_ms": 1}, T + timedelta(microseconds=7), T, T + timedelta(microseconds=1007), "us"),
    ({"every_ms": 60_000, "end_at": 1777636890000}, None, T, T, "end_at T+90 s: run 1"),
    ({"every_ms": 60_000, "end_at": 1777636890000}, T, T, T + MINUTE, "run 2"),
    ({"every_ms": 60_000, "end_at": 1777636890000}, T + MINUTE, T + MINUTE, None, "no run 3"),
    ({"every_ms": 60_000, "end_at": 1777636860000}, T, T, T + MINUTE, "end_at itself runs"),
    ({"every_ms": 60_000, "end_at": 1777636799999}, None, T, None, "ended before the first"),
    ({"every_ms": 9_223_372_036_854}, utc("9800-01-01 00:00"), T, None, "past year 9999"),
    ({"pattern": "0 * * * *"}, None, T + 5 * MINUTE, T + 60 * MINUTE, "first match after now"),
    ({"pattern": "0 * * * *"}, T, T + 3.5 * 60 * MINUTE, T + 4 * 60 * MINUTE, "skip missed"),
    ({"pattern": "0 * * * *"}, T, T, T + 60 * MINUTE, "catch-up: now=prev, missed tick once"),
    ({"pattern": "0 * * * *"}, T + 60 * MINUTE, T, T + 120 * MINUTE, "prev ahead of now"),
    ({"pattern": "0 0 2 * * * *", "tz": "Europe/Berlin"}, None, T, utc("2026-05-02 00:00"), "tz"),
    ({"pattern": "0 * * * *", "end_at": 1777640400000}, T, T, T + 60 * MINUTE, "end_at = next"),
    ({"pattern": "0 * * * *", "end_at": 1777640399999}, T, T, None, "end_at before next"),
]

VALID_DOCUMENTS: list[dict[str, Any]] = [
    {"every_ms": 1},
    {"every_ms": 9_223_372_036_854},
    {"pattern": "0 0 2 * * * *"},
    {"pattern": "0 0 2 * * * *", "tz": "Europe/Berlin", "limit": 3, "key": "crm-heartbeat"},
    {"pattern": "*/5 * * * *", "tz": "Australia/Lord_Howe", "end_at": 0},
    {"pattern": "0 0 1 1 *", "tz": "EST5EDT"},  # a zone the fast name check cannot decide
    {"pattern": "0 0 1 1 *", "tz": "Etc/GMT+5"},
    {"every_ms": 60_000, "limit": 2_147_483_647, "end_at": 253_402_300_799_999, "key": "k" * 255},
    {"every_ms": 60_000, "tz": None, "pattern": None, "limit": None, "bogus": None},
    {"pattern": "0 0 29 2 *"},
    {"pattern": "0 0 30,31 2,4 *"},  # Apr 30 exists
    {"pattern": "0 0 31 2 MON"},  # the weekday alone can match
]

# (document, a fragment of the message, what it shows)
INVALID_DOCUMENTS: list[tuple[Any, str, str]] = [
    ([], "must be a JSON object", "not an object"),
    ("0 * * * *", "must be a JSON object", "a bare pattern"),
    ({}, "need every_ms", "neither"),
    ({"every_ms": None, "pattern": None}, "need every_ms", "both null"),
    ({"every_ms": 1000, "pattern": "* * * * *"}, "not both", "both"),
    ({"every": 1000}, "unknown repeat option", "unknown key"),
    ({"every_ms": 0}, "every_ms must be an integer", "zero"),
    ({"every_ms": -1}, "every_ms must be an integer", "negative"),
    ({"every_ms": 1.5}, "every_ms must be an integer", "fraction"),
    ({"every_ms": "1000"}, "every_ms must be an integer", "string"),
    ({"every_ms": True}, "every_ms must be an integer", "boolean"),
    ({"every_ms": 9_223_372_036_855}, "every_ms must be an integer", "too long"),
    ({"every_ms": 1000, "tz": "UTC"}, "tz applies only to a pattern", "tz with every_ms"),
    ({"pattern": 5}, "pattern must be a cron expression string", "pattern not a string"),
    ({"pattern": ""}, "use 5 fields", "empty"),
    ({"pattern": "* * * *"}, "use 5 fields", "4 fields"),
    ({"pattern": "* * * * * * * *"}, "use 5 fields", "8 fields"),
    ({"pattern": "0 0 2 * * * 2026"}, "year field (7th) must be *", "a year"),
    ({"pattern": "60 * * * *"}, "minute field: 60 is out of range 0-59", "minute 60"),
    ({"pattern": "0 24 * * *"}, "hour field: 24 is out of range 0-23", "hour 24"),
    ({"pattern": "0 0 0 * *"}, "day-of-month field: 0 is out of range 1-31", "day 0"),
    ({"pattern": "0 0 1 13 *"}, "month field: 13 is out of range 1-12", "month 13"),
    ({"pattern": "0 0 * * 8"}, "day-of-week field: 8 is out of range 0-7", "weekday 8"),
    ({"pattern": "0 0 * * 99999999999999999999"}, "out of range", "a huge number"),
    ({"pattern": "*/0 * * * *"}, "step 0 must be between 1 and 60", "step 0"),
    ({"pattern": "*/61 * * * *"}, "step 61 must be between 1 and 60", "step past the field"),
    ({"pattern": "30-10 * * * *"}, "runs backwards", "backwards range"),
    ({"pattern": "0 0 * * FRI-MON"}, "runs backwards", "backwards weekday range"),
    ({"pattern": "0 0 1 FOO *"}, "unknown name 'FOO'", "bad month name"),
    ({"pattern": "0 0 * JAN MONDAY"}, "unknown name 'MONDAY'", "long weekday name"),
    ({"pattern": "0 0 * * JAN"}, "unknown name 'JAN'", "month name as weekday"),
    ({"pattern": "0 JAN * * *"}, "numbers only", "name in the hour field"),
    ({"pattern": "0 0 L * *"}, "numbers only", "L"),
    ({"pattern": "0 0 15W * *"}, "is not *, a value", "W"),
    ({"pattern": "0 0 * * MON#2"}, "is not *, a value", "#"),
    ({"pattern": "H * * * *"}, "numbers only", "H"),
    ({"pattern": "@daily"}, "use 5 fields", "macro"),
    ({"pattern": "0 ? * * *"}, "? may only stand alone", "? for the hour"),
    ({"pattern": "0 0 ?,1 * *"}, "? may only stand alone", "? in a list"),
    ({"pattern": "0,,5 * * * *"}, "is not *, a value", "empty list item"),
    ({"pattern": "0 0 30 2 *"}, "never matches", "Feb 30"),
    ({"pattern": "0 0 31 4,6,9,11 *"}, "never matches", "31 in a short month"),
    ({"pattern": "0\n0 * * *"}, "use 5 fields", "a newline is no separator"),
    ({"pattern": "0 0 2 * *", "tz": "Mars/Olympus"}, "unknown time zone", "unknown zone"),
    ({"pattern": "0 0 2 * *", "tz": "europe/berlin"}, "unknown time zone", "wrong case"),
    ({"pattern": "0 0 2 * *", "tz": "UTC+3"}, "unknown time zone", "a POSIX rule"),
    ({"pattern": "0 0 2 * *", "tz": "PST"}, "unknown time zone", "an abbreviation"),
    ({"pattern": "0 0 2 * *", "tz": "posix/Europe/Berlin"}, "unknown time zone", "posix/"),
    ({"pattern": "0 0 2 * *", "tz": "localtime"}, "unknown time zone", "the host's zone"),
    ({"pattern": "0 0 2 * *", "tz": ""}, "unknown time zone", "empty zone"),
    ({"pattern": "0 0 2 * *", "tz": 1}, "unknown time zone", "zone not a string"),
    ({"every_ms": 1000, "limit": 0}, "limit must be an integer between 1", "limit 0"),
    ({"every_ms": 1000, "limit": 2_147_483_648}, "limit must be an integer", "limit too big"),
    ({"every_ms": 1000, "limit": "3"}, "limit must be an integer", "limit string"),
    ({"every_ms": 1000, "end_at": -1}, "end_at must be integer milliseconds", "before 1970"),
    ({"every_ms": 1000, "end_at": 253_402_300_800_000}, "end_at must be integer", "past 9999"),
    ({"every_ms": 1000, "end_at": "2026-01-01T00:00:00Z"}, "end_at must be integer", "ISO"),
    ({"every_ms": 1000, "key": ""}, "key must be a string of 1-255", "empty key"),
    ({"every_ms": 1000, "key": "k" * 256}, "key must be a string of 1-255", "long key"),
    ({"every_ms": 1000, "key": 7}, "key must be a string of 1-255", "key not a string"),
]
