"""A stale owner cannot complete, fail, release, delay or renew a job that was taken over
(CLAIM-4, WORK-8, WORK-16): first with the backend directly, then with a real worker process
whose event loop froze past its lease."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import asyncpg
import pytest

from lane_pg.errors import LockMismatch
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import (
    Completion,
    Failure,
    FinalizeOutcome,
    JobOptions,
    JobRow,
    LeaseRef,
    QueueDemand,
    StalledOutcome,
)
from tests.helpers import job_event_list, queue_snapshot
from tests.worker.conftest import Workers, effects, queue_args, until


async def test_stale_token_changes_nothing_after_takeover_CLAIM_4(
    backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    added = await backend.add_job(queue_name, "record", {"n": 1}, JobOptions(attempts=3))
    t0: datetime = await db.fetchval("SELECT clock_timestamp()")
    [old] = await backend.claim_jobs("old-owner", [QueueDemand(queue_name, 1)], 1.0, now=t0)
    later = t0 + timedelta(seconds=2)  # the old lease (1 s) has expired by then
    assert await backend.recover_stalled([queue_name], now=later) == [
        StalledOutcome(queue_name, added.id, "waiting")
    ]
    [new] = await backend.claim_jobs("new-owner", [QueueDemand(queue_name, 1)], 60, now=later)
    assert new.id == old.id and new.lock_token != old.lock_token
    assert old.lock_token is not None and new.lock_token is not None
    stale = old.lock_token

    before_job = await backend.get_job(queue_name, added.id)
    before = await queue_snapshot(backend, queue_name)
    attempts: dict[str, Callable[[], Awaitable[JobRow]]] = {
        "complete": lambda: backend.complete_job(queue_name, added.id, stale, {"by": "old"}),
        "fail": lambda: backend.fail_job(queue_name, added.id, stale, "old owner failed"),
        "fail_discarding_retry": lambda: backend.fail_job(
            queue_name, added.id, stale, "old owner failed", discard_retry=True
        ),
        "release_active": lambda: backend.release_job(queue_name, added.id, stale),
        "delay_active": lambda: backend.delay_job(queue_name, added.id, stale, 5),
    }
    for name, call in attempts.items():
        with pytest.raises(LockMismatch):
            await call()
        assert await backend.get_job(queue_name, added.id) == before_job, name
    assert await backend.complete_jobs([Completion(queue_name, added.id, stale, 1)]) == [
        FinalizeOutcome(queue_name, added.id, "lock_mismatch", None)
    ]
    assert await backend.fail_jobs([Failure(queue_name, added.id, stale, "old")]) == [
        FinalizeOutcome(queue_name, added.id, "lock_mismatch", None)
    ]
    stale_ref = LeaseRef(queue_name, added.id, stale)
    assert await backend.renew_leases([stale_ref], 60) == [stale_ref]
    after = await backend.get_job(queue_name, added.id)
    assert after == before_job
    assert after is not None
    assert (after.state, after.worker_id, after.lock_token) == (
        "active",
        "new-owner",
        new.lock_token,
    )
    assert await queue_snapshot(backend, queue_name) == before  # no event written either

    done = await backend.complete_job(queue_name, added.id, new.lock_token, {"by": "new"})
    assert (done.state, done.return_value) == ("completed", {"by": "new"})
    with pytest.raises(LockMismatch):
        await backend.complete_job(queue_name, added.id, stale, {"by": "old"})
    final = await backend.get_job(queue_name, added.id)
    assert final is not None and final.return_value == {"by": "new"}


@pytest.mark.parametrize("outcome", ["return", "raise"])
async def test_stale_worker_does_not_overwrite_the_new_owner_CLAIM_4_WORK_16(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    outcome: str,
) -> None:
    """The ``stale_owner`` processor freezes its worker's event loop (no lease renewal)
    until the test has recovered the expired job and claimed it as ``thief``; then the
    worker learns of the loss and the processor tries to settle anyway (or is cancelled):
    whatever the stale worker does, the thief's job must not change."""
    worker = await workers.start(*queue_args(queue_name), "--lease", "1", "--concurrency", "1")
    job = await backend.add_job(
        queue_name, "stale_owner", {"outcome": outcome}, JobOptions(attempts=3)
    )

    async def lease_expired() -> bool:
        return bool(
            await db.fetchval(
                "SELECT state = 'active' AND lease_expires_at < clock_timestamp()"
                " FROM lane.jobs WHERE queue = $1 AND id = $2",
                queue_name,
                job.id,
            )
        )

    await until(lease_expired, timeout=10)
    recovered = await backend.recover_stalled([queue_name])
    assert StalledOutcome(queue_name, job.id, "waiting") in recovered
    [taken] = await backend.claim_jobs("thief", [QueueDemand(queue_name, 1)], 60)
    assert taken.id == job.id and taken.lock_token is not None

    async def notes() -> list[str] | None:
        seen = [row["note"] for row in await effects(db, queue_name)]
        ended = any(note == "cancelled" or note.startswith("ensure_lease:") for note in seen)
        return seen if ended else None

    seen = await until(notes, timeout=20)

    # A graceful stop flushes whatever the worker still wanted to write.
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()

    held = await backend.get_job(queue_name, job.id)
    assert held is not None
    assert (held.state, held.worker_id, held.lock_token) == ("active", "thief", taken.lock_token)
    assert (held.return_value, held.failed_reason, held.attempts_made) == (None, None, 0)
    names = [name for name, _ in await job_event_list(backend, queue_name, job.id)]
    assert names[-1] == "active" and "completed" not in names and "failed" not in names

    done = await backend.complete_job(queue_name, job.id, taken.lock_token, {"by": "thief"})
    assert (done.state, done.return_value) == ("completed", {"by": "thief"})
    assert seen[0] == "taken_over", seen


