"""The ``locks`` handle (MW-3..6, MW-10) and ``runs.discard_job`` (MW-2) on every backend,
and, on PostgreSQL, real connections racing for one lock and one limiter."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, JobNotFound, LockMismatch, ValidationError
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobOptions, JobRow, JobSpec, QueueDemand
from tests.conformance.test_finish import claim_all, other_token, token
from tests.helpers import Clock, eventually, job_event_list


def _key(queue: str, name: str = "k") -> str:
    """Keys are global to a backend: a test's own, by its queue's unique name."""
    return f"{name}:{queue}"


async def _two_runs(
    backend: JobQueueBackend, queue: str, clock: Clock, lease: float = 30
) -> tuple[JobRow, JobRow]:
    await backend.add_job(queue, "n", now=clock.at(0))
    await backend.add_job(queue, "n", now=clock.at(0))
    first, second = await claim_all(backend, queue, clock, 1, 2, lease=lease)
    return first, second


# ------------------------------------------------------------------------------ locks


async def test_a_lock_has_one_holder_until_it_is_released_MW_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first, second = await _two_runs(backend, queue_name, clock)
    key, locks = _key(queue_name), backend.locks

    assert await locks.acquire_lock(key, queue_name, first.id, token(first), 60, now=clock.at(2))
    assert not await locks.acquire_lock(
        key, queue_name, second.id, token(second), 60, now=clock.at(3)
    )
    # Re-entrant for its holder (its expiry renewed); a release by another run is refused.
    assert await locks.acquire_lock(key, queue_name, first.id, token(first), 60, now=clock.at(4))
    assert not await locks.release_lock(key, queue_name, second.id, token(second))
    assert not await locks.release_lock(key, queue_name, first.id, other_token())

    assert await locks.release_lock(key, queue_name, first.id, token(first))
    assert not await locks.release_lock(key, queue_name, first.id, token(first))
    assert await locks.acquire_lock(key, queue_name, second.id, token(second), 60, now=clock.at(5))


async def test_an_expired_lock_is_free_MW_4(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first, second = await _two_runs(backend, queue_name, clock)
    key, locks = _key(queue_name), backend.locks
    assert await locks.acquire_lock(key, queue_name, first.id, token(first), 5, now=clock.at(2))

    assert not await locks.acquire_lock(
        key, queue_name, second.id, token(second), 5, now=clock.at(6.999)
    )
    assert await locks.acquire_lock(key, queue_name, second.id, token(second), 5, now=clock.at(7))
    # The first run's late release cannot free the lock its successor holds.
    assert not await locks.release_lock(key, queue_name, first.id, token(first))


async def test_a_lock_ends_with_its_holders_run_MW_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    """A run that is over (completed here; a dead worker's job recovered by stalled
    recovery below) holds nothing, whatever the lock's expiry says."""
    first, second = await _two_runs(backend, queue_name, clock)
    key, locks = _key(queue_name), backend.locks
    assert await locks.acquire_lock(key, queue_name, first.id, token(first), 3600, now=clock.at(2))
    await backend.complete_job(queue_name, first.id, token(first), now=clock.at(3))

    assert await locks.acquire_lock(
        key, queue_name, second.id, token(second), 3600, now=clock.at(4)
    )


async def test_a_dead_workers_lock_ends_at_stalled_recovery_MW_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    await backend.add_job(queue_name, "n", now=clock.at(0))
    [dead] = await claim_all(backend, queue_name, clock, 1, lease=5)
    key, locks = _key(queue_name), backend.locks
    assert await locks.acquire_lock(key, queue_name, dead.id, token(dead), 3600, now=clock.at(2))
    await backend.add_job(queue_name, "n", now=clock.at(3))
    [other] = await claim_all(backend, queue_name, clock, 4)
    assert not await locks.acquire_lock(
        key, queue_name, other.id, token(other), 60, now=clock.at(5)
    )

    await backend.recover_stalled(now=clock.at(10))

    assert await locks.acquire_lock(key, queue_name, other.id, token(other), 60, now=clock.at(11))


