"""Batches and chains on PostgreSQL with real concurrent transactions: two settlements of
one batch's last jobs finish it exactly once; a settlement rolls back with its completion
(BATCH-5, BATCH-10, CHAIN-4)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JobRow, QueueDemand, QueuedSpec
from tests.helpers import eventually


async def claim(backend: JobQueueBackend, queue: str, n: int) -> list[JobRow]:
    return await backend.runs.claim_jobs("w", [QueueDemand(queue, n)], 30)


async def test_concurrent_last_settlements_finish_the_batch_once_BATCH_5(
    pg_backend: JobQueueBackend, pg_dsn: str, queue_name: str
) -> None:
    batch_id = str(uuid.uuid4())
    jobs = [QueuedSpec(queue_name, "part", i) for i in range(2)]
    await pg_backend.batches.add_batch(batch_id, "race", jobs, {"then": "t", "finally": "f"})
    first, second = await claim(pg_backend, queue_name, 2)
    one = await asyncpg.connect(pg_dsn)
    two = await asyncpg.connect(pg_dsn)
    try:
        complete = "SELECT lane.complete_job($1, $2, $3::uuid, 'null'::jsonb)"
        one_tx, two_tx = one.transaction(), two.transaction()
        await one_tx.start()
        await two_tx.start()
        await one.execute(complete, queue_name, first.id, first.lock_token)
        # The second settlement waits for the batch row the first one holds...
        waiting = asyncio.create_task(
            two.execute(complete, queue_name, second.id, second.lock_token)
        )
        await eventually(
            lambda: one.fetchval(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1",
                two.get_server_pid(),
            )
        )
        assert not waiting.done()
        await one_tx.commit()
        # ... and, let go, counts the first one's settlement: it is the last.
        await waiting
        await two_tx.commit()
    finally:
        await one.close()
        await two.close()

    batch = await pg_backend.batches.find_batch(batch_id)
    assert batch is not None and batch.pending_jobs == 0 and batch.finished
    for kind in ("then", "finally"):
        assert await pg_backend.jobs.get_job(queue_name, f"batch-{batch_id}-{kind}") is not None


async def test_a_settlement_rolls_back_with_its_completion_BATCH_10(
    pg_backend: JobQueueBackend, pg_dsn: str, queue_name: str
) -> None:
    batch_id = str(uuid.uuid4())
    await pg_backend.batches.add_batch(
        batch_id, "tx", [QueuedSpec(queue_name, "part", 1)], {"finally": "f"}
    )
    [job] = await claim(pg_backend, queue_name, 1)
    conn = await asyncpg.connect(pg_dsn)
    try:
        tx = conn.transaction()
        await tx.start()
        await conn.execute(
            "SELECT lane.complete_job($1, $2, $3::uuid, 'null'::jsonb)",
            queue_name, job.id, job.lock_token,
        )  # fmt: skip
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM lane.batch_settlements WHERE batch_id = $1::uuid", batch_id
            )
            == 1
        )
        await tx.rollback()  # a failure after the settlement's insert
    finally:
        await conn.close()

    batch = await pg_backend.batches.find_batch(batch_id)
    assert batch is not None and (batch.pending_jobs, batch.finished) == (1, False)
    again = await pg_backend.jobs.get_job(queue_name, job.id)
    assert again is not None and again.state == "active"
    assert await pg_backend.jobs.get_job(queue_name, f"batch-{batch_id}-finally") is None


async def test_the_v_batches_view_reports_what_find_batch_does_SQLR_3(
    pg_backend: JobQueueBackend, pg_dsn: str, queue_name: str
) -> None:
    """``lane.v_batches`` and ``Batch`` compute the state and percent the same way:
    8 jobs with 1, 3 and then all settled (12.5 % and 37.5 % round down in both)."""
    batch_id = str(uuid.uuid4())
    specs = [QueuedSpec(queue_name, "part", i) for i in range(8)]
    await pg_backend.batches.add_batch(batch_id, "view", specs, {"allow_failures": True})
    conn = await asyncpg.connect(pg_dsn)
    try:
        for settle in (1, 2, 5):
            for job in await claim(pg_backend, queue_name, settle):
                token = job.lock_token or ""
                if job.data == 0:
                    await pg_backend.runs.fail_job(queue_name, job.id, token, "no")
                else:
                    await pg_backend.runs.complete_job(queue_name, job.id, token, None)
            batch = await pg_backend.batches.find_batch(batch_id)
            assert batch is not None
            row = await conn.fetchrow("SELECT * FROM lane.v_batches WHERE id = $1::uuid", batch_id)
            assert row is not None
            state = "finished" if batch.finished else "pending"
            assert (
                row["state"],
                row["total_jobs"],
                row["pending_jobs"],
                row["settled_jobs"],
                row["failed_jobs"],
                row["progress"],
            ) == (
                state,
                batch.total_jobs,
                batch.pending_jobs,
                batch.processed_jobs(),
                batch.failed_jobs,
                batch.progress(),
            )
        assert batch.progress() == 100 and row["failed_jobs"] == 1
    finally:
        await conn.close()
