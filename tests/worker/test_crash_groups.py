"""Batches and chains across a worker killed with SIGKILL after a job's work and before its
settlement: the job runs again after stalled recovery, and what hangs on its settlement
(the batch's finally, the chain's next link) happens exactly once."""

from __future__ import annotations

import uuid

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueuedSpec
from tests.worker.conftest import Workers, effects, queue_args, until, wait_for_state


def _worker_args(queue: str) -> list[str]:
    return [*queue_args(queue), "--lease", "1", "--concurrency", "1"]


async def test_a_batch_whose_last_job_killed_its_worker_finishes_once(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    batch_id = str(uuid.uuid4())
    # Both jobs may run twice: the worker that dies can hold the other job's completion
    # in its group commit, unwritten (at-least-once), so "record" needs a second try too.
    jobs = [
        QueuedSpec(queue_name, "record", None, {"attempts": 3}),
        QueuedSpec(queue_name, "die_first", None, {"attempts": 3}),
    ]
    options = {
        "then": "record-then",
        "finally": "record-finally",
        "callback_options": {"attempts": 3},
    }
    ids = await backend.batches.add_batch(batch_id, "crash", jobs, options)  # type: ignore[arg-type]
    record_id, dying_id = ids
    pool = await workers.start_many(2, *_worker_args(queue_name))

    await wait_for_state(db, queue_name, f"batch-{batch_id}-finally", "completed", timeout=30)
    await wait_for_state(db, queue_name, f"batch-{batch_id}-then", "completed", timeout=30)
    notes = [(row["job_id"], row["note"]) for row in await effects(db, queue_name)]
    assert notes.count(("callback:finally", "ok")) == 1
    assert notes.count(("callback:then", "ok")) == 1
    assert [note for job_id, note in notes if job_id == dying_id] == ["die", "done"]
    record_notes = [note for job_id, note in notes if job_id == record_id]
    assert record_notes in (["done"], ["done", "done"])  # twice: its completion died unwritten
    assert sum(not worker.alive() for worker in pool) == 1
    batch = await backend.batches.find_batch(batch_id)
    assert batch is not None and (batch.pending_jobs, batch.failed_jobs) == (0, 0)


async def test_a_chain_link_that_killed_its_worker_adds_its_successor_once(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    chain_id = uuid.uuid4().hex
    links = [QueuedSpec(queue_name, "die_first", None, {"attempts": 3}),
             QueuedSpec(queue_name, "record")]  # fmt: skip
    await backend.jobs.add_chain(chain_id, links)
    pool = await workers.start_many(2, *_worker_args(queue_name))

    await wait_for_state(db, queue_name, f"{chain_id}-1", "completed", timeout=30)
    ran = await until(lambda: effects(db, queue_name), timeout=5)
    assert [(row["job_id"], row["note"]) for row in ran] == [
        (f"{chain_id}-0", "die"), (f"{chain_id}-0", "done"), (f"{chain_id}-1", "done"),
    ]  # fmt: skip
    assert (
        await db.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id LIKE $2",
            queue_name,
            f"{chain_id}-%",
        )
        == 2
    )
    assert sum(not worker.alive() for worker in pool) == 1
