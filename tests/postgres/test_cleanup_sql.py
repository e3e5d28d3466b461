"""Bulk removal in plain SQL (sql/functions/42_cleanup.sql): a drain racing real claimers
on other connections, rows another transaction holds, the orphans ``lane.remove_orphaned``
deletes and keeps, refusals, and the indexes the chunk lookups read in the generic plans
plpgsql caches (MGMT-17..22)."""

from __future__ import annotations

import asyncio

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec, QueueDemand
from tests.postgres.conftest import refused

# The locking candidate reads of lane._removable_keys, parameters for variables.
WAITING_SQL = """
    SELECT j.key FROM lane.jobs j
     WHERE j.queue = $1 AND j.state = 'waiting'
       AND ($2 IS NULL OR j.created_at < $2)
       AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
     ORDER BY j.order_key, j.key
     LIMIT $3
       FOR UPDATE SKIP LOCKED"""
DELAYED_SQL = """
    SELECT j.key FROM lane.jobs j
     WHERE j.queue = $1 AND j.state = 'delayed'
       AND ($2 IS NULL OR j.created_at < $2)
       AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
     ORDER BY j.available_at, j.key
     LIMIT $3
       FOR UPDATE SKIP LOCKED"""
FINISHED_SQL = """
    SELECT j.key FROM lane.jobs j
     WHERE j.queue = $1 AND j.state = $2
       AND j.state IN ('completed', 'failed')
       AND j.finished_at < $3
     ORDER BY j.finished_at, j.key
     LIMIT $4
       FOR UPDATE SKIP LOCKED"""
ACTIVE_SQL = """
    SELECT j.key FROM lane.jobs j
     WHERE j.state = 'active' AND j.lease_expires_at < $4 AND j.queue = $1
       AND j.processed_at < $2
       AND NOT lane._is_repeat_owner(j.queue, j.repeat_key, j.key)
     ORDER BY j.lease_expires_at, j.key
     LIMIT $3
       FOR UPDATE SKIP LOCKED"""


async def test_a_drain_racing_claimers_never_claims_and_removes_one_job_MGMT_17(
    pg_dsn: str, committed: PostgresBackend, queue_name: str
) -> None:
    total = 3000
    await committed.add_jobs(queue_name, [JobSpec("n", i) for i in range(total)])
    claimers = [await PostgresBackend.connect(pg_dsn, min_size=1, max_size=1) for _ in range(3)]
    drainer = await PostgresBackend.connect(pg_dsn, min_size=1, max_size=1)
    start = asyncio.Event()

    async def claim_until_empty(backend: PostgresBackend) -> list[str]:
        await start.wait()
        taken: list[str] = []
        while batch := await backend.claim_jobs("w", [QueueDemand(queue_name, 25)], 600):
            taken += [job.id for job in batch]
        return taken

    async def drain() -> int:
        await start.wait()
        await asyncio.sleep(0)  # let the claimers send their first claims
        return await drainer.drain_jobs(queue_name)

    try:
        tasks = [asyncio.create_task(claim_until_empty(b)) for b in claimers]
        drained_task = asyncio.create_task(drain())
        start.set()
        claimed_lists = await asyncio.gather(*tasks)
        drained = await drained_task
    finally:
        for backend in (*claimers, drainer):
            await backend.close()

    claimed = {job_id for ids in claimed_lists for job_id in ids}
    assert sum(len(ids) for ids in claimed_lists) == len(claimed)  # each claimed once
    removed = {
        event.job_id
        for event in await committed.read_events(queue_name, limit=100_000)
        if event.event == "removed"
    }
    assert len(removed) == drained
    assert not claimed & removed
    assert len(claimed) + drained == total
    counts = await committed.get_job_counts(queue_name)
    assert counts["active"] == len(claimed)
    assert counts["waiting"] == 0


async def test_drain_and_clean_skip_rows_another_transaction_holds_MGMT_17_MGMT_18(
    pg_dsn: str, committed: PostgresBackend, queue_name: str
) -> None:
    jobs = await committed.add_jobs(queue_name, [JobSpec("n", i) for i in range(4)])
    holder = await asyncpg.connect(pg_dsn)
    try:
        async with holder.transaction():
            await holder.execute(
                "SELECT 1 FROM lane.jobs WHERE queue = $1 AND id = $2 FOR UPDATE",
                queue_name,
                jobs[0].id,
            )
            # Neither waits for the held row (a claimer's): both take the others.
            cleaned = await asyncio.wait_for(
                committed.clean_jobs(queue_name, "waiting", 0, limit=1), 5
            )
            assert [job.id for job in cleaned] == [jobs[1].id]
            assert await asyncio.wait_for(committed.drain_jobs(queue_name), 5) == 2
        assert await committed.drain_jobs(queue_name) == 1
    finally:
        await holder.close()
    assert await committed.get_job_count(queue_name) == 0


