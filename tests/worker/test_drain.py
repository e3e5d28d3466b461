"""Two worker processes drain 10,000 jobs: every job runs exactly once (WORK-6, WORK-7,
CLAIM-8, CLAIM-10, CLAIM-14, SCH-5, CLI-1)."""

from __future__ import annotations

import asyncio
import signal

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec
from tests.worker.conftest import EFFECTS_TABLE, Workers, counts, queue_args, until

JOBS = 10_000
DRAIN_TIMEOUT = 90.0  # a deadline for correctness, not a performance bound


async def test_two_workers_drain_10000_jobs_each_exactly_once_CLAIM_14_WORK_6(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    # Paused while both workers start, so both are idle on LISTEN when the work appears
    # and resume's wake-up reaches both (CLAIM-10).
    await backend.pause_queue(queue_name)
    added = await backend.add_jobs(queue_name, [JobSpec("record", {"n": n}) for n in range(JOBS)])
    assert len({job.id for job in added}) == JOBS
    pool = await workers.start_many(2, *queue_args(queue_name), "--concurrency", "16")

    loop = asyncio.get_running_loop()
    started = loop.time()
    await backend.resume_queue(queue_name)

    async def drained() -> bool:
        return (await counts(db, [queue_name])).get("completed", 0) == JOBS

    await until(drained, timeout=DRAIN_TIMEOUT, interval=0.1)
    wall = loop.time() - started
    span = await db.fetchval(
        "SELECT extract(epoch FROM max(finished_at) - min(processed_at))::float8"
        " FROM lane.jobs WHERE queue = $1",
        queue_name,
    )
    per_pid = dict(
        await db.fetch(
            f"SELECT pid, count(*) FROM {EFFECTS_TABLE} WHERE queue = $1 GROUP BY pid",
            queue_name,
        )
    )
    print(
        f"\n{JOBS} record jobs, 2 workers x concurrency 16: {wall:.2f} s wall"
        f" ({JOBS / wall:.0f} jobs/s), {span:.2f} s first claim to last finish"
        f" ({JOBS / span:.0f} jobs/s, database clock); jobs per worker pid: {per_pid}"
    )

    # Exactly once: one effect row per job, for exactly the jobs that were added.
    duplicates = await db.fetch(
        f"SELECT job_id, count(*) AS n FROM {EFFECTS_TABLE} WHERE queue = $1"
        " GROUP BY job_id HAVING count(*) <> 1",
        queue_name,
    )
    assert duplicates == []
    ran = {
        row["job_id"]
        for row in await db.fetch(
            f"SELECT job_id FROM {EFFECTS_TABLE} WHERE queue = $1", queue_name
        )
    }
    assert ran == {job.id for job in added}
    assert await counts(db, [queue_name]) == {"completed": JOBS}
    assert (
        await db.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND attempts_started <> 1",
            queue_name,
        )
        == 0
    )
    # Both processes took part (both were woken by the same resume).
    assert set(per_pid) == {worker.pid for worker in pool}, per_pid

    for worker in pool:
        worker.send(signal.SIGTERM)
    for worker in pool:
        assert await worker.wait_exit() == 0, worker.describe()
