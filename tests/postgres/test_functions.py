"""The stored functions called as plain SQL, the way a psql user or another language does.

Each test runs inside a transaction that is rolled back at the end (STYLE.md: the cheapest
honest isolation), so nothing it writes survives.
"""

from __future__ import annotations

import json

import asyncpg
import pytest

from tests.postgres.conftest import refused


async def _nothing_written(conn: asyncpg.Connection, queue: str) -> None:
    assert await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue) == 0
    assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue) == 0


async def test_plain_sql_add_job_is_visible_in_job_counts_SQLR_7(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id = await conn.fetchval(
        "SELECT (lane.add_job($1, 'send', '{\"to\": \"a@example.com\"}'::jsonb)).id", queue_name
    )
    assert job_id.isdigit()
    rows = await conn.fetch("SELECT state, count FROM lane.job_counts WHERE queue = $1", queue_name)
    assert [(row["state"], row["count"]) for row in rows] == [("waiting", 1)]
    data = await conn.fetchval("SELECT data FROM lane.jobs WHERE queue = $1", queue_name)
    assert json.loads(data) == {"to": "a@example.com"}


@pytest.mark.parametrize(
    ("options", "sqlstate", "fragment"),
    [
        ({"job_id": "0"}, "LN001", "invalid job id"),
        ({"job_id": "0:x"}, "LN001", "invalid job id"),
        ({"job_id": "42"}, "LN001", "pure integer"),
        ({"job_id": ""}, "LN001", "invalid job id"),
        ({"priority": 2**21 + 1}, "LN002", "priority"),
        ({"priority": -1}, "LN002", "priority"),
        ({"priority": 1.5}, "LN002", "priority"),
        ({"attempts": 0}, "LN003", "attempts"),
        ({"delay_ms": -5}, "LN003", "delay_ms"),
        ({"backoff": {"type": "linear"}}, "LN003", "backoff"),
        ({"remove_on_complete": "yes"}, "LN003", "remove_on_complete"),
        ({"colour": "red"}, "LN003", "unknown option"),
    ],
)
async def test_bad_options_raise_their_sqlstate_and_write_nothing_ADD_4_ADD_5(
    conn: asyncpg.Connection,
    queue_name: str,
    options: dict[str, object],
    sqlstate: str,
    fragment: str,
) -> None:
    message = await refused(
        conn,
        sqlstate,
        "SELECT lane.add_job($1, 'send', '{}'::jsonb, $2::jsonb)",
        queue_name,
        json.dumps(options),
    )
    assert fragment in message
    await _nothing_written(conn, queue_name)


async def test_bad_queue_name_isrefused(conn: asyncpg.Connection) -> None:
    message = await refused(conn, "LN013", "SELECT lane.add_job('has space', 'send')")
    assert "invalid queue name" in message
    assert await conn.fetchval("SELECT count(*) FROM lane.queues WHERE name = 'has space'") == 0


async def test_bulk_add_with_one_bad_spec_writes_nothing_ADD_11(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await refused(
        conn,
        "LN001",
        "SELECT lane.add_jobs($1, ARRAY['a', 'b'], ARRAY['1', '2']::jsonb[],"
        " ARRAY['{}', '{\"job_id\": \"7\"}']::jsonb[])",
        queue_name,
    )
    await _nothing_written(conn, queue_name)


async def test_failure_injected_mid_function_leaves_no_partial_write_SCH_4(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """A trigger that raises on the `waiting` event aborts add_job after its job insert."""
    await conn.execute(
        f"""
        CREATE FUNCTION pg_temp.explode() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.queue = '{queue_name}' AND NEW.event = 'waiting' THEN
                RAISE EXCEPTION 'injected failure';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER explode BEFORE INSERT ON lane.events
            FOR EACH ROW EXECUTE FUNCTION pg_temp.explode();
        """
    )
    await refused(conn, "P0001", "SELECT lane.add_job($1, 'send')", queue_name)
    await _nothing_written(conn, queue_name)
    # The same trigger aborts a completion that would requeue nothing but still writes
    # events: the job must stay active under its token.
    await conn.execute("DROP TRIGGER explode ON lane.events")
    await conn.execute("SELECT lane.add_job($1, 'send')", queue_name)
    claimed = await conn.fetchrow(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    await conn.execute(
        f"""
        CREATE OR REPLACE FUNCTION pg_temp.explode() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.queue = '{queue_name}' AND NEW.event = 'completed' THEN
                RAISE EXCEPTION 'injected failure';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER explode BEFORE INSERT ON lane.events
            FOR EACH ROW EXECUTE FUNCTION pg_temp.explode();
        """
    )
    await refused(
        conn,
        "P0001",
        "SELECT lane.complete_job($1, $2, $3, '1'::jsonb)",
        queue_name,
        claimed["id"],
        claimed["lock_token"],
    )
    row = await conn.fetchrow(
        "SELECT state, lock_token, return_value FROM lane.jobs WHERE queue = $1", queue_name
    )
    assert (row["state"], row["lock_token"], row["return_value"]) == (
        "active",
        claimed["lock_token"],
        None,
    )


async def test_stale_token_is_refused_with_lock_mismatch_CLAIM_4(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await conn.execute("SELECT lane.add_job($1, 'send')", queue_name)
    claimed = await conn.fetchrow(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    for sql in (
        "SELECT lane.complete_job($1, $2, gen_random_uuid())",
        "SELECT lane.fail_job($1, $2, gen_random_uuid(), 'x')",
        "SELECT lane.release_job($1, $2, gen_random_uuid())",
        "SELECT lane.delay_job($1, $2, gen_random_uuid(), 1000)",
    ):
        message = await refused(conn, "LN005", sql, queue_name, claimed["id"])
        assert "lock mismatch" in message
    row = await conn.fetchrow(
        "SELECT state, lock_token FROM lane.jobs WHERE queue = $1", queue_name
    )
    assert (row["state"], row["lock_token"]) == ("active", claimed["lock_token"])


async def test_leases_use_the_database_clock_SCH_7(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await conn.execute("SELECT lane.add_job($1, 'send')", queue_name)
    row = await conn.fetchrow(
        "SELECT processed_at, lease_expires_at, clock_timestamp() AS after"
        " FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
        queue_name,
    )
    assert (row["lease_expires_at"] - row["processed_at"]).total_seconds() == 30
    assert row["processed_at"] <= row["after"]


async def test_delayed_job_due_time_with_injected_now_SCH_7(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    row = await conn.fetchrow(
        "SELECT state, available_at, available_at - created_at AS delay FROM lane.add_job("
        "$1, 'send', 'null', '{\"delay_ms\": 5000}', '2030-01-01T00:00:00Z')",
        queue_name,
    )
    assert row["state"] == "delayed"
    assert row["delay"].total_seconds() == 5
    assert row["available_at"].isoformat() == "2030-01-01T00:00:05+00:00"


async def test_claim_reads_the_waiting_index(conn: asyncpg.Connection, queue_name: str) -> None:
    """The claim's candidate query is an index range over the partial waiting index."""
    await conn.execute(
        "SELECT lane.add_jobs($1, array_fill('n'::text, ARRAY[300]),"
        " array_fill('1'::jsonb, ARRAY[300]), array_fill('{}'::jsonb, ARRAY[300]))",
        queue_name,
    )
    await conn.execute("ANALYZE lane.jobs")  # statistics roll back with the test
    await conn.execute("SET LOCAL enable_seqscan = off")
    plan = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) SELECT key FROM lane.jobs WHERE queue = $1 AND state = 'waiting'"
        " ORDER BY order_key, key LIMIT 10 FOR UPDATE SKIP LOCKED",
        queue_name,
    )
    assert "jobs_waiting_idx" in plan
    plan = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) SELECT key FROM lane.jobs WHERE queue = $1 AND state = 'delayed'"
        " AND available_at <= now() ORDER BY available_at, key",
        queue_name,
    )
    assert "jobs_delayed_idx" in plan


async def test_reporting_views_match_the_counts_SQLR_1(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    await conn.execute(
        "SELECT lane.add_jobs($1, ARRAY['a', 'b', 'c'], ARRAY['1', '2', '3']::jsonb[],"
        " ARRAY['{}', '{}', '{\"delay_ms\": 60000}']::jsonb[])",
        queue_name,
    )
    claimed = await conn.fetchrow(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    await conn.execute(
        "SELECT lane.fail_job($1, $2, $3, 'boom')", queue_name, claimed["id"], claimed["lock_token"]
    )
    counts = {
        row["state"]: row["count"]
        for row in await conn.fetch("SELECT * FROM lane.get_job_counts($1)", queue_name)
    }
    view = {
        row["state"]: row["count"]
        for row in await conn.fetch(
            "SELECT state, count FROM lane.job_counts WHERE queue = $1", queue_name
        )
    }
    assert view == {state: count for state, count in counts.items() if count}
    stats = await conn.fetchrow("SELECT * FROM lane.queue_stats WHERE queue = $1", queue_name)
    assert (stats["waiting"], stats["delayed"], stats["failed"], stats["paused"]) == (
        1,
        1,
        1,
        False,
    )
    failure = await conn.fetchrow("SELECT * FROM lane.job_failures WHERE queue = $1", queue_name)
    assert (failure["id"], failure["failed_reason"]) == (claimed["id"], "boom")
    age = await conn.fetchrow("SELECT * FROM lane.waiting_age WHERE queue = $1", queue_name)
    assert age["waiting"] == 1


async def test_trim_events_keeps_each_queues_newest_max_events_EVS_3(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """Single rows are trimmed one by one; a batch row goes or stays whole, so up to 1,023
    more than max_events may stay, never fewer (EVS-3: approximately, newest kept)."""
    for n in range(4):
        await conn.execute("SELECT lane.add_job($1, 'one', $2::jsonb)", queue_name, str(n))
    newest = await conn.fetch(
        "SELECT id FROM lane.event_log WHERE queue = $1 ORDER BY id DESC LIMIT 3", queue_name
    )
    await conn.execute("UPDATE lane.queues SET max_events = 3 WHERE name = $1", queue_name)
    assert await conn.fetchval("SELECT lane.trim_events(ARRAY[$1])", queue_name) == 5
    kept = await conn.fetch(
        "SELECT id FROM lane.event_log WHERE queue = $1 ORDER BY id DESC", queue_name
    )
    assert kept == newest
    # A bulk add: one 'added' row and one 'waiting' row of four events each.
    await conn.execute(
        "SELECT lane.add_jobs($1, ARRAY['a', 'b', 'c', 'd'], ARRAY['1', '2', '3', '4']::jsonb[],"
        " ARRAY['{}', '{}', '{}', '{}']::jsonb[])",
        queue_name,
    )
    assert await conn.fetchval("SELECT count(*) FROM lane.events WHERE queue = $1", queue_name) == 5
    await conn.execute("UPDATE lane.queues SET max_events = 5 WHERE name = $1", queue_name)
    # The 'waiting' row holds 4, the 'added' row would make 8 > 5: it stays (4 + 4 >= 5 is
    # only reached by the row after it), everything older goes.
    assert await conn.fetchval("SELECT lane.trim_events(ARRAY[$1])", queue_name) == 3
    events = await conn.fetch(
        "SELECT event, job_id FROM lane.event_log WHERE queue = $1 ORDER BY id", queue_name
    )
    bulk = [
        r["id"]
        for r in await conn.fetch(
            "SELECT id FROM lane.jobs WHERE queue = $1 AND name IN ('a', 'b', 'c', 'd')"
            " ORDER BY key",
            queue_name,
        )
    ]
    assert [(r["event"], r["job_id"]) for r in events] == [("added", i) for i in bulk] + [
        ("waiting", i) for i in bulk
    ]


# lane.add_job inserts a job without a custom id itself, for speed (W1), repeating the
# column mapping of lane._store_jobs: the two must store the same row for the same spec.
SAME_ROW_OPTIONS = [
    {},
    {"priority": 7},
    {"priority": 3, "lifo": True},
    {"delay_ms": 60000},
    {"attempts": 4, "backoff": {"type": "fixed", "delay_ms": 250}},
    {"timeout_ms": 1500, "remove_on_complete": True, "remove_on_fail": {"count": 3}},
    {"backoff": None, "priority": None},
    {"job_id": "custom-1", "priority": 2},
    {"deduplication": {"id": "d", "ttl_ms": 5000}, "delay_ms": 1000},
    {"job_id": "custom-2", "deduplication": {"id": "d2", "keep_last_if_active": True}},
]
COMPARED = (
    "CASE WHEN id <> key::text THEN id END AS custom_id, dedup_id, repeat_key,"
    " name, data, state, priority, lifo, max_attempts, backoff, timeout_ms, options,"
    " available_at - created_at AS delay, enqueued_seq IS NULL AS unsequenced,"
    " order_key - coalesce(enqueued_seq, 0) * (CASE WHEN lifo THEN -1 ELSE 1 END) AS bucket,"
    " id = key::text AS id_is_key"
)


async def test_a_batch_of_default_options_stores_what_the_general_path_stores(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """A bulk add whose specs all have default options writes its rows from constants (W2);
    the same spec in a batch that also has options goes through the general column
    expressions. Both store the same row, and the same events."""
    keys = []
    for queue, second in ((queue_name, "{}"), (f"{queue_name}_b", '{"priority": 0}')):
        keys.append(
            await conn.fetchval(
                "SELECT min(key) FROM lane.add_jobs($1, ARRAY['mail', 'mail'],"
                " ARRAY['{\"to\": 1}'::jsonb, 'null'], ARRAY['{}'::jsonb, $2::jsonb])",
                queue,
                second,
            )
        )
    rows = [
        dict(await conn.fetchrow(f"SELECT {COMPARED} FROM lane.jobs WHERE key = $1", key))
        for key in keys
    ]
    assert rows[0] == rows[1] and rows[0]["state"] == "waiting"
    streams = [
        [
            (r["event"], r["data"])
            for r in await conn.fetch(
                "SELECT event, data::text FROM lane.event_log WHERE queue = $1 ORDER BY id", queue
            )
        ]
        for queue in (queue_name, f"{queue_name}_b")
    ]
    assert streams[0] == streams[1]


@pytest.mark.parametrize("options", SAME_ROW_OPTIONS, ids=json.dumps)
async def test_add_job_and_add_jobs_store_the_same_row_ADD_1_ADD_11(
    conn: asyncpg.Connection, queue_name: str, options: dict[str, object]
) -> None:
    doc = json.dumps(options)
    # Two queues: a custom or deduplication id would make the second add return the first.
    single = await conn.fetchval(
        "SELECT (lane.add_job($1, 'mail', '{\"to\": 1}', $2::jsonb)).key", queue_name, doc
    )
    bulk = await conn.fetchval(
        "SELECT key FROM lane.add_jobs($1, ARRAY['mail'], ARRAY['{\"to\": 1}'::jsonb],"
        " ARRAY[$2::jsonb])",
        f"{queue_name}_b",
        doc,
    )
    rows = [
        dict(await conn.fetchrow(f"SELECT {COMPARED} FROM lane.jobs WHERE key = $1", key))
        for key in (single, bulk)
    ]
    assert rows[0] == rows[1]
    events = [
        [
            # a delayed event carries its absolute due time: compare its keys only
            (r["event"], sorted(json.loads(r["data"])))
            for r in await conn.fetch(
                "SELECT event, data::text FROM lane.event_log WHERE (queue, job_id) ="
                " (SELECT queue, id FROM lane.jobs WHERE key = $1) ORDER BY id",
                key,
            )
        ]
        for key in (single, bulk)
    ]
    assert events[0] == events[1]
    assert [e for e, _ in events[0]] == ["added", rows[0]["state"]]


async def test_job_lookups_by_id_use_the_key_or_the_custom_id_index_ADD_2_ADD_3(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    """In the generic plan a prepared statement or plpgsql caches, lane._job_keys probes
    jobs_pkey for an id that may be a key's text and jobs_custom_id_idx for any other,
    never a scan, whatever the statistics say; only custom ids take an entry in the unique
    (queue, id) index (migration 0008)."""
    await conn.execute(
        "SELECT count(*) FROM lane.add_jobs($1, array_fill('n'::text, ARRAY[3000]),"
        " array_fill('1'::jsonb, ARRAY[3000]), array_fill('{}'::jsonb, ARRAY[3000]))",
        queue_name,
    )
    custom = await conn.fetchval(
        "SELECT (lane.add_job($1, 'n', 'null', '{\"job_id\": \"c-1\"}')).key", queue_name
    )
    await conn.execute("ANALYZE lane.jobs")  # statistics roll back with the test
    await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    await conn.execute("PREPARE jk (text[], text[]) AS SELECT * FROM lane._job_keys($1, $2)")
    plan = await conn.fetchval("EXPLAIN (FORMAT JSON) EXECUTE jk(ARRAY['q'], ARRAY['1'])")
    await conn.execute("DEALLOCATE jk")
    assert '"Index Name": "jobs_pkey"' in plan and '"Index Name": "jobs_custom_id_idx"' in plan
    assert "Seq Scan" not in plan, plan
    generated = await conn.fetchval(
        "SELECT id FROM lane.jobs WHERE queue = $1 AND id <> 'c-1' LIMIT 1", queue_name
    )
    found = await conn.fetch(
        "SELECT ord, key FROM lane._job_keys(ARRAY[$1, $1, $1, $1], ARRAY[$2, 'c-1', 'nope', $3])"
        " ORDER BY ord",
        queue_name,
        generated,
        "99999999999999999999",
    )
    assert [(r["ord"], r["key"]) for r in found] == [(1, int(generated)), (2, custom)]
    entries = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id <> key::text", queue_name
    )
    assert entries == 1


async def test_save_stacktrace_refuses_a_null_entry_and_writes_nothing_MGMT_12(
    conn: asyncpg.Connection, queue_name: str
) -> None:
    job_id = await conn.fetchval("SELECT id FROM lane.add_job($1, 'n')", queue_name)
    await refused(
        conn, "LN003", "SELECT lane.save_job_stacktrace($1, $2, ARRAY['a', NULL], 'r')",
        queue_name, job_id,
    )  # fmt: skip
    row = await conn.fetchrow(
        "SELECT stacktrace, failed_reason FROM lane.get_job($1, $2)", queue_name, job_id
    )
    assert (row["stacktrace"], row["failed_reason"]) == ([], None)
    await refused(
        conn, "LN004", "SELECT lane.save_job_stacktrace($1, 'missing', '{}', NULL)", queue_name
    )