async def test_acquire_refusals_change_nothing_MW_3(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    first, second = await _two_runs(backend, queue_name, clock)
    key, locks = _key(queue_name), backend.locks
    with pytest.raises(LockMismatch):
        await locks.acquire_lock(key, queue_name, first.id, other_token(), 60, now=clock.at(2))
    with pytest.raises(JobNotFound):
        await locks.acquire_lock(key, queue_name, "missing", token(first), 60, now=clock.at(2))
    with pytest.raises(ValidationError):
        await locks.acquire_lock("", queue_name, first.id, token(first), 60, now=clock.at(2))
    with pytest.raises(InvalidOptions):
        await locks.acquire_lock(key, queue_name, first.id, token(first), 0, now=clock.at(2))
    # Nothing was taken by the refused calls.
    assert await locks.acquire_lock(key, queue_name, second.id, token(second), 60, now=clock.at(3))


# ------------------------------------------------------------------------- rate limits


async def test_a_rate_limit_grants_its_budget_per_window_MW_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    key, locks = _key(queue_name, "rate"), backend.locks
    for second in range(3):
        assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(second)) is None

    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(10)) == timedelta(seconds=50)
    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(59.9995)) == timedelta(
        milliseconds=1
    )
    # The window ends 60 s after its first hit; the next hit starts a new one.
    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(60)) is None
    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(61)) is None
    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(62)) is None
    assert await locks.hit_rate_limit(key, 3, 60, now=clock.at(63)) == timedelta(seconds=57)
    # Another key has its own budget.
    assert await locks.hit_rate_limit(f"{key}:b", 3, 60, now=clock.at(63)) is None


async def test_rate_limit_refusals_change_nothing_MW_5(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    key, locks = _key(queue_name, "rate"), backend.locks
    with pytest.raises(InvalidOptions):
        await locks.hit_rate_limit(key, 0, 60, now=clock.at(0))
    with pytest.raises(InvalidOptions):
        await locks.hit_rate_limit(key, 1, 0, now=clock.at(0))
    with pytest.raises(ValidationError):
        await locks.hit_rate_limit("", 1, 60, now=clock.at(0))
    assert await locks.hit_rate_limit(key, 1, 60, now=clock.at(1)) is None


# --------------------------------------------------------------------------- throttles


async def test_a_throttle_opens_at_consecutive_failures_MW_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    key, locks = _key(queue_name, "throttle"), backend.locks
    assert await locks.check_throttle(key, now=clock.at(0)) is None
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(1))
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(2))
    # A success in between resets the count: failures must be consecutive.
    assert not await locks.record_throttle_outcome(key, False, 3, 60, now=clock.at(3))
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(4))
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(5))
    assert await locks.check_throttle(key, now=clock.at(5)) is None

    assert await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(6))

    assert await locks.check_throttle(key, now=clock.at(6)) == timedelta(seconds=60)
    assert await locks.check_throttle(key, now=clock.at(65.5)) == timedelta(milliseconds=500)
    assert await locks.check_throttle(key, now=clock.at(66)) is None
    # The count started again: three more failures in a row to open it again.
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(67))
    assert not await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(68))
    assert await locks.record_throttle_outcome(key, True, 3, 60, now=clock.at(69))


async def test_a_throttle_of_one_opens_at_the_first_failure_MW_6(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    key, locks = _key(queue_name, "throttle"), backend.locks
    assert not await locks.record_throttle_outcome(key, False, 1, 10, now=clock.at(0))
    assert await locks.record_throttle_outcome(key, True, 1, 10, now=clock.at(1))
    assert await locks.check_throttle(key, now=clock.at(2)) == timedelta(seconds=9)
    with pytest.raises(InvalidOptions):
        await locks.record_throttle_outcome(key, True, 0, 10, now=clock.at(3))
    assert await locks.check_throttle(key, now=clock.at(3)) == timedelta(seconds=8)


# ------------------------------------------------------------------------ discard_job


async def test_discard_removes_the_claimed_job_without_a_failure_MW_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", None, JobOptions(attempts=3), now=clock.at(0))
    [active] = await claim_all(backend, queue_name, clock, 1)
    events_before = await job_event_list(backend, queue_name, added.id)

    await backend.runs.discard_job(queue_name, added.id, token(active), now=clock.at(2))

    assert await backend.get_job(queue_name, added.id) is None
    assert (await job_event_list(backend, queue_name, added.id))[len(events_before) :] == [
        ("removed", {"prev": "active"})
    ]
    assert await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30, now=clock.at(3)) == []


async def test_discard_refusals_change_nothing_MW_2(
    backend: JobQueueBackend, queue_name: str, clock: Clock
) -> None:
    added = await backend.add_job(queue_name, "n", now=clock.at(0))
    with pytest.raises(LockMismatch):  # waiting, not held
        await backend.runs.discard_job(queue_name, added.id, other_token(), now=clock.at(1))
    [active] = await claim_all(backend, queue_name, clock, 1)
    with pytest.raises(LockMismatch):
        await backend.runs.discard_job(queue_name, added.id, other_token(), now=clock.at(2))
    with pytest.raises(JobNotFound):
        await backend.runs.discard_job(queue_name, "missing", token(active), now=clock.at(2))
    stored = await backend.get_job(queue_name, added.id)
    assert stored is not None and (stored.state, stored.lock_token) == ("active", token(active))


# --------------------------------------------------- PostgreSQL: real concurrent callers

RACERS = 12


