"""The reporting views of sql/views.sql: what they show equals what the Python API reads
for the same data (SQLR-1..4), a per-queue filter reads that queue's rows through an index,
not the table (SQLR-6), and a reader role can select the views and nothing else (SQLR-5).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import FailedJobRecord
from lane_pg.postgres.failed import DatabaseFailedJobStore
from lane_pg.postgres.schema import migrate
from lane_pg.types import ALL_STATES, JobRow, QueueDemand
from lane_pg.types.flows import FlowJob
from tests.conftest import NewDatabase


async def claim(backend: JobQueueBackend, queue: str, n: int) -> list[JobRow]:
    return await backend.runs.claim_jobs("w", [QueueDemand(queue, n)], 30)


@pytest_asyncio.fixture
async def view_conn(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(pg_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def fill_queue(backend: JobQueueBackend, queue: str) -> dict[str, JobRow]:
    """One queue with jobs in every state: 3 waiting (and a flow child), 1 delayed, 1 active,
    1 completed, 1 failed, a flow parent waiting for its child."""
    for i in range(6):
        await backend.jobs.add_job(queue, "plain", {"i": i})
    await backend.jobs.add_job(queue, "later", None, {"delay_ms": 3_600_000, "job_id": "late"})
    done, failed, active = await claim(backend, queue, 3)
    await backend.runs.complete_job(queue, done.id, done.lock_token or "", {"ok": True})
    await backend.runs.fail_job(queue, failed.id, failed.lock_token or "", "boom")
    parent = FlowJob("parent", {"p": 1}, {"job_id": "parent"}, queue, [FlowJob("child", 1)])
    await backend.flows.add_flow(parent)
    return {"done": done, "failed": failed, "active": active}


async def test_v_queue_counts_and_v_queue_stats_match_the_reads_API_SQLR_1(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    await fill_queue(pg_backend, queue_name)
    await pg_backend.queues.pause_queue(queue_name)

    sparse = f"{queue_name}_sparse"  # one waiting job: five zero counts
    await pg_backend.jobs.add_job(sparse, "plain", None)
    for queue in (queue_name, sparse):
        counts = await pg_backend.reads.get_job_counts(queue)
        rows = await view_conn.fetch(
            "SELECT state, count FROM lane.v_queue_counts WHERE queue = $1", queue
        )
        assert {r["state"]: r["count"] for r in rows} == counts
        assert sorted(r["state"] for r in rows) == sorted(ALL_STATES)  # zeros included
        old = await view_conn.fetch(
            "SELECT state, count FROM lane.job_counts WHERE queue = $1", queue
        )
        assert {r["state"]: r["count"] for r in old} == {s: n for s, n in counts.items() if n}
    assert await pg_backend.reads.get_job_counts(queue_name) == {
        "waiting": 4, "delayed": 1, "active": 1, "waiting-children": 1, "completed": 1,
        "failed": 1,
    }  # fmt: skip
    assert sum(counts.values()) == 1  # the sparse queue's

    stats = await pg_backend.reads.get_queue_stats(queue_name)
    for view in ("lane.v_queue_stats", "lane.queue_stats"):
        row = await view_conn.fetchrow(f"SELECT * FROM {view} WHERE queue = $1", queue_name)
        assert row is not None
        assert (
            row["paused"], row["waiting"], row["delayed"], row["active"],
            row["waiting_children"], row["completed"], row["failed"],
        ) == (
            stats.paused, stats.waiting, stats.delayed, stats.active,
            stats.waiting_children, stats.completed, stats.failed,
        )  # fmt: skip
        assert stats.paused and row["max_active"] is None and row["rate_max"] is None


async def test_v_jobs_shows_each_job_as_get_job_does_SQLR_1(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    await fill_queue(pg_backend, queue_name)
    rows = await view_conn.fetch("SELECT * FROM lane.v_jobs WHERE queue = $1", queue_name)
    page = await pg_backend.reads.list_jobs(queue_name, list(ALL_STATES), limit=100)
    assert sorted(r["id"] for r in rows) == sorted(job.id for job in page.items)
    for row in rows:
        job = await pg_backend.jobs.get_job(queue_name, row["id"])
        assert job is not None
        assert (
            row["name"], row["state"], row["priority"], row["attempts_made"],
            row["max_attempts"], row["created_at"], row["available_at"],
            row["processed_at"], row["finished_at"], row["failed_reason"],
            json.loads(row["data"]), row["parent_queue"], row["parent_id"],
        ) == (
            job.name, job.state, job.priority, job.attempts_made, job.max_attempts,
            job.created_at, job.available_at, job.processed_at, job.finished_at,
            job.failed_reason, job.data, job.parent_queue, job.parent_id,
        )  # fmt: skip
    one = await view_conn.fetch(
        "SELECT id FROM lane.v_jobs WHERE queue = $1 AND state = 'failed'", queue_name
    )
    assert len(one) == 1


async def test_v_failed_jobs_lists_the_store_with_the_retained_job_SQLR_2(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    jobs = await fill_queue(pg_backend, queue_name)
    failed = jobs["failed"]
    store = DatabaseFailedJobStore(pg_backend)  # type: ignore[arg-type]
    now = datetime.now(UTC)
    for job_id in (failed.id, "gone-long-ago"):
        await store.log(
            FailedJobRecord(
                str(uuid.uuid4()), "default", queue_name, "plain",
                {"id": job_id, "queue": queue_name}, "Traceback\nValueError: boom", now,
            )
        )  # fmt: skip
    records = [r for r in await store.all() if r.queue == queue_name]
    rows = await view_conn.fetch(
        "SELECT * FROM lane.v_failed_jobs WHERE queue = $1 ORDER BY failed_at, id", queue_name
    )
    assert [
        (str(r["id"]), r["connection"], r["job_id"], r["job_name"], r["exception"],
         r["failed_at"], json.loads(r["envelope"]))
        for r in rows
    ] == [
        (r.id, r.connection, r.job_id, r.job_name, r.exception, r.failed_at, r.envelope)
        for r in records
    ]  # fmt: skip
    by_job = {r["job_id"]: r for r in rows}
    kept, gone = by_job[failed.id], by_job["gone-long-ago"]
    assert (kept["job_state"], kept["failed_reason"], kept["attempts_made"]) == (
        "failed",
        "boom",
        1,
    )
    assert gone["job_state"] is None and gone["data"] is None


async def test_v_terminal_metrics_sums_to_get_metrics_SQLR_2(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    await fill_queue(pg_backend, queue_name)
    for state in ("completed", "failed"):
        metrics = await pg_backend.metrics.get_metrics(queue_name, state)
        rows = await view_conn.fetch(
            "SELECT minute, count FROM lane.v_terminal_metrics"
            " WHERE queue = $1 AND state = $2 ORDER BY minute DESC",
            queue_name,
            state,
        )
        assert sum(r["count"] for r in rows) == metrics.count == 1
        newest = rows[0]["minute"]
        assert int(newest.timestamp() * 1000) == metrics.prev_ts
        assert metrics.data[0] == rows[0]["count"]


async def test_v_repeat_schedulers_lists_what_list_repeats_does_SQLR_3(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    await pg_backend.repeats.upsert_repeat(
        queue_name, "tick", None, {"repeat": {"every_ms": 60_000, "key": "every-minute"}}
    )
    await pg_backend.repeats.upsert_repeat(
        queue_name, "nightly", {"n": 1}, {"repeat": {"pattern": "0 3 * * *", "key": "night"}}
    )
    listed = await pg_backend.repeats.list_repeats(queue_name, ascending=True)
    rows = await view_conn.fetch(
        "SELECT * FROM lane.v_repeat_schedulers WHERE queue = $1 ORDER BY next_at, key",
        queue_name,
    )
    assert [
        (r["key"], r["job_id"], r["name"], r["next_at"], r["count"], r["every_ms"],
         r["pattern"], r["tz"], r["limit_count"], r["end_at"], json.loads(r["options"]))
        for r in rows
    ] == [
        (i.key, i.job_id, i.name, i.next_at, i.count, i.every_ms, i.pattern, i.tz, i.limit,
         i.end_at, i.options)
        for i in listed
    ]  # fmt: skip
    assert len(rows) == 2


async def test_v_flow_dependencies_show_the_buckets_and_values_SQLR_3(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    children = [FlowJob("c", i, {"job_id": f"c{i}"}) for i in range(3)]
    children.append(FlowJob("c", 9, {"job_id": "c-ignored", "ignore_dependency_on_failure": True}))
    await pg_backend.flows.add_flow(FlowJob("parent", None, {"job_id": "p"}, queue_name, children))
    claimed = {job.id: job for job in await claim(pg_backend, queue_name, 4)}
    await pg_backend.runs.complete_job(queue_name, "c0", claimed["c0"].lock_token or "", {"v": 0})
    await pg_backend.runs.fail_job(
        queue_name, "c-ignored", claimed["c-ignored"].lock_token or "", "nope"
    )
    rows = await view_conn.fetch(
        "SELECT * FROM lane.v_flow_dependencies"
        " WHERE parent_queue = $1 AND parent_id = 'p' ORDER BY seq",
        queue_name,
    )
    by_bucket: dict[str, list[tuple[str, Any, str | None]]] = {}
    for r in rows:
        value = None if r["value"] is None else json.loads(r["value"])
        by_bucket.setdefault(r["bucket"], []).append((r["child_id"], value, r["reason"]))
    for kind in ("processed", "unprocessed", "failed", "ignored"):
        page = await pg_backend.flows.get_flow_dependency_page(queue_name, "p", kind, count=100)
        assert by_bucket.get(kind, []) == [(d.child.id, d.value, d.reason) for d in page.items]
    assert by_bucket["processed"] == [("c0", {"v": 0}, None)]
    assert [r["child_state"] for r in rows] == ["completed", "active", "active", "failed"]


async def test_v_events_reports_the_last_hours_failures_SQLR_4(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    jobs = await fill_queue(pg_backend, queue_name)
    events = await pg_backend.events.read_events(queue_name, limit=1000)
    rows = await view_conn.fetch(
        "SELECT * FROM lane.v_events WHERE queue = $1 ORDER BY id", queue_name
    )
    assert [(r["id"], r["event"], r["job_id"], json.loads(r["data"]), r["at"]) for r in rows] == [
        (e.id, e.event, e.job_id, e.data, e.created_at) for e in events
    ]
    failures = await view_conn.fetch(
        "SELECT job_id, prev, failed_reason FROM lane.v_events"
        " WHERE queue = $1 AND event = 'failed' AND at > now() - interval '1 hour'",
        queue_name,
    )
    assert [tuple(r) for r in failures] == [(jobs["failed"].id, "active", "boom")]


def percentile_cont(values: list[float], fraction: float) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def test_v_throughput_counts_and_percentiles_of_the_last_hour_SQLR_4(
    pg_backend: JobQueueBackend, view_conn: asyncpg.Connection, queue_name: str
) -> None:
    await fill_queue(pg_backend, queue_name)
    for job in await claim(pg_backend, queue_name, 3):
        await pg_backend.runs.complete_job(queue_name, job.id, job.lock_token or "", None)
    finished = (await pg_backend.reads.list_jobs(queue_name, ["completed", "failed"])).items
    assert len(finished) == 5
    # Known times, all finishing in the minute that began 5 minutes ago: job i waited
    # 100 * (i + 1) ms and ran 30 * (i + 1) ** 2 ms; the first one finished 2 hours
    # earlier, outside the window.
    waits, runs = [], []
    for i, job in enumerate(finished):
        wait, run = 100.0 * (i + 1), 30.0 * (i + 1) ** 2
        await view_conn.execute(
            "UPDATE lane.jobs SET available_at = t.at,"
            " processed_at = t.at + $3 * interval '1 ms',"
            " finished_at = t.at + ($3 + $4) * interval '1 ms'"
            " FROM (SELECT date_trunc('minute', now()) - interval '5 minutes'"
            "              - CASE WHEN $5 THEN interval '2 hours' ELSE interval '0' END AS at) t"
            " WHERE queue = $1 AND id = $2",
            queue_name, job.id, wait, run, i == 0,
        )  # fmt: skip
        if i > 0:
            waits.append(wait)
            runs.append(run)
    rows = await view_conn.fetch("SELECT * FROM lane.v_throughput WHERE queue = $1", queue_name)
    assert len(rows) == 1
    [row] = rows
    assert row["minute"] == await view_conn.fetchval(
        "SELECT date_trunc('minute', now()) - interval '5 minutes'"
    )
    recent = finished[1:]
    assert (row["completed"], row["failed"]) == (
        sum(j.state == "completed" for j in recent),
        sum(j.state == "failed" for j in recent),
    )
    for column, values in (("wait", waits), ("run", runs)):
        for p in (50, 95, 99):
            expected = percentile_cont(values, p / 100)
            assert row[f"{column}_p{p}_ms"] == pytest.approx(expected, abs=1e-6), (column, p)


# --------------------------------------------------------------------------- plans (SQLR-6)

QUEUES = 20
JOBS = 100_000
# 50 % completed, 25 % waiting, 10 % delayed, 8 % failed, 6 % waiting-children, 1 % active
# (a worker's concurrency, not a share of the history), spread over the last 10 hours.
_FILL = f"""
INSERT INTO lane.queues (name) SELECT 'rq' || g FROM generate_series(0, {QUEUES - 1}) g;
INSERT INTO lane.jobs (queue, id, name, data, state, order_key, created_at, available_at,
                       processed_at, finished_at, attempts_started, attempts_made,
                       failed_reason, lease_expires_at)
