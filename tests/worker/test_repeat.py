"""Repeat series served by real worker processes (REP-2, REP-3, WORK-12): an interval
series with a limit runs exactly that many times; a cron series firing every second runs
once per tick, never twice, while two workers serve the queue."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import pairwise

import asyncpg

from lane_pg.errors import JobLocked
from lane_pg.postgres.backend import PostgresBackend
from tests.worker.conftest import EFFECTS_TABLE, Workers, queue_args, until


async def _runs(db: asyncpg.Connection, queue: str) -> int:
    return int(await db.fetchval(f"SELECT count(*) FROM {EFFECTS_TABLE} WHERE queue = $1", queue))


async def test_interval_series_with_limit_3_runs_exactly_3_times_REP_3(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    await workers.start(*queue_args(queue_name))
    await db.execute(
        "SELECT lane.add_job($1, 'record', 'null', $2::jsonb)",
        queue_name,
        json.dumps({"repeat": {"every_ms": 1000, "limit": 3}}),
    )

    async def series_over() -> bool:
        return await backend.count_repeats(queue_name) == 0 and await _runs(db, queue_name) >= 3

    await until(series_over, timeout=20, interval=0.05)
    states = await db.fetch("SELECT state FROM lane.jobs WHERE queue = $1", queue_name)
    assert [row["state"] for row in states] == ["completed"] * 3
    assert await _runs(db, queue_name) == 3
    ticks = [
        row["available_at"]
        for row in await db.fetch(
            "SELECT available_at FROM lane.jobs WHERE queue = $1 ORDER BY key", queue_name
        )
    ]
    # Anchored to the schedule: every tick is 1 s after the one before.
    assert [b - a for a, b in pairwise(ticks)] == [timedelta(milliseconds=1000)] * 2


async def test_every_second_cron_runs_once_per_tick_with_two_workers_REP_2(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    await workers.start_many(2, *queue_args(queue_name))
    await db.execute(
        "SELECT lane.add_job($1, 'record', 'null', $2::jsonb)",
        queue_name,
        json.dumps({"repeat": {"pattern": "* * * * * *"}}),
    )

    async def five_runs() -> bool:
        return await _runs(db, queue_name) >= 5

    await until(five_runs, timeout=20, interval=0.05)

    async def series_removed() -> bool:
        # The owner may be running right now (a valid lease refuses its removal, REP-10).
        try:
            await backend.remove_repeat(queue_name, "record:cron:* * * * * *")
        except JobLocked:
            return False
        return True

    await until(series_removed, timeout=20, interval=0.05)
    rows = await db.fetch(
        "SELECT available_at, processed_at, state FROM lane.jobs WHERE queue = $1"
        " AND state = 'completed' ORDER BY available_at",
        queue_name,
    )
    ticks = [row["available_at"] for row in rows]
    assert len(ticks) >= 5
    assert len(set(ticks)) == len(ticks)  # no tick twice
    assert all(tick.microsecond == 0 for tick in ticks)  # whole seconds: the pattern's
    # One run per second, none skipped, none before its tick.
    assert [b - a for a, b in pairwise(ticks)] == [timedelta(seconds=1)] * (len(ticks) - 1)
    assert all(row["processed_at"] >= row["available_at"] for row in rows)
    duplicates = await db.fetch(
        f"SELECT job_id FROM {EFFECTS_TABLE} WHERE queue = $1 GROUP BY job_id HAVING count(*) > 1",
        queue_name,
    )
    assert duplicates == []