@contextlib.asynccontextmanager
async def _held(pg_dsn: str, table: str, key: str) -> AsyncIterator[None]:
    """Hold ``key``'s row of ``table`` locked while the racers start, until every one of
    them waits for a lock, then let them all go at once: the calls overlap for certain, not
    by luck of timing. Each xdist worker has a database of its own, so the waiters are
    ours."""
    blocker = await asyncpg.connect(pg_dsn)
    try:
        async with blocker.transaction():
            await blocker.execute(f"SELECT FROM lane.{table} WHERE key = $1 FOR UPDATE", key)
            yield
            await eventually(
                lambda: _waiting_for_locks(blocker, RACERS), timeout=10, interval=0.005
            )
    finally:
        await blocker.close()


async def _waiting_for_locks(conn: asyncpg.Connection, count: int) -> bool:
    waiting = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return bool(waiting >= count)


async def test_concurrent_hits_get_exactly_the_budget_on_postgres_MW_5(
    pg_dsn: str, queue_name: str
) -> None:
    backend = await PostgresBackend.connect(pg_dsn, min_size=RACERS, max_size=RACERS)
    key = _key(queue_name, "rate")
    try:
        await backend.locks.hit_rate_limit(key, 5, 3600)  # the row exists, to be held
        await _reset_window(pg_dsn, key)
        async with _held(pg_dsn, "limiters", key):
            racers = [
                asyncio.create_task(backend.locks.hit_rate_limit(key, 5, 3600))
                for _ in range(RACERS)
            ]
        results = await asyncio.gather(*racers)
    finally:
        await backend.close()
    assert sum(result is None for result in results) == 5


async def _reset_window(pg_dsn: str, key: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(
            "UPDATE lane.limiters SET window_start = now() - interval '2 hours' WHERE key = $1",
            key,
        )
    finally:
        await conn.close()


async def test_concurrent_runs_take_a_lock_once_on_postgres_MW_3(
    pg_dsn: str, queue_name: str
) -> None:
    backend = await PostgresBackend.connect(pg_dsn, min_size=RACERS, max_size=RACERS)
    key = _key(queue_name)
    try:
        await backend.add_jobs(queue_name, [JobSpec("n") for _ in range(RACERS + 1)])
        runs = await backend.claim_jobs("w", [QueueDemand(queue_name, RACERS + 1)], 60)
        over, racing = runs[0], runs[1:]
        # A row to hold first: taken by a run that then ends, so it is free to take.
        assert await backend.locks.acquire_lock(key, queue_name, over.id, token(over), 60)
        await backend.complete_job(queue_name, over.id, token(over))
        async with _held(pg_dsn, "locks", key):
            racers = [
                asyncio.create_task(
                    backend.locks.acquire_lock(key, queue_name, run.id, token(run), 60)
                )
                for run in racing
            ]
        results = await asyncio.gather(*racers)
    finally:
        await backend.close()
    assert sum(results) == 1


async def test_a_run_claimed_after_a_racer_began_still_keeps_its_lock_on_postgres_MW_3(
    pg_dsn: str, queue_name: str
) -> None:
    """The race two workers met: run B asks for a free key (its holder's run ended) while
    run A, claimed in a transaction that has not committed yet, takes the key first. B's
    statement began before A's claim committed, so a check of A's run read with B's
    statement snapshot found A not active and B took the key from A: two runs held it
    at once. B must see A as the holder once A committed, and be refused."""
    backend = await PostgresBackend.connect(pg_dsn, min_size=2, max_size=2)
    key = _key(queue_name)
    claimer = await asyncpg.connect(pg_dsn)
    try:
        await backend.add_jobs(queue_name, [JobSpec("n") for _ in range(3)])
        over, b = await backend.claim_jobs("w", [QueueDemand(queue_name, 2)], 60)
        # The key's row exists, held by a run that ended: free to take.
        assert await backend.locks.acquire_lock(key, queue_name, over.id, token(over), 60)
        await backend.complete_job(queue_name, over.id, token(over))
        async with claimer.transaction():
            [a] = await claimer.fetch(
                "SELECT id, lock_token::text AS token FROM lane.claim_jobs('w2', $1, $2, 60000)",
                [queue_name],
                [1],
            )
            assert await claimer.fetchval(
                "SELECT lane.acquire_lock($1, $2, $3, $4::uuid, 60000)",
                key,
                queue_name,
                a["id"],
                a["token"],
            )
            # B begins now, and waits for the key's row that A's transaction holds.
            racing = asyncio.create_task(
                backend.locks.acquire_lock(key, queue_name, b.id, token(b), 60)
            )
            await eventually(lambda: _waiting_for_locks(claimer, 1), timeout=10, interval=0.005)
        assert await asyncio.wait_for(racing, 10) is False
        holder = await claimer.fetchval("SELECT holder_id FROM lane.locks WHERE key = $1", key)
        assert holder == a["id"]
    finally:
        await claimer.close()
        await backend.close()
