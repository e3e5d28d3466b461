"""Migration 0005 in SQL: the leadership lease under concurrent candidates, the fenced
write functions with one signature each, and the downgrade (STALL-8, WORK-9)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from lane_pg.postgres.schema import SCHEMA_VERSION, migrate
from tests.conftest import NewDatabase
from tests.postgres.conftest import refused
from tests.postgres.test_migrations import _alembic, _alembic_upgrade, _run_in_thread

CANDIDATES = 8


async def _race(dsn: str, role: str, prefix: str) -> list[bool]:
    """CANDIDATES connections (holders ``<prefix>-<n>``) ask for ``role`` at once."""
    conns = [await asyncpg.connect(dsn) for _ in range(CANDIDATES)]
    try:
        start = asyncio.Event()

        async def ask(n: int, conn: asyncpg.Connection) -> bool:
            await start.wait()
            won: bool = await conn.fetchval(
                "SELECT lane.acquire_leadership($1, $2, 60000)", role, f"{prefix}-{n}"
            )
            return won

        asked = [asyncio.create_task(ask(n, conn)) for n, conn in enumerate(conns)]
        await asyncio.sleep(0)
        start.set()
        return list(await asyncio.gather(*asked))
    finally:
        for conn in conns:
            await conn.close()


async def test_concurrent_candidates_elect_exactly_one_STALL_8(pg_dsn: str) -> None:
    role = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(pg_dsn)
    try:
        terms = []
        # No row yet (the INSERT path), then a lapsed lease (the takeover path).
        # New candidates each round: a lapsed holder that asks again renews its own term.
        for prefix in ("first", "second"):
            results = await _race(pg_dsn, role, prefix)
            assert results.count(True) == 1, results
            row = await conn.fetchrow("SELECT holder, term FROM lane.leaders WHERE role = $1", role)
            assert row["holder"] == f"{prefix}-{results.index(True)}"
            terms.append(row["term"])
            await conn.execute(
                "UPDATE lane.leaders SET expires_at = clock_timestamp() - interval '1 s'"
                " WHERE role = $1",
                role,
            )
        assert terms == [1, 2]  # a takeover starts the next term
    finally:
        await conn.execute("DELETE FROM lane.leaders WHERE role = $1", role)
        await conn.close()


async def test_bad_arguments_raise_and_write_nothing(conn: asyncpg.Connection) -> None:
    await refused(conn, "LN003", "SELECT lane.acquire_leadership('r', 'h', 0)")
    await refused(conn, "LN003", "SELECT lane.acquire_leadership('r', 'h', NULL)")
    await refused(conn, "LN000", "SELECT lane.acquire_leadership('', 'h', 1000)")
    await refused(conn, "LN000", "SELECT lane.acquire_leadership('r', NULL, 1000)")
    assert await conn.fetchval("SELECT count(*) FROM lane.leaders WHERE role IN ('r', '')") == 0


async def test_fenced_writes_have_one_signature_each_and_defaults_resolve_WORK_9(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """The old overloads are gone (migration 0005), so a call relying on the defaults is
    not ambiguous; with a token the job must be active under it (LN005)."""
    counts = await conn.fetch(
        "SELECT p.proname, count(*) AS n FROM pg_proc p JOIN pg_namespace n"
        " ON n.oid = p.pronamespace WHERE n.nspname = 'lane'"
        " AND p.proname IN ('update_job_data', 'update_job_progress', 'add_job_log')"
        " GROUP BY 1 ORDER BY 1"
    )
    assert [(row["proname"], row["n"]) for row in counts] == [
        ("add_job_log", 1),
        ("update_job_data", 1),
        ("update_job_progress", 1),
    ]
    job_id = await conn.fetchval("SELECT (lane.add_job($1, 'n')).id", queue_name)
    assert await conn.fetchval("SELECT lane.add_job_log($1, $2, 'admin')", queue_name, job_id) == 1
    await conn.execute("SELECT lane.update_job_data($1, $2, '1')", queue_name, job_id)
    await conn.execute("SELECT lane.update_job_progress($1, $2, '2')", queue_name, job_id)
    await refused(
        conn,
        "LN005",
        "SELECT lane.update_job_data($1, $2, '3', gen_random_uuid())",
        queue_name,
        job_id,
    )
    await refused(
        conn,
        "LN005",
        "SELECT lane.add_job_log($1, $2, 'stale', p_token => gen_random_uuid())",
        queue_name,
        job_id,
    )
    row = await conn.fetchrow(
        "SELECT data::text, progress::text FROM lane.jobs WHERE queue = $1 AND id = $2",
        queue_name,
        job_id,
    )
    assert (row["data"], row["progress"]) == ("1", "2")
    token = await conn.fetchval(
        "SELECT lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 60000)", queue_name
    )
    await conn.execute(
        "SELECT lane.update_job_progress($1, $2, '4', p_token => $3)", queue_name, job_id, token
    )
    assert (
        await conn.fetchval(
            "SELECT progress::text FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, job_id
        )
        == "4"
    )


async def test_downgrade_of_leadership_removes_the_table_and_its_functions(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    await _run_in_thread(_alembic_upgrade, dsn)
    await _run_in_thread(_alembic, dsn, "lane", "downgrade", "0004")
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT to_regclass('lane.leaders')") is None
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'lane' AND p.prosrc ~ 'lane\\.leaders'"
            )
            == 0
        )
        assert await conn.fetchval("SELECT max(version) FROM lane.schema_version") < 5
        # Installed at head, the database never ran version 4's functions, so the downgrade
        # (which re-creates only recorded ones) leaves none until that release's migrate.
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'lane'"
            )
            == 0
        )
    finally:
        await conn.close()
    await _run_in_thread(_alembic_upgrade, dsn)
    assert await migrate(dsn) == SCHEMA_VERSION
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT lane.acquire_leadership('r', 'h', 1000)")
    finally:
        await conn.close()
