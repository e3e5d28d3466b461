"""Queue events in plain SQL: ``lane.set_queue_events`` / ``lane.queue_records_events`` the
way a psql user calls them, the column default, and the events primary key ``(queue, id)``
that every read and trim goes through (EVS-2, EVS-3).
"""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.postgres.conftest import refused

# The statements of lane.read_events (inlined: a LANGUAGE sql function in FROM) and of
# lane.trim_events (parameters for its variables).
READ_SQL = "SELECT * FROM lane.read_events($1, $2, $3, $4)"
CUT_SQL = (
    "SELECT t.id FROM (SELECT r.id, sum(r.n) OVER (ORDER BY r.id DESC ROWS UNBOUNDED"
    " PRECEDING) - r.n AS newer FROM (SELECT e.id, coalesce(cardinality(e.job_ids), 1) AS n"
    " FROM lane.events e WHERE e.queue = $1) r ORDER BY r.id DESC) t"
    " WHERE t.newer >= $2 LIMIT 1"
)
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


@pytest.mark.parametrize("custom_ids", [False, True], ids=["written-directly", "grouped"])
async def test_both_ways_of_writing_a_batchs_events_give_the_same_stream(
    conn: asyncpg.Connection, queue_name: str, custom_ids: bool
) -> None:
    """A batch of new jobs due now has its events written from the ids it chose; one with
    custom ids has them grouped from the rows it inserted. Either way: every 'added' (with
    each job's name) in input order, then every 'waiting', 1,024 to a row."""
    options = (
        "ARRAY(SELECT jsonb_build_object('job_id', 'c-' || g) FROM generate_series(1, 1030) g)"
        if custom_ids
        else "array_fill('{}'::jsonb, ARRAY[1030])"
    )
    keys = await conn.fetchval(
        "SELECT array_agg(key ORDER BY key) FROM lane.add_jobs($1,"
        " ARRAY(SELECT CASE WHEN g % 3 = 0 THEN 'b' ELSE 'a' END FROM generate_series(1, 1030) g),"
        f" array_fill('1'::jsonb, ARRAY[1030]), {options})",
        queue_name,
    )
    jobs = await conn.fetch(
        "SELECT id, name FROM lane.jobs WHERE key = ANY ($1) ORDER BY key", keys
    )
    rows = await conn.fetch(
        "SELECT event, cardinality(job_ids) AS n FROM lane.events WHERE queue = $1 ORDER BY id",
        queue_name,
    )
    assert [(r["event"], r["n"]) for r in rows] == [
        ("added", 1024), ("added", 6), ("waiting", 1024), ("waiting", 6),
    ]  # fmt: skip
    stream = await conn.fetch(
        "SELECT id, event, job_id, data FROM lane.read_events($1, NULL, NULL, 5000)", queue_name
    )
    assert [(r["event"], r["job_id"], json.loads(r["data"])) for r in stream] == [
        ("added", job["id"], {"name": job["name"]}) for job in jobs
    ] + [("waiting", job["id"], {}) for job in jobs]
    assert [r["id"] for r in stream] == sorted({r["id"] for r in stream})


async def test_batches_of_more_than_1024_events_split_and_read_in_order_EVS_1_EVS_2(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """2,100 jobs in one add_jobs: 'added' and 'waiting' rows of at most 1,024 events each
    (migration 0007), read back as 4,200 events with increasing ids in input order,
    whichever range and limit a reader pages with."""
    keys = await conn.fetchval(
        "SELECT array_agg(key ORDER BY key) FROM lane.add_jobs($1, array_fill('n'::text,"
        " ARRAY[2100]), array_fill('1'::jsonb, ARRAY[2100]), array_fill('{}'::jsonb,"
        " ARRAY[2100]))",
        queue_name,
    )
    rows = await conn.fetch(
        "SELECT event, cardinality(job_ids) AS n FROM lane.events WHERE queue = $1 ORDER BY id",
        queue_name,
    )
    assert [(r["event"], r["n"]) for r in rows] == [
        ("added", 1024), ("added", 1024), ("added", 52),
        ("waiting", 1024), ("waiting", 1024), ("waiting", 52),
    ]  # fmt: skip
    ids = await conn.fetch("SELECT id FROM lane.jobs WHERE key = ANY ($1) ORDER BY key", keys)
    job_ids = [r["id"] for r in ids]
    everything = await conn.fetch(
        "SELECT id, event, job_id FROM lane.read_events($1, NULL, NULL, 5000)", queue_name
    )
    assert [(r["event"], r["job_id"]) for r in everything] == [("added", j) for j in job_ids] + [
        ("waiting", j) for j in job_ids
    ]
    event_ids = [r["id"] for r in everything]
    assert event_ids == sorted(set(event_ids))
    # Paging 100 at a time from just after the last id seen gives the same stream.
    paged: list[int] = []
    start = 0
    while True:
        page = await conn.fetch(
            "SELECT id FROM lane.read_events($1, $2, NULL, 100)", queue_name, start
        )
        if not page:
            break
        paged += [r["id"] for r in page]
        start = page[-1]["id"] + 1
    assert paged == event_ids
    # A range that starts and ends inside batch rows.
    inner = await conn.fetch(
        "SELECT id FROM lane.read_events($1, $2, $3, 5000)",
        queue_name,
        event_ids[1000],
        event_ids[3100],
    )
    assert [r["id"] for r in inner] == event_ids[1000:3101]
