"""A real worker process serves a queue whose event recording is off exactly as one that
records (CLAIM-1, FIN-1, FIN-3 with no event rows), next to a queue that still records."""

from __future__ import annotations

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import Backoff, JobOptions, JobSpec
from tests.helpers import eventually
from tests.worker.conftest import Workers, counts, effects, queue_args, stop


async def test_worker_processes_a_queue_that_records_no_events_CLAIM_1_FIN_1(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    quiet, loud = queue_name, f"{queue_name}_loud"
    await backend.set_queue_events(quiet, record=False)
    retried = JobOptions(attempts=2, backoff=Backoff.fixed(0))
    for queue in (quiet, loud):
        await backend.add_jobs(queue, [JobSpec("record", {"n": n}) for n in range(4)])
        await backend.add_job(queue, "fail", None, retried)

    worker = await workers.start(*queue_args(quiet, loud), "--concurrency", "2")

    async def finished() -> bool:
        return all(
            [await counts(db, [queue]) == {"completed": 4, "failed": 1} for queue in (quiet, loud)]
        )

    await eventually(finished, timeout=30.0, interval=0.05)
    stop(worker)
    assert await worker.wait_exit() == 0, worker.describe()
    for queue in (quiet, loud):
        assert len(await effects(db, queue)) == 4
    assert await backend.read_events(quiet) == []
    names = [event.event for event in await backend.read_events(loud, limit=1000)]
    assert names.count("active") == 6  # 4 jobs once, the failing one twice
    assert names.count("completed") == 4
    assert names.count("failed") == 1
