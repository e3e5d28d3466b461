"""Queue retention in plain SQL: ``lane.set_queue_retention``, ``lane.get_queue_retention``
and ``lane.prune_finished`` the way a psql user calls them (RET-1 bounded by default), the
defaults against the Python constants, the index the prune reads, and a prune that never
waits for rows another transaction holds.
"""

from __future__ import annotations

import asyncio

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import DEFAULT_KEEP_COMPLETED, DEFAULT_KEEP_FAILED, QueueDemand
from tests.postgres.conftest import refused

# The prune's two lookups, as written in lane.prune_finished (parameters for variables).
CUT_OFF_SQL = """
    SELECT j.finished_at, j.key FROM lane.jobs j
     WHERE j.queue = $1 AND j.state = $2 AND j.state IN ('completed', 'failed')
     ORDER BY j.finished_at DESC, j.key DESC
    OFFSET $3 LIMIT 1"""
DOOMED_SQL = """
    SELECT j.key FROM lane.jobs j
     WHERE j.queue = $1 AND j.state = $2 AND j.state IN ('completed', 'failed')
       AND (j.finished_at, j.key) <= ($3, $4)
     ORDER BY j.finished_at, j.key
     LIMIT $5
       FOR UPDATE SKIP LOCKED"""


async def _finished_rows(conn: asyncpg.Connection, queue: str, count: int, state: str) -> None:
    """``count`` finished rows written directly, 50 per finished_at (completion batches)."""
    await conn.execute(
        "INSERT INTO lane.jobs (queue, id, name, state, created_at, available_at, finished_at)"
        " SELECT $1, $2 || g, 'n', $2, now(), now(),"
        "        timestamptz '2026-01-01' + (g / 50) * interval '1 ms'"
        "   FROM generate_series(1, $3) g",
        queue,
        state,
        count,
    )


# ------------------------------------------------------------------ defaults and validation


async def test_sql_defaults_equal_the_python_constants_RET_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    defaults = {
        row["column_name"]: row["column_default"]
        for row in await conn.fetch(
            "SELECT column_name, column_default FROM information_schema.columns"
            " WHERE table_schema = 'lane' AND table_name = 'queues'"
            " AND column_name IN ('keep_completed', 'keep_failed')"
        )
    }
    assert defaults == {
        "keep_completed": str(DEFAULT_KEEP_COMPLETED),
        "keep_failed": str(DEFAULT_KEEP_FAILED),
    }
    missing = await conn.fetchrow("SELECT * FROM lane.get_queue_retention($1)", queue_name)
    assert tuple(missing) == (DEFAULT_KEEP_COMPLETED, DEFAULT_KEEP_FAILED)
    await conn.execute("SELECT lane.add_job($1, 'n')", queue_name)
    created = await conn.fetchrow("SELECT * FROM lane.get_queue_retention($1)", queue_name)
    assert tuple(created) == (DEFAULT_KEEP_COMPLETED, DEFAULT_KEEP_FAILED)


async def test_set_queue_retention_in_sql_null_keeps_all_RET_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await conn.execute("SELECT lane.set_queue_retention($1, NULL, NULL)", queue_name)
    row = await conn.fetchrow(
        "SELECT keep_completed, keep_failed FROM lane.queues WHERE name = $1", queue_name
    )
    assert tuple(row) == (None, None)
    await conn.execute("SELECT lane.set_queue_retention($1, 0, 25)", queue_name)
    assert tuple(await conn.fetchrow("SELECT * FROM lane.get_queue_retention($1)", queue_name)) == (
        0,
        25,
    )


async def test_negative_bounds_and_bad_names_are_refused_in_sql_RET_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    message = await refused(
        conn, "LN003", "SELECT lane.set_queue_retention($1, -1, 10)", queue_name
    )
    assert "must not be negative" in message
    await refused(conn, "LN003", "SELECT lane.set_queue_retention($1, 10, -1)", queue_name)
    await refused(conn, "LN013", "SELECT lane.set_queue_retention('bad name!', 1, 1)")
    assert await conn.fetchval("SELECT count(*) FROM lane.queues WHERE name = $1", queue_name) == 0
    await refused(conn, "LN003", "SELECT lane.prune_finished(ARRAY[$1], 0)", queue_name)
    await refused(conn, "LN003", "SELECT lane.prune_finished(NULL, NULL)")
    # The table refuses a negative bound written directly, too.
    await conn.execute("SELECT lane.set_queue_retention($1, 1, 1)", queue_name)
    await refused(
        conn, "23514", "UPDATE lane.queues SET keep_failed = -1 WHERE name = $1", queue_name
    )


# ------------------------------------------------------------------ plans


