"""Migration 0018 (unique locks per connection, UNIQ-1) on a database holding version 17's
owner rows: rows of jobs become per-queue ``dedup`` rows, of several job-less reservations
of one id the one expiring last stays ``unique``, the partial index then holds, and the
way down gives version 17 back with the rows in place."""

from __future__ import annotations

import asyncpg

from tests.conftest import NewDatabase
from tests.postgres.test_migrations import _alembic, _alembic_upgrade, _run_in_thread


async def _v17_rows(conn: asyncpg.Connection) -> None:
    """What version 17's functions left (written directly: below the newest revision the
    schema has its tables only): two unique owners of one id in two queues, a debounce
    window, two reservations of one id, every row kind 'unique' (it had a token)."""
    for queue, dedup_id in (("qa", "R:1"), ("qb", "R:1"), ("qa", "debounce:S:")):
        key = await conn.fetchval(
            "INSERT INTO lane.jobs (queue, id, name, state, order_key, enqueued_seq,"
            " created_at, available_at, dedup_id) VALUES ($1, 'j-' || $2, 'n', 'waiting', 0,"
            " 0, now(), now(), $2) RETURNING key",
            queue,
            dedup_id,
        )
        await conn.execute(
            "INSERT INTO lane.dedup_owners (queue, dedup_id, kind, job_id, job_key, expires_at,"
            " token) VALUES ($1, $2, 'unique', 'j-' || $2, $3, now() + interval '10 minutes',"
            " 'tok')",
            queue,
            dedup_id,
            key,
        )
    for queue, token, minutes in (("qa", "t1", 1), ("qb", "t2", 2)):
        await conn.execute(
            "INSERT INTO lane.dedup_owners (queue, dedup_id, kind, expires_at, token)"
            " VALUES ($1, 'X:1', 'unique', now() + $3 * interval '1 minute', $2)",
            queue,
            token,
            minutes,
        )


async def test_upgrade_from_17_sorts_the_owner_rows_and_downgrades_UNIQ_1(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    await _run_in_thread(_alembic, dsn, "lane", "upgrade", "0017")
    conn = await asyncpg.connect(dsn)
    try:
        await _v17_rows(conn)
    finally:
        await conn.close()

    await _run_in_thread(_alembic_upgrade, dsn)
    conn = await asyncpg.connect(dsn)
    try:
        after = {
            (r["queue"], r["dedup_id"]): r["kind"]
            for r in await conn.fetch("SELECT queue, dedup_id, kind FROM lane.dedup_owners")
        }
        assert after == {
            ("qa", "R:1"): "dedup",  # rows of jobs: per queue, as they were
            ("qb", "R:1"): "dedup",
            ("qa", "debounce:S:"): "dedup",
            ("qb", "X:1"): "unique",  # the reservation expiring last
        }
        # The reservation blocks every queue now; its own push takes it over.
        assert not await conn.fetchval(
            "SELECT lane.reserve_deduplication_key('qc', 'X:1', 't3', 60000)"
        )
        taken = await conn.fetchrow(
            "SELECT queue, dedup_id FROM lane.add_job('qb', 'X', '1',"
            ' \'{"deduplication": {"id": "X:1", "ttl_ms": 60000, "token": "t2",'
            ' "kind": "unique"}}\')'
        )
        assert (taken["queue"], taken["dedup_id"]) == ("qb", "X:1")
        assert await conn.fetchval(INDEXED) == 1
    finally:
        await conn.close()

    await _run_in_thread(_alembic, dsn, "lane", "downgrade", "0017")
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT max(version) FROM lane.schema_version") == 17
        assert await conn.fetchval(INDEXED) == 0
        assert await conn.fetchval("SELECT count(*) FROM lane.dedup_owners") == 4
    finally:
        await conn.close()


INDEXED = "SELECT count(*) FROM pg_indexes WHERE indexname = 'dedup_owners_unique_id_idx'"
