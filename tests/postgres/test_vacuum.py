"""The maintenance leader vacuums lane's tables when dead row versions pile up (issue 4, W6).

Each test uses a fresh database, so the counts it reads are its own.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from lane_pg.errors import InvalidOptions
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker.maintenance import vacuum_pass
from tests.helpers import eventually


async def _make_dead_rows(dsn: str, queue: str, n: int) -> None:
    """``n`` jobs added then removed: ``n`` dead row versions in lane.jobs, reported to
    the statistics at once."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "SELECT count(*) FROM lane.add_jobs($1, array_fill('n'::text, ARRAY[$2::int]),"
            " array_fill('1'::jsonb, ARRAY[$2::int]), array_fill('{}'::jsonb, ARRAY[$2::int]))",
            queue,
            n,
        )
        await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", queue)
        await conn.execute("SELECT pg_stat_force_next_flush()")
    finally:
        await conn.close()


async def _manual_vacuums(dsn: str, table: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        count: int = await conn.fetchval(
            "SELECT vacuum_count FROM pg_stat_user_tables"
            " WHERE schemaname = 'lane' AND relname = $1",
            table,
        )
        return count
    finally:
        await conn.close()


async def test_vacuum_removes_dead_rows(fresh: tuple[str, PostgresBackend]) -> None:
    dsn, backend = fresh
    assert backend.space is not None
    await _make_dead_rows(dsn, "vac", 500)

    async def piled_up() -> dict[str, int] | None:
        dead = await backend.dead_tuples()
        return dead if dead.get("jobs", 0) >= 500 else None

    dead = await eventually(piled_up)
    assert {"jobs", "events", "queues"} <= set(dead)
    left = await backend.vacuum("jobs")
    assert left < 500
    assert await _manual_vacuums(dsn, "jobs") == 1


async def test_vacuum_refuses_a_table_outside_the_schema(
    fresh: tuple[str, PostgresBackend],
) -> None:
    _, backend = fresh
    with pytest.raises(InvalidOptions):
        await backend.vacuum('jobs"; DROP TABLE lane.jobs; --')
    assert "jobs" in await backend.dead_tuples()


def _worker(backend: PostgresBackend, vacuum_min_dead: int) -> Worker:
    async def noop(job: JobRow, ctx: JobContext) -> JSON:
        return None

    config = WorkerConfig(
        lanes=(Lane("vac"),),
        poll_interval=0.05,
        stalled_interval=0.05,
        vacuum_min_dead=vacuum_min_dead,
    )
    return Worker(backend, {"n": noop}, config)


async def _dead_jobs_at_least(backend: PostgresBackend, n: int) -> bool:
    return (await backend.dead_tuples()).get("jobs", 0) >= n


async def test_a_pass_vacuums_only_past_the_threshold_since_the_last_vacuum(
    fresh: tuple[str, PostgresBackend],
) -> None:
    dsn, backend = fresh
    floors: dict[str, int] = {}
    await _make_dead_rows(dsn, "other", 100)
    await eventually(lambda: _dead_jobs_at_least(backend, 100))
    assert await vacuum_pass(backend, 200, floors) == []
    assert await _manual_vacuums(dsn, "jobs") == 0
    await _make_dead_rows(dsn, "other", 300)
    await eventually(lambda: _dead_jobs_at_least(backend, 400))
    done = await vacuum_pass(backend, 200, floors)
    assert [entry.split(" ")[0] for entry in done] == ["jobs"]
    assert await _manual_vacuums(dsn, "jobs") == 1
    assert floors["jobs"] < 400
    # Nothing new died: the next pass leaves the table alone.
    assert await vacuum_pass(backend, 200, floors) == []
    assert await _manual_vacuums(dsn, "jobs") == 1


async def test_the_running_leader_vacuums(fresh: tuple[str, PostgresBackend]) -> None:
    dsn, backend = fresh
    worker = _worker(backend, 200)
    running = asyncio.create_task(worker.run())
    try:
        await _make_dead_rows(dsn, "other", 300)
        await eventually(lambda: _manual_vacuums(dsn, "jobs"))
    finally:
        worker.stop()
        await running


async def test_vacuum_min_dead_is_validated() -> None:
    with pytest.raises(InvalidOptions):
        WorkerConfig(vacuum_min_dead=0)
    with pytest.raises(InvalidOptions):
        WorkerConfig(vacuum_min_dead=True)
    assert WorkerConfig(vacuum_min_dead=None).vacuum_min_dead is None
