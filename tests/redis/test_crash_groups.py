"""Batches and chains on Redis across a worker process killed with SIGKILL after a job's
work and before its settlement (tests/worker/test_crash_groups.py on PostgreSQL): the job
runs again after stalled recovery, and what hangs on its settlement (the batch's
callbacks, the chain's next link) happens exactly once, since the script that completes
the job writes it."""

from __future__ import annotations

import uuid
from pathlib import Path

import asyncpg

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import QueuedSpec
from tests.helpers import eventually
from tests.redis.test_worker_faults import _spawner, effects, on_test_server, queue
from tests.worker.conftest import effects as effect_rows
from tests.worker.conftest import effects_dsn, queue_args

__all__ = ["effects", "effects_dsn", "on_test_server", "queue"]  # fixtures of this module


def _worker_args(queue: str) -> list[str]:
    return [*queue_args(queue), "--lease", "1", "--concurrency", "1"]


async def _completed(backend: RedisBackend, queue: str, job_id: str) -> None:
    async def done() -> bool:
        row = await backend.get_job(queue, job_id)
        return row is not None and row.state == "completed"

    await eventually(done, timeout=30, interval=0.05)


async def test_a_batch_whose_last_job_killed_its_worker_finishes_once(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    backend, url = on_test_server
    batch_id = str(uuid.uuid4())
    # Both jobs may run twice: the worker that dies can hold the other job's completion
    # in its group commit, unwritten (at-least-once).
    jobs = [
        QueuedSpec(queue, "record", None, {"attempts": 3}),
        QueuedSpec(queue, "die_first", None, {"attempts": 3}),
    ]
    options = {
        "then": "record-then",
        "finally": "record-finally",
        "callback_options": {"attempts": 3},
    }
    record_id, dying_id = await backend.add_batch(batch_id, "crash", jobs, options)  # type: ignore[arg-type]
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        pool = await workers.start_many(2, *_worker_args(queue))
        await _completed(backend, queue, f"batch-{batch_id}-finally")
        await _completed(backend, queue, f"batch-{batch_id}-then")
        notes = [(row["job_id"], row["note"]) for row in await effect_rows(effects, queue)]
        assert notes.count(("callback:finally", "ok")) == 1
        assert notes.count(("callback:then", "ok")) == 1
        assert [note for job_id, note in notes if job_id == dying_id] == ["die", "done"]
        assert [note for job_id, note in notes if job_id == record_id] in (
            ["done"],
            ["done", "done"],
        )
        assert sum(not worker.alive() for worker in pool) == 1
    finally:
        workers.close()
    batch = await backend.find_batch(batch_id)
    assert batch is not None and (batch.pending_jobs, batch.failed_jobs) == (0, 0)


async def test_a_chain_link_that_killed_its_worker_adds_its_successor_once(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    backend, url = on_test_server
    chain_id = uuid.uuid4().hex
    links = [QueuedSpec(queue, "die_first", None, {"attempts": 3}), QueuedSpec(queue, "record")]
    await backend.add_chain(chain_id, links)
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        pool = await workers.start_many(2, *_worker_args(queue))
        await _completed(backend, queue, f"{chain_id}-1")
        ran = await eventually(lambda: effect_rows(effects, queue), timeout=5)
        assert [(row["job_id"], row["note"]) for row in ran] == [
            (f"{chain_id}-0", "die"), (f"{chain_id}-0", "done"), (f"{chain_id}-1", "done"),
        ]  # fmt: skip
        assert sum(not worker.alive() for worker in pool) == 1
    finally:
        workers.close()
    counts = await backend.get_job_counts(queue)
    assert sum(counts.values()) == 2  # the two links, nothing doubled
