"""The issue's end-to-end check of claim limits: `python -m lane_pg limits QUEUE --rate
5/1s --max-active 2`, then two worker processes draining the queue. No one-second window
holds more than 5 claims (from the stored claim times), and an observer polling the
committed rows never sees more than 2 jobs active at once (RATE-1, RATE-7, RATE-9)."""

from __future__ import annotations

import bisect
from datetime import timedelta

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec
from tests.test_cli_queue_commands import cli
from tests.worker.conftest import Workers, queue_args, until

JOBS = 16


async def test_rate_5_per_second_and_max_active_2_across_two_workers_RATE_1_RATE_7(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str,
    pg_dsn: str,
) -> None:  # fmt: skip
    result = await cli("limits", queue_name, "--rate", "5/1s", "--max-active", "2", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    await backend.add_jobs(queue_name, [JobSpec("sleep", {"seconds": 0.15}) for _ in range(JOBS)])
    await workers.start_many(2, *queue_args(queue_name), "--concurrency", "4")
    most_active = 0

    async def drained() -> bool:
        nonlocal most_active
        active = await db.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state = 'active'", queue_name
        )
        most_active = max(most_active, active)
        done = await db.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state = 'completed'",
            queue_name,
        )
        return bool(done == JOBS)

    await until(drained, timeout=60, interval=0.005)
    assert 1 <= most_active <= 2
    claims = sorted(
        row["processed_at"]
        for row in await db.fetch("SELECT processed_at FROM lane.jobs WHERE queue = $1", queue_name)
    )
    second = timedelta(seconds=1)
    busiest = max(bisect.bisect_left(claims, t + second) - i for i, t in enumerate(claims))
    assert busiest <= 5, claims
    assert (
        await db.fetchval(
            "SELECT max(attempts_started) FROM lane.jobs WHERE queue = $1", queue_name
        )
        == 1
    )  # a throttled or maxed claim spends no attempt
