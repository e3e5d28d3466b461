"""The worker under claim limits: a throttled worker sleeps until the window frees and a
worker held back by max_active wakes when a slot frees (CLAIM-9, CLAIM-11, RATE-1).

Every worker polls only every 30 s, beyond each deadline here, so meeting one proves a
wake-up (the limiter's timer or a NOTIFY), not the poll; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

import lane_pg
from lane_pg import JobRateLimit, JobSpec
from lane_pg.backend import OperationCall
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from tests.helpers import eventually
from tests.worker.conftest import Workers, queue_args

SLOW_POLL = 30.0


async def _run(
    app: lane_pg.App, queue: str, **settings: Any
) -> tuple[lane_pg.Worker, asyncio.Task[None]]:
    worker = await app.create_worker(
        lanes=(lane_pg.Lane(queue),), poll_interval=SLOW_POLL, **settings
    )
    return worker, asyncio.create_task(worker.run())


async def _stop(*running: tuple[lane_pg.Worker, asyncio.Task[None]]) -> None:
    for worker, _ in running:
        worker.stop()
    for worker, task in running:
        await asyncio.wait_for(task, 20)
        if worker.notifier is not None:  # create_worker started it; run_worker would close it
            await worker.notifier.close()


async def test_a_maxed_worker_wakes_when_a_slot_frees_CLAIM_9(pg_dsn: str, queue_name: str) -> None:
    release = asyncio.Event()
    started: list[str] = []
    apps = [lane_pg.App(pg_dsn), lane_pg.App(pg_dsn)]
    for app in apps:

        @app.processor("hold")
        async def hold(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> None:
            started.append(job.id)
            if len(started) == 1:
                await release.wait()

    running = []
    try:
        backend = await apps[0].backend()
        await backend.set_max_active_jobs(queue_name, 1)
        running = [await _run(app, queue_name, concurrency=2) for app in apps]
        first = await apps[0].add_job(queue_name, "hold")
        second = await apps[0].add_job(queue_name, "hold")
        await eventually(lambda: started == [first.id], timeout=10)
        assert await backend.is_maxed(queue_name)
        assert await backend.get_job_state(queue_name, second.id) == "waiting"
        release.set()
        await eventually(lambda: started == [first.id, second.id], timeout=10)
    finally:
        release.set()
        await _stop(*running)
        for app in apps:
            await app.close()


async def test_a_throttled_worker_sleeps_until_the_window_frees_CLAIM_11(
    pg_dsn: str, queue_name: str
) -> None:
    app = lane_pg.App(pg_dsn)
    done: list[str] = []

    @app.processor("n")
    async def work(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> None:
        done.append(job.id)

    running = []
    try:
        backend = await app.backend()
        await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 0.4))
        for _ in range(3):
            await app.add_job(queue_name, "n")
        running = [await _run(app, queue_name)]
        await eventually(lambda: len(done) == 3, timeout=10)

        async def all_completed() -> bool:  # a handler ends before its outcome is written
            counts = await backend.get_job_counts(queue_name, ["completed"])
            return counts.get("completed") == 3

        await eventually(all_completed, timeout=10)
        page = await backend.list_jobs(queue_name, ["completed"])
    finally:
        await _stop(*running)
        await app.close()
    starts = sorted(job.processed_at for job in page.items if job.processed_at is not None)
    assert len(starts) == 3
    assert all(b - a >= JobRateLimit(1, 0.4).duration for a, b in itertools.pairwise(starts))


async def test_a_worker_local_limit_claims_without_spinning_RATE_1(queue_name: str) -> None:
    """Memory backend (no LISTEN): every claim is counted; a spinning loop would make
    thousands while the limiter holds the jobs back."""
    app = lane_pg.App("memory://")
    done: list[str] = []

    @app.processor("n")
    async def work(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> None:
        done.append(job.id)

    claims = 0
    try:
        backend = await app.backend()
        assert isinstance(backend, MemoryBackend)

        async def counted(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
            nonlocal claims
            if call.operation.name == "claim_jobs":
                claims += 1
            return await proceed()

        backend.hooks.add(counted)
        for _ in range(4):
            await app.add_job(queue_name, "n")
        running = await _run(app, queue_name, claim_rate_limit=JobRateLimit(2, 0.3))
        try:
            await eventually(lambda: len(done) == 4, timeout=10)
        finally:
            await _stop(running)
    finally:
        await app.close()
    assert claims <= 12, claims


async def test_a_burst_worker_drains_a_throttled_queue_before_it_exits_CLAIM_11(
    queue_name: str,
) -> None:
    """Throttled waiting jobs are ready work: burst mode waits out the window for them
    (while a delayed job is still left behind, as before)."""
    app = lane_pg.App("memory://")
    done: list[str] = []

    @app.processor("n")
    async def work(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> None:
        done.append(job.id)

    try:
        backend = await app.backend()
        await backend.set_claim_rate_limit(queue_name, JobRateLimit(1, 0.2))
        for _ in range(3):
            await app.add_job(queue_name, "n")
        later = await app.add_job(queue_name, "n", options={"delay_ms": 60_000})
        worker = await app.create_worker(lanes=(lane_pg.Lane(queue_name),), burst=True)
        await asyncio.wait_for(worker.run(), 10)
        assert len(done) == 3
        assert await backend.get_job_state(queue_name, later.id) == "delayed"
    finally:
        await app.close()


async def test_worker_command_claim_rate_RATE_1(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    """``python -m lane_pg worker --claim-rate 2/400ms --burst``: every job runs, no
    window of 400 ms holds more than 2 claims."""
    await backend.add_jobs(queue_name, [JobSpec("record", {"n": n}) for n in range(5)])
    worker = await workers.run(
        *queue_args(queue_name), "--burst", "--claim-rate", "2/400ms", timeout=30
    )
    assert worker.returncode == 0, worker.describe()
    page = await backend.list_jobs(queue_name, ["completed"])
    starts = sorted(job.processed_at for job in page.items if job.processed_at is not None)
    assert len(starts) == 5
    window = timedelta(milliseconds=400)
    assert all(sum(1 for t in starts if start <= t < start + window) <= 2 for start in starts), (
        starts
    )


@pytest.mark.parametrize("value", ["2", "0/1s", "2/0ms", "x/1s"])
async def test_worker_command_refuses_a_bad_claim_rate_RATE_1(
    workers: Workers, queue_name: str, value: str
) -> None:
    worker = await workers.run(*queue_args(queue_name), f"--claim-rate={value}", timeout=30)
    assert worker.returncode == 1, worker.describe()
    assert "--claim-rate" in worker.stderr(), worker.describe()
