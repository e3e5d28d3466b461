"""Claim limits under real concurrency, their locking and their wake-ups (RATE, CLAIM-3/9).

The concurrency tests run claimers on connections of their own against the real clock and
check the stored claim times afterwards (``processed_at``, ``finished_at``): no window of
the limit's length holds more claims than the limit, and no instant more active jobs than
``max_active``. Nothing in them asserts a duration.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import pytest

from lane_pg import JobRateLimit, JobSpec
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand
from tests.helpers import eventually
from tests.postgres.test_wakeup_sql import CHANNEL, Wakeups

LEASE_MS = 30_000
CLAIM = "SELECT id FROM lane.claim_jobs($1, ARRAY[$2], ARRAY[$3::int], 30000, NULL, NULL, $4, $5)"


@pytest.fixture
async def wakeups(pg_dsn: str) -> AsyncIterator[Wakeups]:
    listening = await asyncpg.connect(pg_dsn)
    writer = await asyncpg.connect(pg_dsn)
    watcher = Wakeups(listening, writer)
    await listening.add_listener(CHANNEL, watcher.on_notify)
    try:
        yield watcher
    finally:
        await listening.close()
        await writer.close()


async def _fill(conn: asyncpg.Connection, queue: str, n: int) -> None:
    await conn.execute(
        "SELECT cardinality(b.ids) FROM lane.add_jobs_brief($1,"
        " array_fill('n'::text, ARRAY[$2::int]), array_fill('{}'::jsonb, ARRAY[$2::int]), NULL) b",
        queue,
        n,
    )


def _most_in_any_window(times: list[datetime], window: timedelta) -> int:
    """The most claims in one window [t, t + window) over every start t (a claim time)."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, moment in enumerate(ordered):
        while ordered[first] <= moment - window:
            first += 1
        most = max(most, last - first + 1)
    return most


