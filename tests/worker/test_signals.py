"""SIGTERM / SIGINT: stop claiming at once, let running jobs finish, exit 0 (CLI-1, CLI-4,
WORK-15)."""

from __future__ import annotations

import signal

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobOptions
from tests.worker.conftest import Workers, counts, effects, queue_args, wait_for_state


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signal_finishes_running_jobs_and_claims_nothing_more_CLI_4_WORK_15(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    signum: int,
) -> None:
    worker = await workers.start(
        *queue_args(queue_name), "--concurrency", "2", "--shutdown-timeout", "20"
    )
    running = [await backend.add_job(queue_name, "sleep", {"seconds": 1.0}) for _ in range(2)]
    for job in running:
        await wait_for_state(db, queue_name, job.id, "active")

    worker.send(signum)
    # Added after the signal: both slots are busy until the sleeps end, so a worker that
    # ignored the signal would claim these as soon as a slot frees.
    later = [await backend.add_job(queue_name, "record", {"after": n}) for n in range(3)]

    assert await worker.wait_exit() == 0, worker.describe()
    for job in running:
        done = await backend.get_job(queue_name, job.id)
        assert done is not None and done.state == "completed", done
        assert done.return_value == {"slept": 1.0, "pid": worker.pid}
    for job in later:
        untouched = await backend.get_job(queue_name, job.id)
        assert untouched is not None
        assert (untouched.state, untouched.attempts_started) == ("waiting", 0)
    assert sorted(row["job_id"] for row in await effects(db, queue_name)) == sorted(
        job.id for job in running
    )
    assert await counts(db, [queue_name]) == {"completed": 2, "waiting": 3}
    assert worker.stderr().strip() == "", worker.describe()


async def test_shutdown_timeout_bounds_the_wait_and_keeps_the_job_CLI_4(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """A job still running when ``--shutdown-timeout`` passes is not completed, not failed
    and not lost: it is released to waiting or left active for its lease to expire."""
    worker = await workers.start(
        *queue_args(queue_name), "--shutdown-timeout", "0.5", "--lease", "5"
    )
    job = await backend.add_job(queue_name, "sleep", {"seconds": 60}, JobOptions(attempts=2))
    await wait_for_state(db, queue_name, job.id, "active")

    worker.send(signal.SIGTERM)
    assert await worker.wait_exit(timeout=15) == 0, worker.describe()

    left = await backend.get_job(queue_name, job.id)
    assert left is not None
    assert left.state in ("waiting", "active"), left
    assert (left.attempts_made, left.failed_reason, left.return_value) == (0, None, None)
    if left.state == "active":
        assert left.lease_expires_at is not None
    assert await effects(db, queue_name) == []


async def test_a_job_interrupted_at_the_shutdown_deadline_keeps_its_attempt_CLI_4(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """A run cut off by ``--shutdown-timeout`` did not end: its job goes back to waiting
    with the attempt not spent, so a job of one attempt runs again after a deploy instead
    of failing as MaxAttemptsExceeded at its next claim."""
    worker = await workers.start(*queue_args(queue_name), "--shutdown-timeout", "0.2")
    job = await backend.add_job(queue_name, "sleep", {"seconds": 60}, JobOptions(attempts=1))
    await wait_for_state(db, queue_name, job.id, "active")

    worker.send(signal.SIGTERM)
    assert await worker.wait_exit(timeout=15) == 0, worker.describe()

    left = await backend.get_job(queue_name, job.id)
    assert left is not None
    assert (left.state, left.attempts_started, left.attempts_made) == ("waiting", 0, 0), left
    assert left.lease_expires_at is None