SELECT 'rq' || (g % {QUEUES}), 'r' || g, 'n', jsonb_build_object('i', g), s.state, g,
       t.at, t.at,
       CASE WHEN s.state IN ('active', 'completed', 'failed') THEN t.at + interval '2 s' END,
       CASE WHEN s.state IN ('completed', 'failed') THEN t.at + interval '3 s' END,
       CASE WHEN s.state IN ('active', 'completed', 'failed') THEN 1 ELSE 0 END,
       CASE WHEN s.state IN ('completed', 'failed') THEN 1 ELSE 0 END,
       CASE WHEN s.state = 'failed' THEN 'boom' END,
       CASE WHEN s.state = 'active' THEN now() + interval '1 minute' END
  FROM generate_series(1, {JOBS}) g
 CROSS JOIN LATERAL (SELECT now() - interval '10 hours' + g * interval '360 ms' AS at) t
 CROSS JOIN LATERAL (SELECT CASE WHEN (g / {QUEUES}) % 100 < 50 THEN 'completed'
                                 WHEN (g / {QUEUES}) % 100 < 75 THEN 'waiting'
                                 WHEN (g / {QUEUES}) % 100 < 85 THEN 'delayed'
                                 WHEN (g / {QUEUES}) % 100 < 93 THEN 'failed'
                                 WHEN (g / {QUEUES}) % 100 < 99 THEN 'waiting-children'
                                 ELSE 'active' END AS state) s;
