"""A running worker enforces the bounded queue retention (RET-1 bounded by default): its
maintenance leader prunes finished jobs beyond the queue's ``keep_completed`` /
``keep_failed`` in the background, with no call from anyone."""

from __future__ import annotations

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec
from tests.helpers import eventually
from tests.worker.conftest import MAINTENANCE_ROLE, Workers, counts, queue_args, until


async def test_worker_prunes_finished_jobs_down_to_the_queue_bound_RET_1(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    await backend.set_queue_retention(queue_name, keep_completed=3, keep_failed=1)
    await backend.add_jobs(queue_name, [JobSpec("noop", {"n": n}) for n in range(10)])
    await backend.add_jobs(queue_name, [JobSpec("fail", {"n": n}) for n in range(3)])

    # One job at a time: every completion has its own finished_at, so "newest" is the
    # order of the completed events.
    worker = await workers.start(*queue_args(queue_name), "--concurrency", "1")

    async def pruned() -> bool:
        return await counts(db, [queue_name]) == {"completed": 3, "failed": 1}

    await eventually(pruned, timeout=30.0, interval=0.05)
    assert worker.alive(), worker.describe()
    completed_events = [
        event.job_id
        for event in await backend.read_events(queue_name)
        if event.event == "completed"
    ]
    assert len(completed_events) == 10  # pruning writes no events and removes none
    kept = await db.fetch(
        "SELECT id FROM lane.jobs WHERE queue = $1 AND state = 'completed'", queue_name
    )
    assert {row["id"] for row in kept} == set(completed_events[-3:])


async def test_a_leading_burst_worker_prunes_what_it_finished_before_it_exits_RET_1(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """A burst worker drains, then runs its exit pass (pruning, trimming, vacuum) while it
    still leads: the queue is within its bound when the process has exited, not only once
    some later worker's next pass comes round (W6 grew round after round without it)."""
    await backend.set_queue_retention(queue_name, keep_completed=2, keep_failed=None)
    await backend.add_jobs(queue_name, [JobSpec("noop", {"n": n}) for n in range(40)])
    leader, probe = backend.leader(), f"test:{queue_name}"

    async def nobody_leads() -> bool:  # a worker of an earlier test may still hold the role
        return await leader.acquire_leadership(MAINTENANCE_ROLE, probe, 0.001)

    await until(nobody_leads, timeout=10)
    await leader.resign_leadership(MAINTENANCE_ROLE, probe)
    vacuums = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'lane.jobs'::regclass"
    vacuumed_before = await db.fetchval(vacuums)
    worker = await workers.run(*queue_args(queue_name), "--burst", "--concurrency", "40")
    assert worker.returncode == 0, worker.describe()
    assert await counts(db, [queue_name]) == {"completed": 2}

    # ... and vacuumed lane.jobs, whose dead rows the next wave of jobs would otherwise
    # have to grow the heap around.
    async def vacuumed() -> bool:
        return bool(await db.fetchval(vacuums) > vacuumed_before)

    await until(vacuumed, timeout=5)
