"""The schedule's stored functions called as plain SQL (REP-1, REP-4, REP-5, A11):
``lane._check_repeat``, ``lane._cron_next`` and ``lane._repeat_next`` on the cases of
tests/schedule_cases.py, which tests/test_schedule.py runs against lane_pg.types.schedule."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from tests.postgres.conftest import refused
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
async def test_cron_next_REP_5(
    conn: asyncpg.Connection,
    pattern: str,
    tz: str | None,
    after: datetime,
    expected: datetime | None,
    shows: str,
) -> None:
    """REP-5: 5-, 6- and 7-field patterns, the day rule, and wall-clock times of a zone
    across its daylight-saving switches (skipped times do not run, repeated ones once)."""
    assert await conn.fetchval("SELECT lane._cron_next($1, $2, $3)", pattern, tz, after) == (
        expected
    )


async def test_cron_next_leaves_the_session_time_zone_alone(conn: asyncpg.Connection) -> None:
    """The zone is set for the call only (the function's SET clause restores it)."""
    await conn.execute("SET LOCAL TimeZone = 'America/New_York'")
    got = await conn.fetchval(
        "SELECT lane._cron_next('0 12 * * *', 'Asia/Kolkata', $1)", utc("2026-03-03 00:00")
    )
    assert got == utc("2026-03-03 06:30")
    assert await conn.fetchval("SHOW TimeZone") == "America/New_York"
    # The interval arithmetic of _repeat_next is absolute time whatever the session zone.
    every = await conn.fetchval(
        "SELECT lane._repeat_next('{\"every_ms\": 86400000}', $1, $1)", utc("2026-03-07 12:00")
    )
    assert every == utc("2026-03-08 12:00")


async def test_sparse_and_never_matching_patterns_REP_5(conn: asyncpg.Connection) -> None:
    """Feb 29 is found 8 years on (2096 -> 2104); the search stops after the end of local
    year year(after) + 8, and infinite instants have no next one."""
    assert await conn.fetchval(
        "SELECT lane._cron_next('0 0 0 29 2 *', NULL, $1)", utc("2096-02-29 00:00:00.5")
    ) == utc("2104-02-29 00:00")
    assert await conn.fetchval("SELECT lane._cron_next('0 0 0 29 2 *', NULL, 'infinity')") is None
    assert (
        await conn.fetchval(
            "SELECT lane._cron_next('* * * * *', NULL, $1)", utc("9999-12-31 23:59:30")
        )
        is None
    )


@pytest.mark.parametrize("document", VALID_DOCUMENTS, ids=repr)
async def test_valid_repeat_documents_REP_1(
    conn: asyncpg.Connection, document: dict[str, Any]
) -> None:
    await conn.execute("SELECT lane._check_repeat($1::jsonb)", json.dumps(document))


@pytest.mark.parametrize(
    ("document", "fragment", "shows"),
    INVALID_DOCUMENTS,
    ids=[case[2] for case in INVALID_DOCUMENTS],
)
async def test_invalid_repeat_documents_are_refused_clearly_REP_1_REP_5(
    conn: asyncpg.Connection, document: Any, fragment: str, shows: str
) -> None:
    """REP-1, REP-5: LN003 with a message naming the problem."""
    message = await refused(
        conn, "LN003", "SELECT lane._check_repeat($1::jsonb)", json.dumps(document)
    )
    assert fragment in message


async def test_check_repeat_refuses_sql_null(conn: asyncpg.Connection) -> None:
    message = await refused(conn, "LN003", "SELECT lane._check_repeat(NULL)")
    assert "must be a JSON object" in message


@pytest.mark.parametrize(
    ("document", "prev", "now", "expected", "shows"),
    REPEAT_NEXT_CASES,
    ids=[case[4] for case in REPEAT_NEXT_CASES],
)
async def test_repeat_next_A11(
    conn: asyncpg.Connection,
    document: dict[str, Any],
    prev: datetime | None,
    now: datetime,
    expected: datetime | None,
    shows: str,
) -> None:
    """A11: every_ms is anchored to the previous scheduled time and skips passed slots; a
    pattern runs at its first match after greatest(prev, now); end_at (REP-4) ends the
    series; passing now = prev is the catch-up primitive."""
    got = await conn.fetchval(
        "SELECT lane._repeat_next($1::jsonb, $2, $3)", json.dumps(document), prev, now
    )
    assert got == expected


async def test_repeat_next_refuses_a_document_without_a_schedule(
    conn: asyncpg.Connection,
) -> None:
    message = await refused(
        conn, "LN003", "SELECT lane._repeat_next('{\"limit\": 3}', NULL, now())"
    )
    assert "not a repeat document" in message


@pytest.mark.parametrize(
    ("zone", "known"),
    [
        ("Europe/Berlin", True),
        ("UTC", True),
        ("CET", True),
        ("Etc/GMT-14", True),
        ("EST5EDT", True),  # upper case with a digit: read from pg_timezone_names
        ("GMT+0", True),
        ("UTC+3", False),  # a POSIX rule set_config would take
        ("<+03>-3", False),
        ("europe/berlin", False),  # set_config finds it, spelt otherwise
        ("PST", False),  # an abbreviation
        ("right/UTC", False),
        ("posixrules", False),
        ("Europe//Berlin", False),
    ],
)
async def test_zone_names_are_those_of_pg_timezone_names(
    conn: asyncpg.Connection, zone: str, known: bool
) -> None:
    assert await conn.fetchval("SELECT lane._is_zone_name($1)", zone) is known
    listed = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = $1)", zone
    )
    assert listed is known or zone in ("posixrules",)