async def test_obliterate_refusal_rolls_back_but_the_pause_stays_MGMT_21(
    committed: PostgresBackend, queue_name: str
) -> None:
    await committed.add_job(queue_name, "n")
    [active] = await committed.claim_jobs("w", [QueueDemand(queue_name, 1)], 600)
    async with committed.pool.acquire() as conn:
        message = await refused(conn, "LN006", "SELECT lane.obliterate_queue($1)", queue_name)
        assert "active jobs" in message
        # Called alone it changes nothing, the pause included: the caller pauses first.
        assert await conn.fetchval("SELECT lane.is_queue_paused($1)", queue_name) is False
    assert await committed.get_job(queue_name, active.id) == active


async def test_remove_orphaned_deletes_side_rows_whose_job_is_gone_MGMT_22(
    fresh_conn: asyncpg.Connection,
) -> None:
    conn = fresh_conn
    live = await conn.fetchval("SELECT key FROM lane.add_job('q', 'n', 'null')")
    gone = 9_000_000_000
    await conn.execute(
        "INSERT INTO lane.job_logs (job_key, ts, message)"
        " SELECT k, now(), 'line' FROM unnest(ARRAY[$1, $2, $2, $2]::bigint[]) k",
        live,
        gone,
    )
    await conn.execute(
        "INSERT INTO lane.flow_deps (parent_key, child_queue, child_id, bucket) VALUES"
        " ($1, 'q', 'gone-child', 'unprocessed'), ($2, 'q', 'c', 'unprocessed')",
        live,
        gone,
    )
    await conn.execute(
        "INSERT INTO lane.dedup_owners (queue, dedup_id, job_id, job_key, expires_at) VALUES"
        " ('q', 'no-ttl', 'x', $1, NULL), ('q', 'ttl-over', 'x', $1, now() - interval '1 s'),"
        " ('q', 'ttl-running', 'x', $1, now() + interval '1 h'),"
        " ('q', 'live', $2::bigint::text, $2::bigint, NULL)",
        gone,
        live,
    )
    await conn.execute(
        "INSERT INTO lane.repeat_schedulers (queue, key, job_id, job_key, name, every_ms)"
        " VALUES ('q', 'gone', 'x', $1, 'n', 1000)",
        gone,
    )

    # count 1: one key per statement, so the walk takes several batches.
    assert await conn.fetchval("SELECT lane.remove_orphaned(1, 0)") == 3 + 1 + 2 + 1

    assert await conn.fetchval("SELECT count(*) FROM lane.job_logs") == 1
    assert await conn.fetchval("SELECT array_agg(parent_key) FROM lane.flow_deps") == [live]
    owners = await conn.fetchval(
        "SELECT array_agg(dedup_id ORDER BY dedup_id) FROM lane.dedup_owners"
    )
    assert owners == ["live", "ttl-running"]
    assert await conn.fetchval("SELECT count(*) FROM lane.repeat_schedulers") == 0
    assert await conn.fetchval("SELECT lane.remove_orphaned()") == 0


async def test_removing_a_missing_id_cleans_only_what_names_it_MGMT_16(
    fresh_conn: asyncpg.Connection,
) -> None:
    """Rows left naming a job that is gone, as releases before DEDUP-7's fix left a
    replaced flow parent's (its row deleted raw): the generated id's key's logs and
    dependency rows, its owner and series rows; a custom id's rows through the key its
    owner row names. Another queue's live job whose key is the removed id's text, and an
    unrelated orphan, keep theirs."""
    conn = fresh_conn
    other = await conn.fetchval("SELECT key FROM lane.add_job('other', 'n', 'null')")
    gone, custom_key, unrelated = 9_000_000_001, 9_000_000_002, 9_000_000_003
    await conn.execute(
        "INSERT INTO lane.job_logs (job_key, ts, message)"
        " SELECT k, now(), 'line' FROM unnest($1::bigint[]) k",
        [gone, gone, custom_key, unrelated, other],
    )
    await conn.execute(
        "INSERT INTO lane.flow_deps (parent_key, child_queue, child_id, bucket) VALUES"
        " ($1, 'q', 'c1', 'processed'), ($2, 'q', 'c2', 'processed'),"
        " ($3, 'q', 'c3', 'processed')",
        gone,
        unrelated,
        other,
    )
    await conn.execute(
        "INSERT INTO lane.dedup_owners (queue, dedup_id, job_id, job_key, expires_at) VALUES"
        " ('q', 'd-gone', $1::bigint::text, $1::bigint, now() + interval '1 h'),"
        " ('q', 'd-custom', 'custom', $2, now() + interval '1 h'),"
        " ('q', 'd-unrelated', 'someone', $3, now() + interval '1 h')",
        gone,
        custom_key,
        unrelated,
    )
    await conn.execute(
        "INSERT INTO lane.repeat_schedulers (queue, key, job_id, job_key, name, every_ms)"
        " VALUES ('q', 's-gone', $1::bigint::text, $1::bigint, 'n', 1000)",
        gone,
    )

    for job_id in (str(gone), "custom", str(other)):
        assert await conn.fetchval("SELECT lane.remove_job('q', $1)", job_id) is False

    logs = await conn.fetchval("SELECT array_agg(job_key ORDER BY job_key) FROM lane.job_logs")
    assert logs == sorted([unrelated, other])
    deps = await conn.fetchval(
        "SELECT array_agg(parent_key ORDER BY parent_key) FROM lane.flow_deps"
    )
    assert deps == sorted([unrelated, other])
    owners = await conn.fetchval("SELECT array_agg(dedup_id) FROM lane.dedup_owners")
    assert owners == ["d-unrelated"]
    assert await conn.fetchval("SELECT count(*) FROM lane.repeat_schedulers") == 0
    assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE event = 'removed'") == 0