async def test_processor_learns_of_a_lost_lease_and_its_writes_are_refused_WORK_8_WORK_9(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """Force a token mismatch while the processor runs (another owner's token written
    straight into the row): within a renewal interval the context says the lease is lost,
    ``ensure_lease`` raises ``LeaseLost``, ``update_progress`` is refused, and the processor
    is told rather than cancelled (WORK-15: no run is cancelled mid-dispatch)."""
    worker = await workers.start(*queue_args(queue_name), "--lease", "1", "--concurrency", "1")
    job = await backend.add_job(queue_name, "lease_watch", None, JobOptions(attempts=3))

    async def watching() -> bool:
        return [row["note"] for row in await effects(db, queue_name)] == ["watching"]

    await until(watching, timeout=10)
    thief_token = await db.fetchval(
        "UPDATE lane.jobs SET lock_token = gen_random_uuid(), worker_id = 'thief'"
        " WHERE queue = $1 AND id = $2 AND state = 'active' RETURNING lock_token::text",
        queue_name,
        job.id,
    )
    assert thief_token is not None

    async def notes() -> list[str] | None:
        seen = [row["note"] for row in await effects(db, queue_name)]
        ended = any(note in ("cancelled", "not_lost") or "progress:" in note for note in seen)
        return seen if ended else None

    seen = await until(notes, timeout=15)
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    held = await backend.get_job(queue_name, job.id)
    assert held is not None
    assert (held.state, held.worker_id, held.lock_token) == ("active", "thief", thief_token)
    assert (held.progress, held.return_value, held.attempts_made) == (None, None, 0)
    assert seen == [
        "watching",
        "lost",
        "ensure_lease:LeaseLost",
        "update_progress:LeaseLost",
    ], seen


async def test_context_writes_of_a_taken_over_run_are_refused_WORK_9_CLAIM_4(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """The ``stale_writer`` processor freezes its worker's event loop past its 1 s lease
    (no renewal runs, so the worker is never told); meanwhile the test recovers the job,
    claims it as ``thief`` and writes data, a log line and progress with the thief's token.
    Then the frozen run writes through its context: every write gets ``LeaseLost`` (the
    first one refused by the database, as its cause says, the others by the context that
    counts as lost from then on), and the job's data, progress and logs stay the thief's."""
    worker = await workers.start(*queue_args(queue_name), "--lease", "1", "--concurrency", "1")
    job = await backend.add_job(
        queue_name, "stale_writer", {"by": "producer"}, JobOptions(attempts=3)
    )

    async def lease_expired() -> bool:
        return bool(
            await db.fetchval(
                "SELECT state = 'active' AND lease_expires_at < clock_timestamp()"
                " FROM lane.jobs WHERE queue = $1 AND id = $2",
                queue_name,
                job.id,
            )
        )

    await until(lease_expired, timeout=10)
    assert StalledOutcome(queue_name, job.id, "waiting") in await backend.recover_stalled(
        [queue_name]
    )
    [taken] = await backend.claim_jobs("thief", [QueueDemand(queue_name, 1)], 60)
    assert taken.id == job.id
    await backend.update_job_data(queue_name, job.id, {"by": "thief"}, token=taken.lock_token)
    await backend.add_job_log(queue_name, job.id, "thief line", token=taken.lock_token)
    await backend.update_job_progress(queue_name, job.id, {"by": "thief"}, token=taken.lock_token)

    async def notes() -> list[str] | None:
        seen = [row["note"] for row in await effects(db, queue_name)]
        return seen if any(note.startswith("lost:") for note in seen) else None

    seen = await until(notes, timeout=20)
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    assert seen == [
        "taken_over",
        "update_progress:LeaseLost:LockMismatch",
        "log:LeaseLost:-",
        "update_data:LeaseLost:-",
        "lost:True",
    ], seen
    held = await backend.get_job(queue_name, job.id)
    assert held is not None
    assert (held.state, held.worker_id, held.lock_token) == ("active", "thief", taken.lock_token)
    assert (held.data, held.progress, held.return_value) == ({"by": "thief"}, {"by": "thief"}, None)
    logs = await backend.get_job_logs(queue_name, job.id)
    assert [entry.message for entry in logs.logs] == ["thief line"]
    progress = [
        data
        for name, data in await job_event_list(backend, queue_name, job.id)
        if name == "progress"
    ]
    assert progress == [{"data": {"by": "thief"}}]
    assert ", 1 lost" in worker.stdout(), worker.describe()  # its result was not written
