"""Workers that die (SIGKILL): the lease expires, one elected worker recovers the job, and
a job that kills every worker ends failed instead of looping (STALL-3, STALL-6, STALL-7,
STALL-8)."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobOptions
from tests.helpers import job_event_list
from tests.worker.conftest import (
    WorkerProcess,
    Workers,
    effects,
    job_row,
    queue_args,
    state_of,
    until,
    wait_for_state,
)

LEASE = "1"  # seconds: the stalled interval is the lease too (STALL-8)
# STALL-8: "with a lease of 1 s, a killed worker's job is waiting again within 2.5 s";
# the bound below adds 0.5 s for a loaded two-core machine.
STALL_RECOVERY_BOUND = timedelta(seconds=3.0)


def _worker_args(queue: str) -> list[str]:
    return [*queue_args(queue), "--lease", LEASE, "--concurrency", "1"]


def _by_worker_id(pool: list[WorkerProcess], worker_id: str) -> WorkerProcess:
    [worker] = [worker for worker in pool if worker.worker_id == worker_id]
    return worker


async def _stall_delay(backend: PostgresBackend, queue: str, job_id: str) -> timedelta:
    """Database time from the job's first ``active`` event to its first ``stalled``."""
    listed = await backend.read_events(queue, "-", "+", 1000)
    first_active = next(e for e in listed if e.job_id == job_id and e.event == "active")
    first_stalled = next(e for e in listed if e.job_id == job_id and e.event == "stalled")
    return first_stalled.created_at - first_active.created_at


async def test_job_of_a_killed_worker_completes_on_another_STALL_6_STALL_8(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    pool = await workers.start_many(2, *_worker_args(queue_name))
    job = await backend.add_job(queue_name, "sleep", {"seconds": 1.5}, JobOptions(attempts=2))

    async def claimed_by() -> str | None:
        row = await job_row(db, queue_name, job.id)
        return row["worker_id"] if row is not None and row["state"] == "active" else None

    victim = _by_worker_id(pool, await until(claimed_by, timeout=10))
    victim.kill()  # SIGKILL in the middle of the 1.5 s sleep
    [survivor] = [worker for worker in pool if worker is not victim]

    await wait_for_state(db, queue_name, job.id, "completed")
    done = await backend.get_job(queue_name, job.id)
    assert done is not None
    assert done.attempts_started == 2  # the lost run stays counted (STALL-6)
    assert done.attempts_made == 0
    assert done.stalled_count == 1
    assert done.return_value == {"slept": 1.5, "pid": survivor.pid}
    ran = await effects(db, queue_name)
    assert [(row["pid"], row["attempt"], row["note"]) for row in ran] == [(survivor.pid, 2, "done")]
    assert victim.returncode == -9
    assert survivor.alive(), survivor.describe()

    delay = await _stall_delay(backend, queue_name, job.id)
    print(f"\nlease 1 s: job recovered {delay.total_seconds():.2f} s after its first claim")
    assert delay <= STALL_RECOVERY_BOUND
    names = [name for name, _ in await job_event_list(backend, queue_name, job.id)]
    assert names == ["added", "waiting", "active", "stalled", "waiting", "active", "completed"]


async def test_job_that_kills_its_first_worker_is_retried_elsewhere_STALL_8(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    pool = await workers.start_many(2, *_worker_args(queue_name))
    job = await backend.add_job(queue_name, "die_first", None, JobOptions(attempts=2))
    await wait_for_state(db, queue_name, job.id, "completed")
    ran = await effects(db, queue_name)
    assert [(row["attempt"], row["note"]) for row in ran] == [(1, "die"), (2, "done")]
    died = {worker.pid: worker.returncode for worker in pool if not worker.alive()}
    assert died == {ran[0]["pid"]: -9}
    assert ran[1]["pid"] != ran[0]["pid"]
    done = await backend.get_job(queue_name, job.id)
    assert done is not None
    assert (done.attempts_started, done.stalled_count) == (2, 1)
    assert await _stall_delay(backend, queue_name, job.id) <= STALL_RECOVERY_BOUND


@pytest.mark.parametrize(
    ("attempts", "runs", "reason"),
    [
        # Budget left after the first death: the second stall exceeds max_stalled_count 1.
        (5, 2, "stalled more than allowable limit"),
        # One attempt: the redelivery is refused before the processor runs (STALL-7).
        (1, 1, "MaxAttemptsExceeded"),
    ],
)
async def test_job_that_kills_every_worker_ends_failed_STALL_3_STALL_7(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    attempts: int,
    runs: int,
    reason: str,
) -> None:
    job = await backend.add_job(queue_name, "die", None, JobOptions(attempts=attempts))

    async def failed_while_keeping_a_worker_alive() -> bool:
        if not any(worker.alive() for worker in workers.spawned):
            workers.spawn(*_worker_args(queue_name))  # a replacement, as a supervisor would
        return await state_of(db, queue_name, job.id) == "failed"

    await until(failed_while_keeping_a_worker_alive, timeout=45, interval=0.05)
    failed = await backend.get_job(queue_name, job.id)
    assert failed is not None
    print(
        f"\nattempts {attempts}: failed after {len(workers.spawned)} worker processes:"
        f" {failed.failed_reason!r}"
    )
    assert failed.failed_reason is not None and reason in failed.failed_reason
    ran = await effects(db, queue_name)
    assert [(row["attempt"], row["note"]) for row in ran] == [
        (attempt, "die") for attempt in range(1, runs + 1)
    ]
    killed = [worker for worker in workers.spawned if worker.returncode == -9]
    assert sorted(worker.pid for worker in killed) == sorted(row["pid"] for row in ran)
    assert failed.attempts_started == 2
    assert failed.stalled_count == runs
    names = [name for name, _ in await job_event_list(backend, queue_name, job.id)]
    if runs == 2:
        assert names[-2:] == ["stalled", "failed"]  # STALL-3: the second stall fails it
        assert names.count("stalled") == 2
    else:
        # Stalled once, back to waiting, redelivered, and failed by the worker's guard.
        assert names.count("stalled") == 1
        assert names[names.index("stalled") :][:4] == ["stalled", "waiting", "active", "failed"]
    # Nothing keeps running it: the job is not claimable any more.
    assert await state_of(db, queue_name, job.id) == "failed"
