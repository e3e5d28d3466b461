"""Terminal metrics and the live event stream under real concurrency (OBS-6, EVS-7).

Workers of one queue complete on their own connections at once, while the maintenance
pass compacts: every completion is counted once. A subscriber never skips an event whose
transaction commits after a later id's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest_asyncio

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec, QueueEvent
from tests.helpers import eventually
from tests.postgres.conftest import refused

WORKERS = 8
JOBS = 1600
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


@pytest_asyncio.fixture
async def backend(pg_dsn: str, queue_name: str) -> AsyncIterator[PostgresBackend]:
    backend = await PostgresBackend.connect(pg_dsn, min_size=2, max_size=4)
    try:
        yield backend
    finally:
        async with backend.pool.acquire() as conn:
            for table, column in (("jobs", "queue"), ("events", "queue"), ("metrics", "queue")):
                await conn.execute(f"DELETE FROM lane.{table} WHERE {column} = $1", queue_name)
        await backend.close()


async def test_eight_connections_completing_one_queue_are_all_counted_OBS_6(
    backend: PostgresBackend, pg_dsn: str, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("m")] * JOBS)
    stop = asyncio.Event()

    async def worker(n: int) -> int:
        conn = await asyncpg.connect(pg_dsn)
        done = 0
        try:
            while True:
                jobs = await conn.fetch(
                    "SELECT queue, id, lock_token FROM lane.claim_jobs($1, ARRAY[$2],"
                    " ARRAY[25], 60000)",
                    f"w{n}",
                    queue_name,
                )
                if not jobs:
                    return done
                rows = await conn.fetch(
                    "SELECT status FROM lane.complete_jobs($1::text[], $2::text[], $3::uuid[],"
                    " $4::jsonb[])",
                    [j["queue"] for j in jobs],
                    [j["id"] for j in jobs],
                    [j["lock_token"] for j in jobs],
                    ["null"] * len(jobs),
                )
                done += sum(row["status"] == "ok" for row in rows)
        finally:
            await conn.close()

    async def compactor() -> None:
        # Every pass treats the current minute as closed: the rows the workers write to
        # are folded while they write (SKIP LOCKED leaves the held ones for later).
        while not stop.is_set():
            await backend.compact_metrics(now=FAR_FUTURE)
            await asyncio.sleep(0.005)

    compacting = asyncio.ensure_future(compactor())
    counts = await asyncio.gather(*(worker(n) for n in range(WORKERS)))
    stop.set()
    await compacting
    assert sum(counts) == JOBS
    assert (await backend.get_metrics(queue_name, "completed")).count == JOBS
    async with backend.pool.acquire() as conn:
        rows = await conn.fetchval("SELECT count(*) FROM lane.metrics WHERE queue = $1", queue_name)
    assert rows >= 1


async def follow_from_here(
    backend: PostgresBackend, queue: str, poll_interval: float
) -> tuple[int, list[QueueEvent], asyncio.Future[None]]:
    """The queue's last event id after one add, and a running subscriber after it that
    collects into the list (cancel the future to stop it)."""
    await backend.add_job(queue, "first")
    start = (await backend.read_events(queue))[-1].id
    received: list[QueueEvent] = []

    async def follow() -> None:
        async for event in backend.subscribe_events(queue, start, poll_interval=poll_interval):
            received.append(event)

    return start, received, asyncio.ensure_future(follow())


async def test_an_event_committed_late_is_not_overtaken_EVS_7(
    backend: PostgresBackend, pg_dsn: str, queue_name: str
) -> None:
    start, received, following = await follow_from_here(backend, queue_name, 0.02)

    slow = await asyncpg.connect(pg_dsn)
    try:
        async with slow.transaction():
            await slow.execute("SELECT lane.add_job($1, 'slow', '{}'::jsonb)", queue_name)
            await backend.add_job(queue_name, "fast")  # higher ids, committed first
            await asyncio.sleep(0.5)
            assert received == []  # the fast events wait for the slow transaction
        await eventually(lambda: len(received) >= 4)
    finally:
        await slow.close()
        following.cancel()
    stored = await backend.read_events(queue_name, start + 1)
    assert [e.id for e in received] == [e.id for e in stored]
    assert [e.data.get("name") for e in received if e.event == "added"] == ["slow", "fast"]


async def test_eight_writers_none_missed_EVS_7(
    backend: PostgresBackend, pg_dsn: str, queue_name: str
) -> None:
    start, received, following = await follow_from_here(backend, queue_name, 0.01)

    async def writer() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            for _ in range(50):
                await conn.execute("SELECT lane.add_job($1, 'w', '{}'::jsonb)", queue_name)
        finally:
            await conn.close()

    try:
        await asyncio.gather(*(writer() for _ in range(WORKERS)))
        await eventually(lambda: len(received) >= WORKERS * 50 * 2)
    finally:
        following.cancel()
    stored = await backend.read_events(queue_name, start + 1, "+", 10_000)
    assert [e.id for e in received] == [e.id for e in stored]


async def test_sql_refuses_bad_metrics_arguments_OBS_6(conn: asyncpg.Connection) -> None:
    message = await refused(conn, "LN003", "SELECT * FROM lane.get_metrics('q', 'waiting')")
    assert "completed and failed" in message
    await refused(conn, "LN003", "SELECT * FROM lane.get_metrics('q', 'completed', 0, -1, 0)")
    await refused(conn, "LN003", "SELECT * FROM lane.get_metrics('q', 'completed', NULL)")
    await refused(conn, "LN003", "SELECT lane.compact_metrics(0)")