def _most_overlapping(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals [start, end) open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = open_now = 0
    for _, step in edges:  # an end sorts before a start at the same instant (-1 < 1)
        open_now += step
        most = max(most, open_now)
    return most


async def test_concurrent_claimers_never_exceed_the_rate_in_any_window_RATE_1(
    pg_dsn: str, queue_name: str
) -> None:
    """Four connections claim as fast as they can for ~1.2 s under 5 per 300 ms."""
    limit, window = 5, timedelta(milliseconds=300)
    setup = await asyncpg.connect(pg_dsn)
    try:
        await _fill(setup, queue_name, 200)
        await setup.execute("SELECT lane.set_claim_rate_limit($1, $2, $3)", queue_name, limit, 300)
        stop = asyncio.Event()

        async def claimer() -> int:
            conn = await asyncpg.connect(pg_dsn)
            got = 0
            try:
                while not stop.is_set():
                    rows = await conn.fetch(
                        CLAIM, f"w{uuid.uuid4().hex[:4]}", queue_name, 3, None, None
                    )
                    got += len(rows)
            finally:
                await conn.close()
            return got

        tasks = [asyncio.create_task(claimer()) for _ in range(4)]
        await asyncio.sleep(1.2)  # how long to drive load, not an assertion
        stop.set()
        claimed = sum(await asyncio.gather(*tasks))
        times = [
            row[0]
            for row in await setup.fetch(
                "SELECT processed_at FROM lane.jobs WHERE queue = $1 AND state = 'active'",
                queue_name,
            )
        ]
    finally:
        await setup.close()
    assert len(times) == claimed
    assert claimed >= 2 * limit  # it kept claiming over several windows
    assert _most_in_any_window(times, window) <= limit


async def test_two_workers_share_a_local_limit_RATE_1(pg_dsn: str, queue_name: str) -> None:
    """Two backends (pools) claiming with the same worker-local limit 2 per 400 ms."""
    limit = JobRateLimit(2, 0.4)
    a = await PostgresBackend.connect(pg_dsn, max_size=2)
    b = await PostgresBackend.connect(pg_dsn, max_size=2)
    try:
        await a.add_jobs(queue_name, [JobSpec("n") for _ in range(40)])
        stop = asyncio.Event()

        async def claimer(backend: PostgresBackend, worker: str) -> None:
            while not stop.is_set():
                got = await backend.claim_jobs(
                    worker, [QueueDemand(queue_name, 2)], 30, rate_limit=limit
                )
                if not got:
                    wait = await backend.next_claim_in([queue_name], limit)
                    await asyncio.sleep(min(wait.total_seconds() if wait else 0.05, 0.05))

        tasks = [asyncio.create_task(claimer(a, "a")), asyncio.create_task(claimer(b, "b"))]
        await asyncio.sleep(1.3)
        stop.set()
        await asyncio.gather(*tasks)
        page = await a.list_jobs(queue_name, ["active"], limit=100)
    finally:
        await a.close()
        await b.close()
    times = [job.processed_at for job in page.items if job.processed_at is not None]
    # Both claimers ask in every window, so unshared limits would let 4 through a window;
    # which of them wins a window is not the limit's business (one took every window in
    # a clean-clone run, so "both claimed" is not asserted).
    assert len(times) >= 4
    assert _most_in_any_window(times, timedelta(milliseconds=400)) <= 2


async def test_concurrent_claimers_never_exceed_max_active_RATE_7(
    pg_dsn: str, queue_name: str
) -> None:
    """Six connections claim, hold their jobs a random moment, and complete them, under
    max_active 3; the stored [processed_at, finished_at) intervals never overlap more
    than 3 deep, and every claimer's own count of active rows stays within 3."""
    setup = await asyncpg.connect(pg_dsn)
    seen_active: list[int] = []
    try:
        await _fill(setup, queue_name, 120)
        await setup.execute("SELECT lane.set_max_active_jobs($1, 3)", queue_name)

        async def claimer(seed: int) -> None:
            rng = random.Random(seed)
            conn = await asyncpg.connect(pg_dsn)
            try:
                while True:
                    rows = await conn.fetch(
                        "SELECT id, lock_token FROM lane.claim_jobs($1, ARRAY[$2], ARRAY[2],"
                        " 30000)",
                        f"w{seed}",
                        queue_name,
                    )
                    if not rows:
                        left = await conn.fetchval(
                            "SELECT count(*) FROM lane.jobs WHERE queue = $1"
                            " AND state IN ('waiting', 'active')",
                            queue_name,
                        )
                        if left == 0:
                            return
                        await asyncio.sleep(0.001)
                        continue
                    seen_active.append(
                        await conn.fetchval(
                            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state = 'active'",
                            queue_name,
                        )
                    )
                    await asyncio.sleep(rng.random() * 0.01)  # hold the jobs a moment
                    await conn.execute(
                        "SELECT lane.complete_jobs(array_fill($1::text, ARRAY[$4::int]),"
                        " $2::text[], $3::uuid[], array_fill('null'::jsonb, ARRAY[$4::int]))",
                        queue_name,
                        [row["id"] for row in rows],
                        [row["lock_token"] for row in rows],
                        len(rows),
                    )
            finally:
                await conn.close()

        await asyncio.wait_for(asyncio.gather(*(claimer(seed) for seed in range(6))), 60)
        intervals = [
            (row["processed_at"], row["finished_at"])
            for row in await setup.fetch(
                "SELECT processed_at, finished_at FROM lane.jobs WHERE queue = $1", queue_name
            )
        ]
    finally:
        await setup.close()
    assert len(intervals) == 120 and all(end is not None for _, end in intervals)
    assert max(seen_active) <= 3
    assert _most_overlapping(intervals) <= 3
    assert _most_overlapping(intervals) == 3  # the ceiling was reached, so it was tested


async def test_a_claim_on_a_maxed_queue_sends_no_notify_CLAIM_3(
    wakeups: Wakeups, queue_name: str
) -> None:
    conn = wakeups.writer
    await _fill(conn, queue_name, 1)
    await conn.execute("SELECT lane.set_max_active_jobs($1, 1)", queue_name)
    await conn.fetch(CLAIM, "w", queue_name, 1, None, None)
    await conn.execute(
        "SELECT lane.add_job($1, 'd', '{}', '{\"delay_ms\": 1}')", queue_name
    )  # due at once
    await asyncio.sleep(0.01)  # let its 1 ms pass (the claim reads the database clock)
    claim = conn.fetch(CLAIM, "w", queue_name, 1, None, None)
    assert await wakeups.woke(queue_name, claim) == 0
    state = await conn.fetchval(
        "SELECT state FROM lane.jobs WHERE queue = $1 AND name = 'd'", queue_name
    )
    assert state == "waiting"  # promoted (CLAIM-2), yet nobody was woken


async def test_a_finish_on_a_maxed_queue_wakes_claimers_CLAIM_9(
    wakeups: Wakeups, queue_name: str
) -> None:
    conn = wakeups.writer
    await _fill(conn, queue_name, 3)
    await conn.execute("SELECT lane.set_max_active_jobs($1, 1)", queue_name)
    (job,) = await conn.fetch(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    complete = conn.fetch(
        "SELECT lane.complete_job($1, $2, $3)", queue_name, job["id"], job["lock_token"]
    )
    assert await wakeups.woke(queue_name, complete) == 1


async def test_a_finish_on_a_queue_without_max_active_sends_nothing_CLAIM_9(
    wakeups: Wakeups, queue_name: str
) -> None:
    conn = wakeups.writer
    await _fill(conn, queue_name, 3)
    (job,) = await conn.fetch(
        "SELECT id, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)", queue_name
    )
    complete = conn.fetch(
        "SELECT lane.complete_job($1, $2, $3)", queue_name, job["id"], job["lock_token"]
    )
    assert await wakeups.woke(queue_name, complete) == 0


async def test_only_limited_claims_lock_the_queue_row(pg_dsn: str, queue_name: str) -> None:
    """DESIGN.md: the queue-row lock made one queue's workers take turns (-30 % with 4);
    an unlimited claim must not take it, a limited one must."""
    holder = await asyncpg.connect(pg_dsn)
    claimer = await asyncpg.connect(pg_dsn)
    try:
        await _fill(holder, queue_name, 4)
        await claimer.execute("SET lock_timeout = '200ms'")
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM lane.queues WHERE name = $1 FOR UPDATE", queue_name)
            assert len(await claimer.fetch(CLAIM, "w", queue_name, 1, None, None)) == 1
            with pytest.raises(asyncpg.LockNotAvailableError):
                await claimer.fetch(CLAIM, "w", queue_name, 1, 5, 1000)  # worker-local limit
        await holder.execute("SELECT lane.set_max_active_jobs($1, 10)", queue_name)
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM lane.queues WHERE name = $1 FOR UPDATE", queue_name)
            with pytest.raises(asyncpg.LockNotAvailableError):
                await claimer.fetch(CLAIM, "w", queue_name, 1, None, None)  # max_active
    finally:
        await holder.close()
        await claimer.close()


@pytest.mark.parametrize(("rate_max", "duration_ms"), [(0, 1000), (5, None), (None, 1000), (5, 0)])
async def test_bad_local_limits_are_refused_by_the_claim_RATE_1(
    pg_dsn: str, queue_name: str, rate_max: int | None, duration_ms: int | None
) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _fill(conn, queue_name, 1)
        with pytest.raises(asyncpg.PostgresError, match="rate limit"):
            await conn.fetch(CLAIM, "w", queue_name, 1, rate_max, duration_ms)
        with pytest.raises(asyncpg.PostgresError, match="rate limit"):
            await conn.execute(
                "SELECT lane.set_claim_rate_limit($1, $2, $3)", queue_name, rate_max, duration_ms
            )
        with pytest.raises(asyncpg.PostgresError, match="rate limit"):
            await conn.execute("SELECT lane.set_claim_rate_limit($1, 5, $2)", queue_name, 2**31)
        waiting = await conn.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND state = 'waiting'", queue_name
        )
        limit = await conn.fetchval("SELECT rate_max FROM lane.queues WHERE name = $1", queue_name)
    finally:
        await conn.close()
    assert (waiting, limit) == (1, None)  # refused: nothing claimed, nothing stored


async def test_the_claim_log_is_trimmed_by_later_claims(pg_dsn: str, queue_name: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _fill(conn, queue_name, 10)
        await conn.execute("SELECT lane.set_claim_rate_limit($1, 1, 1000)", queue_name)
        base = await conn.fetchval("SELECT clock_timestamp()")
        for step in range(5):
            await conn.fetch(
                "SELECT id FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000, NULL, $2)",
                queue_name,
                base + timedelta(seconds=2 * step),
            )
        rows = await conn.fetchval(
            "SELECT count(*) FROM lane.claim_log WHERE queue = $1", queue_name
        )
    finally:
        await conn.close()
    assert rows == 1  # each claim deleted the one before it, older than its window


async def test_claims_listing_limited_queues_in_opposite_orders_do_not_deadlock(
    pg_dsn: str, queue_name: str
) -> None:
    """T1 holds queue a (an open claim), T2 claims [b, a], then T1 claims b. Locking one
    row at a time, T2 would hold b waiting for a while T1 waits for b: a deadlock. The
    claim locks every limited queue it may visit in name order, so T2 waits holding none."""
    first, second = sorted([queue_name, f"{queue_name}_b"])
    one = await asyncpg.connect(pg_dsn)
    two = await asyncpg.connect(pg_dsn)
    try:
        for queue in (first, second):
            await _fill(one, queue, 2)
            await one.execute("SELECT lane.set_max_active_jobs($1, 5)", queue)
        pid_two = await two.fetchval("SELECT pg_backend_pid()")
        claim_many = "SELECT id FROM lane.claim_jobs('w', $1::text[], ARRAY[1, 1], 30000)"
        async with one.transaction():
            await one.fetch(CLAIM, "w", first, 1, None, None)
            waiting = asyncio.create_task(two.fetch(claim_many, [second, first]))

            async def two_waits_for_a_lock() -> bool:
                kind = await one.fetchval(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid_two
                )
                return kind == "Lock"

            await eventually(two_waits_for_a_lock, timeout=10)
            assert len(await one.fetch(CLAIM, "w", second, 1, None, None)) == 1
        assert len(await asyncio.wait_for(waiting, 10)) == 2  # then T2 claimed from both
    finally:
        await one.close()
        await two.close()


@pytest.mark.parametrize("move", ["retry to delayed", "delay_job"])
async def test_a_slot_freed_into_delayed_wakes_maxed_claimers_CLAIM_9(
    wakeups: Wakeups, queue_name: str, move: str
) -> None:
    """A run that leaves active for delayed (a retry with backoff, delay_job) frees its slot
    as a completion does: claimers held back by max_active are woken, not left to their
    poll. An earlier delayed job keeps lane._wake_for_due quiet, so the NOTIFY counted
    is the freed slot's."""
    conn = wakeups.writer
    await conn.execute(
        "SELECT lane.add_job($1, 'first', '{}',"
        ' \'{"attempts": 2, "backoff": {"type": "fixed", "delay_ms": 60000}}\')',
        queue_name,
    )
    await _fill(conn, queue_name, 3)
    await conn.execute("SELECT lane.add_job($1, 'later', '{}', '{\"delay_ms\": 1000}')", queue_name)
    await conn.execute("SELECT lane.set_max_active_jobs($1, 1)", queue_name)
    (job,) = await conn.fetch(
        "SELECT id, name, lock_token FROM lane.claim_jobs('w', ARRAY[$1], ARRAY[1], 30000)",
        queue_name,
    )
    assert job["name"] == "first"
    if move == "delay_job":
        call = conn.fetch(
            "SELECT lane.delay_job($1, $2, $3, 60000)", queue_name, job["id"], job["lock_token"]
        )
    else:
        call = conn.fetch(
            "SELECT lane.fail_job($1, $2, $3, 'busy')", queue_name, job["id"], job["lock_token"]
        )
    assert await wakeups.woke(queue_name, call) == 1
    state = await conn.fetchval(
        "SELECT state FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, job["id"]
    )
    assert state == "delayed"
