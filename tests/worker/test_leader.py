"""A frozen maintenance leader does not stop maintenance (STALL-8, CLAIM-4, RET).

Leadership is a lease in ``lane.leaders`` that its holder renews: a leader frozen by
SIGSTOP keeps its connections (a session advisory lock, as before, stayed held), but stops
renewing, so another worker takes the role over, recovers the frozen leader's expired job
and runs it, and promotes, prunes and trims in its place. When the old leader resumes, its
stale writes are refused by their lock tokens.
"""

from __future__ import annotations

import signal
from datetime import datetime, timedelta

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobOptions, QueueDemand
from tests.worker.conftest import (
    MAINTENANCE_ROLE,
    Workers,
    effects,
    job_row,
    queue_args,
    state_of,
    until,
    wait_for_state,
)

TAKEOVER_BOUND = timedelta(seconds=3)  # the job's 1 s lease plus 2 s


async def _leader(db: asyncpg.Connection) -> str | None:
    holder: str | None = await db.fetchval(
        "SELECT holder FROM lane.leaders WHERE role = $1 AND expires_at > clock_timestamp()",
        MAINTENANCE_ROLE,
    )
    return holder


async def test_a_frozen_leader_is_replaced_and_its_job_runs_elsewhere_STALL_8_CLAIM_4(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    first = await workers.start(*queue_args(queue_name), "--lease", "1", "--concurrency", "1")
    await until(lambda: _is(db, first.worker_id), timeout=10)  # a killed worker's lease lapses
    job = await backend.add_job(queue_name, "sleep", {"seconds": 5}, JobOptions(attempts=3))
    await until(lambda: _held_by(db, queue_name, job.id, first.worker_id), timeout=10)
    second = await workers.start(*queue_args(queue_name), "--lease", "1", "--concurrency", "1")
    assert await _leader(db) == first.worker_id  # the live leader keeps the role

    frozen_at: datetime = await db.fetchval("SELECT clock_timestamp()")
    first.send(signal.SIGSTOP)
    try:
        # The other worker takes over, recovers the expired job and runs it.
        await until(lambda: _held_by(db, queue_name, job.id, second.worker_id), timeout=15)
        row = await job_row(db, queue_name, job.id)
        assert row is not None
        took: timedelta = row["processed_at"] - frozen_at
        print(
            f"\nfrozen leader: its 1 s-lease job ran elsewhere {took.total_seconds():.2f} s later"
        )
        assert took < TAKEOVER_BOUND
        assert await _leader(db) == second.worker_id

        # Every other kind of upkeep goes on under the new leader: pruning (keep nothing of
        # a queue nobody serves) and promotion of a queue nobody claims from.
        pruned_queue, promoted_queue = f"{queue_name}.pruned", f"{queue_name}.promoted"
        await backend.add_job(pruned_queue, "n")
        [done] = await backend.claim_jobs("test", [QueueDemand(pruned_queue, 1)], 60)
        await backend.complete_job(pruned_queue, done.id, done.lock_token)
        await backend.set_queue_retention(pruned_queue, keep_completed=0, keep_failed=0)
        delayed = await backend.add_job(promoted_queue, "n", None, JobOptions(delay=0.2))

        async def gone() -> bool:
            return await state_of(db, pruned_queue, done.id) is None

        await until(gone, timeout=10)
        await wait_for_state(db, promoted_queue, delayed.id, "waiting", timeout=15)
    finally:
        first.send(signal.SIGCONT)

    # Resumed, the old leader's run ends and tries to complete: refused, the job is the new
    # owner's. It does not lead again while the new leader renews.
    await wait_for_state(db, queue_name, job.id, "completed", timeout=15)

    async def both_ran() -> bool:
        return len(await effects(db, queue_name)) == 2

    await until(both_ran, timeout=15)
    finished = await job_row(db, queue_name, job.id)
    assert finished is not None
    assert finished["worker_id"] == second.worker_id
    assert (finished["attempts_started"], finished["attempts_made"]) == (2, 0)
    assert {row["pid"] for row in await effects(db, queue_name)} == {first.pid, second.pid}
    assert await _leader(db) == second.worker_id
    for worker in (first, second):
        worker.send(signal.SIGTERM)
    for worker in (first, second):
        assert await worker.wait_exit() == 0, worker.describe()
    assert ", 1 lost" in first.stdout(), first.describe()
    assert ": 1 completed" in second.stdout(), second.describe()
    returned = await backend.get_job(queue_name, job.id)
    assert returned is not None and returned.return_value == {"slept": 5, "pid": second.pid}


async def test_a_stopping_leader_hands_the_role_over_at_once_STALL_8(
    workers: Workers, db: asyncpg.Connection, queue_name: str
) -> None:
    """SIGTERM: the leader resigns, so the other worker may lead without waiting for the
    lease to run out (the resignation sets the row's expiry to -infinity)."""
    first = await workers.start(*queue_args(queue_name))
    await until(lambda: _is(db, first.worker_id), timeout=10)
    second = await workers.start(*queue_args(queue_name))
    first.send(signal.SIGTERM)
    assert await first.wait_exit() == 0, first.describe()
    # Right after the exit: resigned (its lease ended at -infinity), or already replaced.
    row = await db.fetchrow(
        "SELECT holder, expires_at = '-infinity' AS resigned FROM lane.leaders WHERE role = $1",
        MAINTENANCE_ROLE,
    )
    assert row is not None
    assert row["resigned"] or row["holder"] == second.worker_id, dict(row)
    await until(lambda: _is(db, second.worker_id), timeout=10)


async def _is(db: asyncpg.Connection, worker_id: str) -> bool:
    return await _leader(db) == worker_id


async def _held_by(db: asyncpg.Connection, queue: str, job_id: str, worker_id: str) -> bool:
    row = await job_row(db, queue, job_id)
    return row is not None and row["state"] == "active" and row["worker_id"] == worker_id