INSERT INTO lane.failed_jobs (id, connection, queue, job_name, envelope_json, exception, failed_at)
SELECT gen_random_uuid(), 'default', queue, name, jsonb_build_object('id', id), 'boom', finished_at
  FROM lane.jobs WHERE state = 'failed';
INSERT INTO lane.events (queue, event, job_id, data, created_at)
SELECT queue, 'completed', id, '{{"prev": "active"}}', finished_at
  FROM lane.jobs WHERE state = 'completed';
UPDATE lane.jobs SET repeat_key = 'k' || id WHERE state = 'delayed';
INSERT INTO lane.repeat_schedulers (queue, key, job_id, job_key, name, every_ms)
SELECT queue, repeat_key, id, key, name, 60000 FROM lane.jobs WHERE state = 'delayed';
INSERT INTO lane.metrics (queue, state, minute, count)
SELECT 'rq' || q, s, date_trunc('minute', now()) - m * interval '1 minute', 10
  FROM generate_series(0, {QUEUES - 1}) q, generate_series(0, 599) m,
       unnest(ARRAY['completed', 'failed']) s;
"""

# Every view a report filters by queue, and how many rows of the queue's own it may read:
# its jobs, or (v_throughput) its jobs finished in the last hour.
PER_QUEUE_VIEWS = [
    "v_jobs", "v_queue_counts", "v_queue_stats", "v_throughput", "v_failed_jobs",
    "v_events", "v_terminal_metrics", "v_repeat_schedulers", "job_counts", "queue_stats",
    "waiting_age", "job_failures",
]  # fmt: skip


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def rows_read(plan: dict[str, Any]) -> dict[str, tuple[int, list[str]]]:
    """Per relation scanned: the rows its scans returned or filtered out, over all their
    loops, and the node types of those scans."""
    read: dict[str, tuple[int, list[str]]] = {}
    for node in plan_nodes(plan):
        relation = node.get("Relation Name")
        if relation is None:
            continue
        per_loop = (
            node["Actual Rows"]
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Index Recheck", 0)
        )
        total, kinds = read.get(relation, (0, []))
        read[relation] = (
            total + round(per_loop * node["Actual Loops"]),
            [*kinds, node["Node Type"]],
        )
    return read


async def explain(conn: asyncpg.Connection, sql: str, *args: object) -> dict[str, Any]:
    raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
    plan: dict[str, Any] = json.loads(raw)[0]["Plan"]
    return plan


@pytest_asyncio.fixture
async def big(new_db: NewDatabase) -> AsyncIterator[asyncpg.Connection]:
    dsn = await new_db()
    await migrate(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(_FILL)
        await conn.execute("ANALYZE")
        yield conn
    finally:
        await conn.close()


async def test_a_per_queue_filter_reads_that_queues_rows_not_the_table_SQLR_6(
    big: asyncpg.Connection,
) -> None:
    conn = big
    queue = "rq3"
    own = await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue)
    in_window = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state IN ('completed', 'failed')"
        " AND finished_at >= date_trunc('minute', now(), 'UTC') - interval '59 minutes'",
        queue,
    )
    active = await conn.fetchval("SELECT count(*) FROM lane.jobs WHERE state = 'active'")
    assert own == JOBS // QUEUES and 0 < in_window < own // 5 and active == JOBS // 100
    # Before: a count grouped over lane.jobs (the old lane.job_counts) reads every row.
    before = rows_read(
        await explain(
            conn,
            "SELECT * FROM (SELECT queue, state, count(*) FROM lane.jobs GROUP BY 1, 2) c"
            " WHERE queue = $1",
            queue,
        )
    )
    assert before["jobs"][0] == JOBS and "Seq Scan" in before["jobs"][1]
    report = {}
    for view in PER_QUEUE_VIEWS:
        read = rows_read(await explain(conn, f"SELECT * FROM lane.{view} WHERE queue = $1", queue))
        report[view] = read
        for relation, (_, kinds) in read.items():
            if relation != "queues":  # 20 rows: a seq scan is what it should get
                assert not any("Seq Scan" in kind for kind in kinds), (view, relation, kinds)
        # Its own rows, plus at most every active row (jobs_lease_idx has no queue column).
        bound = (in_window if view == "v_throughput" else own) + active
        assert read.get("jobs", (0, []))[0] <= bound, (view, read, bound)
    # The counting views read the queue's rows (and the active ones): not 100,000.
    assert report["v_queue_counts"]["jobs"][0] == own - own // 100 + active
    assert report["v_jobs"]["jobs"][0] == own - own // 100 + active
    assert report["v_throughput"]["jobs"][0] == in_window
    assert report["v_events"]["events"][0] == own // 2  # the queue's completed events
    assert report["v_terminal_metrics"]["metrics"][0] == 1200  # its 600 minutes x 2 states
    assert report["v_repeat_schedulers"]["repeat_schedulers"][0] == own // 10  # its delayed

    # The optional GIN index of docs/sql.md: a containment filter on data, across every
    # queue and state, reads the matching rows through it instead of the whole table.
    contains = "SELECT id FROM lane.v_jobs WHERE data @> $1::jsonb"
    assert rows_read(await explain(conn, contains, '{"i": 4242}'))["jobs"][0] >= JOBS // 2
    await conn.execute("CREATE INDEX jobs_data_idx ON lane.jobs USING gin (data jsonb_path_ops)")
    await conn.execute("ANALYZE lane.jobs")
    with_index = rows_read(await explain(conn, contains, '{"i": 4242}'))
    assert with_index["jobs"][0] <= 6 and "Bitmap Heap Scan" in with_index["jobs"][1]
    assert await conn.fetch(contains, '{"i": 4242}') == [("r4242",)]


def as_user(dsn: str, user: str) -> str:
    """``dsn`` with another user (no password: the test server trusts local users)."""
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


async def test_the_reader_role_selects_the_views_and_nothing_else_SQLR_5(
    pg_dsn: str, view_conn: asyncpg.Connection
) -> None:
    suffix = uuid.uuid4().hex[:8]
    reader, login = f"lane_reader_{suffix}", f"lane_login_{suffix}"
    views = [
        r["relname"]
        for r in await view_conn.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = 'lane'::regnamespace"
            " AND relkind = 'v' AND relname LIKE 'v\\_%' ORDER BY 1"
        )
    ]
    assert views == [
        "v_batches", "v_events", "v_failed_jobs", "v_flow_dependencies", "v_jobs",
        "v_queue_counts", "v_queue_stats", "v_repeat_schedulers", "v_terminal_metrics",
        "v_throughput",
    ]  # fmt: skip
    try:
        assert await view_conn.fetchval("SELECT lane.create_reader_role($1)", reader) == reader
        assert await view_conn.fetchval("SELECT lane.create_reader_role($1)", reader) == reader
        assert not await view_conn.fetchval(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", reader
        )
        await view_conn.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE "{reader}"')
        as_reader = await asyncpg.connect(as_user(pg_dsn, login))
        try:
            for view in views:
                await as_reader.fetch(f"SELECT * FROM lane.{view} LIMIT 1")
            for sql in (
                "SELECT count(*) FROM lane.jobs",
                "SELECT count(*) FROM lane.job_counts",
                "SELECT lane.add_job('reader_q', 'n', '{}'::jsonb)",
                "SELECT lane.pause_queue('reader_q')",
            ):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await as_reader.fetch(sql)
        finally:
            await as_reader.close()
    finally:
        for role in (login, reader):
            if await view_conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await view_conn.execute(f'DROP OWNED BY "{role}"')
                await view_conn.execute(f'DROP ROLE "{role}"')