async def test_prune_reads_the_finished_index(
    fresh_conn: asyncpg.Connection, queue_name: str
) -> None:
    """The cut-off and the rows before it are ranges of jobs_finished_idx in the generic
    plan plpgsql caches: the literal ``state IN (...)`` proves the partial index when the
    state is a parameter. (Custom plans are left to the planner: on a table this small
    another index can legitimately cost less, as a fresh CI database showed.)"""
    plan_mode = "force_generic_plan"
    await _finished_rows(fresh_conn, queue_name, 3000, "completed")
    await fresh_conn.execute(
        "SELECT lane.add_jobs($1, array_fill('n'::text, ARRAY[500]),"
        " array_fill('1'::jsonb, ARRAY[500]), array_fill('{}'::jsonb, ARRAY[500]))",
        queue_name,
    )
    await fresh_conn.execute("ANALYZE lane.jobs")  # statistics roll back with the test
    await fresh_conn.execute(f"SET LOCAL plan_cache_mode = {plan_mode}")
    await fresh_conn.execute(f"PREPARE cut_off (text, text, integer) AS {CUT_OFF_SQL}")
    await fresh_conn.execute(
        f"PREPARE doomed (text, text, timestamptz, bigint, integer) AS {DOOMED_SQL}"
    )
    quoted = queue_name.replace("'", "''")
    plan = await fresh_conn.fetchval(
        f"EXPLAIN (FORMAT JSON) EXECUTE cut_off('{quoted}', 'completed', 1000)"
    )
    assert "jobs_finished_idx" in plan
    plan = await fresh_conn.fetchval(
        f"EXPLAIN (FORMAT JSON) EXECUTE doomed('{quoted}', 'completed',"
        " '2026-01-01T00:00:00.040Z', 2000, 500)"
    )
    assert "jobs_finished_idx" in plan
    await fresh_conn.execute("DEALLOCATE cut_off")
    await fresh_conn.execute("DEALLOCATE doomed")


async def test_prune_in_sql_deletes_oldest_first_in_batches_RET_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await _finished_rows(conn, queue_name, 120, "completed")
    await _finished_rows(conn, queue_name, 30, "failed")
    await conn.execute("SELECT lane.set_queue_retention($1, 100, 10)", queue_name)
    newest = await conn.fetch(
        "SELECT key FROM lane.jobs WHERE queue = $1 AND state = 'completed'"
        " ORDER BY finished_at DESC, key DESC LIMIT 100",
        queue_name,
    )
    assert await conn.fetchval("SELECT lane.prune_finished(ARRAY[$1], 15)", queue_name) == 30
    assert await conn.fetchval("SELECT lane.prune_finished(ARRAY[$1], 15)", queue_name) == 10
    assert await conn.fetchval("SELECT lane.prune_finished(ARRAY[$1], 15)", queue_name) == 0
    left = await conn.fetch(
        "SELECT key FROM lane.jobs WHERE queue = $1 AND state = 'completed'"
        " ORDER BY finished_at DESC, key DESC",
        queue_name,
    )
    assert left == newest
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state = 'failed'", queue_name
        )
        == 10
    )


# ------------------------------------------------------------------ concurrency


async def _completed_with_logs(backend: PostgresBackend, queue: str, count: int) -> list[str]:
    jobs = [await backend.add_job(queue, f"j{i}") for i in range(count)]
    claimed = await backend.claim_jobs("w", [QueueDemand(queue, count)], 600)
    for job in claimed:
        await backend.add_job_log(queue, job.id, f"log {job.id}")
        assert job.lock_token is not None
        await backend.complete_job(queue, job.id, job.lock_token)
    return [job.id for job in jobs]


async def test_prune_skips_a_job_row_another_transaction_holds_RET_1(
    pg_dsn: str, committed: PostgresBackend, queue_name: str
) -> None:
    ids = await _completed_with_logs(committed, queue_name, 4)
    await committed.set_queue_retention(queue_name, keep_completed=0, keep_failed=None)
    holder = await asyncpg.connect(pg_dsn)
    try:
        async with holder.transaction():
            await holder.execute(
                "SELECT 1 FROM lane.jobs WHERE queue = $1 AND id = $2 FOR UPDATE",
                queue_name,
                ids[0],
            )
            # The prune must not wait for the held row: it deletes the others.
            pruned = await asyncio.wait_for(committed.prune_finished([queue_name]), 5)
            assert pruned == 3
        assert await committed.prune_finished([queue_name]) == 1
    finally:
        await holder.close()
    assert [await committed.get_job(queue_name, job_id) for job_id in ids] == [None] * 4


async def test_prune_leaves_jobs_whose_logs_another_transaction_deletes_RET_1(
    pg_dsn: str, committed: PostgresBackend, queue_name: str
) -> None:
    """Finish-time retention deletes log rows before their job: a prune that waited for
    those rows while holding the job row would deadlock with it. It skips the job."""
    ids = await _completed_with_logs(committed, queue_name, 3)
    await committed.set_queue_retention(queue_name, keep_completed=0, keep_failed=None)
    holder = await asyncpg.connect(pg_dsn)
    try:
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute(
            "DELETE FROM lane.job_logs WHERE job_key ="
            " (SELECT key FROM lane.jobs WHERE queue = $1 AND id = $2)",
            queue_name,
            ids[1],
        )
        pruned = await asyncio.wait_for(committed.prune_finished([queue_name]), 5)
        assert pruned == 2
        assert await committed.get_job_state(queue_name, ids[1]) == "completed"
        await transaction.rollback()
        assert await committed.prune_finished([queue_name]) == 1
    finally:
        await holder.close()
    assert [await committed.get_job(queue_name, job_id) for job_id in ids] == [None] * 3
    orphans = await committed.pool.fetchval(
        "SELECT count(*) FROM lane.job_logs l WHERE NOT EXISTS"
        " (SELECT 1 FROM lane.jobs j WHERE j.key = l.job_key)"
        " AND l.message LIKE 'log %'"
    )
    assert orphans == 0
