"""Queue events in plain SQL: ``lane.set_queue_events`` / ``lane.queue_records_events`` the
way a psql user calls them, the column default, and the events primary key ``(queue, id)``
that every read and trim goes through (EVS-2, EVS-3).
"""

from __future__ import annotations

import asyncpg

from tests.postgres.conftest import refused

# The statements of lane.read_events (inlined: a LANGUAGE sql function in FROM) and of
# lane.trim_events (parameters for its variables).
READ_SQL = "SELECT * FROM lane.read_events($1, $2, $3, $4)"
CUT_SQL = "SELECT id FROM lane.events WHERE queue = $1 ORDER BY id DESC OFFSET $2 LIMIT 1"
TRIM_SQL = "DELETE FROM lane.events WHERE queue = $1 AND id <= $2"


async def test_events_are_keyed_by_queue_and_id_only_EVS_2(conn: asyncpg.Connection) -> None:
    indexes = await conn.fetch(
        "SELECT indexname, indexdef FROM pg_indexes"
        " WHERE schemaname = 'lane' AND tablename = 'events'"
    )
    assert [(row["indexname"], row["indexdef"].split(" USING ")[1]) for row in indexes] == [
        ("events_pkey", "btree (queue, id)")
    ]


async def test_read_and_trim_use_the_primary_key_EVS_2_EVS_3(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """In the generic plans that prepared statements and plpgsql cache: the queue is a
    parameter, so nothing but the key's leading column can narrow the read."""
    await conn.execute(
        "INSERT INTO lane.events (queue, event, created_at)"
        " SELECT $1 || '_' || (g % 40), 'added', now() FROM generate_series(1, 4000) g",
        queue_name,
    )
    await conn.execute("ANALYZE lane.events")  # statistics roll back with the test
    await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    for name, types, sql, args in (
        ("ev_read", "text, bigint, bigint, integer", READ_SQL, "'{q}', NULL, NULL, 100"),
        ("ev_cut", "text, integer", CUT_SQL, "'{q}', 10000"),
        ("ev_trim", "text, bigint", TRIM_SQL, "'{q}', 100"),
    ):
        await conn.execute(f"PREPARE {name} ({types}) AS {sql}")
        plan = await conn.fetchval(
            f"EXPLAIN (FORMAT JSON) EXECUTE {name}({args.format(q=queue_name + '_7')})"
        )
        assert '"Index Name": "events_pkey"' in plan, (name, plan)
        assert "Seq Scan" not in plan, (name, plan)
        await conn.execute(f"DEALLOCATE {name}")


async def test_record_events_defaults_on_and_reads_back_in_sql(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    default = await conn.fetchval(
        "SELECT column_default FROM information_schema.columns WHERE table_schema = 'lane'"
        " AND table_name = 'queues' AND column_name = 'record_events'"
    )
    assert default == "true"
    assert await conn.fetchval("SELECT lane.queue_records_events($1)", queue_name) is True
    assert await conn.fetchval("SELECT count(*) FROM lane.queues WHERE name = $1", queue_name) == 0

    await conn.execute("SELECT lane.set_queue_events($1, false)", queue_name)
    assert await conn.fetchval("SELECT lane.queue_records_events($1)", queue_name) is False
    await conn.execute("SELECT lane.add_job($1, 'n')", queue_name)
    assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue_name) == 0
    await conn.execute("SELECT lane.set_queue_events($1, true)", queue_name)
    await conn.execute("SELECT lane.add_job($1, 'n')", queue_name)
    assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue_name) == 2


async def test_null_and_bad_names_are_refused_in_sql(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    message = await refused(conn, "LN003", "SELECT lane.set_queue_events($1, NULL)", queue_name)
    assert "true or false" in message
    assert await conn.fetchval("SELECT count(*) FROM lane.queues WHERE name = $1", queue_name) == 0
    await conn.execute("SELECT lane.set_queue_events($1, false)", queue_name)
    await refused(conn, "LN003", "SELECT lane.set_queue_events($1, NULL)", queue_name)
    assert await conn.fetchval("SELECT lane.queue_records_events($1)", queue_name) is False
    await refused(conn, "LN013", "SELECT lane.set_queue_events('bad name!', false)")
    await refused(conn, "LN013", "SELECT lane.set_queue_events(NULL, false)")