async def test_remove_orphaned_stops_at_its_limit_MGMT_22(fresh_conn: asyncpg.Connection) -> None:
    await fresh_conn.execute(
        "INSERT INTO lane.job_logs (job_key, ts, message)"
        " SELECT 9000000000 + g % 3, now(), 'line' FROM generate_series(1, 10) g"
    )
    assert await fresh_conn.fetchval("SELECT lane.remove_orphaned(2, 4)") == 4
    assert await fresh_conn.fetchval("SELECT lane.remove_orphaned(0, 0)") == 6
    await refused(fresh_conn, "LN003", "SELECT lane.remove_orphaned(-1, 0)")
    await refused(fresh_conn, "LN003", "SELECT lane.remove_orphaned(0, NULL)")


async def test_refusals_name_the_problem_and_write_nothing(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await conn.execute("SELECT lane.add_job($1, 'n')", queue_name)
    before = await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue_name)
    for sql in (
        "SELECT lane.clean_jobs($1, 'waiting-children', 0)",
        "SELECT lane.clean_jobs($1, 'paused', 0)",
        "SELECT lane.clean_jobs($1, 'completed', -1)",
        "SELECT lane.clean_jobs($1, 'completed', NULL)",
        "SELECT lane.clean_jobs($1, 'completed', 0, -1)",
        "SELECT lane.drain_jobs($1, NULL)",
        "SELECT lane.obliterate_queue($1, NULL)",
    ):
        await refused(conn, "LN003", sql, queue_name)
    await refused(conn, "LN013", "SELECT lane.drain_jobs('bad name!')")
    await refused(
        conn, "LN002", "SELECT * FROM lane.get_counts_per_priority($1, '{1, -1}')", queue_name
    )
    after = await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue_name)
    assert (after, await conn.fetchval("SELECT lane.count_jobs($1, NULL)", queue_name)) == (
        before,
        1,
    )


async def test_chunk_lookups_read_their_state_index(
    fresh_conn: asyncpg.Connection, queue_name: str
) -> None:
    """Each candidate read is a scan of its state's partial index in the generic plan
    plpgsql caches (the literal state next to the parameter proves the predicate)."""
    conn = fresh_conn
    await conn.execute(
        "INSERT INTO lane.jobs (queue, id, name, state, created_at, available_at, finished_at,"
        " processed_at, lease_expires_at, order_key)"
        " SELECT $1 || (g % 3), 'j' || g, 'n',"
        "        (ARRAY['waiting', 'delayed', 'active', 'completed', 'failed'])[1 + g % 5],"
        "        now(), now() + g * interval '1 ms',"
        "        CASE WHEN g % 5 >= 3 THEN now() END, now(), now() + interval '1 min', g"
        "   FROM generate_series(1, 20000) g",
        queue_name,
    )
    await conn.execute("ANALYZE lane.jobs")  # statistics roll back with the test
    await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    quoted = queue_name.replace("'", "''") + "1"
    checks = {
        "jobs_waiting_idx": (
            WAITING_SQL,
            "(text, timestamptz, integer)",
            f"('{quoted}', NULL, NULL)",
        ),
        "jobs_delayed_idx": (
            DELAYED_SQL,
            "(text, timestamptz, integer)",
            f"('{quoted}', now(), 1000)",
        ),
        "jobs_finished_idx": (
            FINISHED_SQL,
            "(text, text, timestamptz, integer)",
            f"('{quoted}', 'completed', now(), 1000)",
        ),
        "jobs_lease_idx": (
            ACTIVE_SQL,
            "(text, timestamptz, integer, timestamptz)",
            f"('{quoted}', now(), 1000, now())",
        ),
    }
    for number, (index, (sql, types, args)) in enumerate(checks.items()):
        await conn.execute(f"PREPARE chunk{number} {types} AS {sql}")
        plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE chunk{number}{args}")
        assert index in plan, (index, plan)
        await conn.execute(f"DEALLOCATE chunk{number}")
