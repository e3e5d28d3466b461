"""A worker's queues and its forced stop, in-process on every backend (issue 22).

``Worker`` refuses to start without the queues it serves unless told ``all_queues``;
``stop()`` lets running jobs finish, ``stop(force=True)`` gives them back at once: waiting,
lease cleared, the attempt not counted. The real-process side (signals, exit codes) is in
tests/worker/test_lifecycle_cli.py."""

from __future__ import annotations

import asyncio

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.types import JSON, JobOptions, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker import runtime as worker_runtime
from tests.helpers import eventually

BOUND = 20.0  # seconds: no wait here may take longer


def test_a_worker_needs_the_queues_it_serves() -> None:
    from lane_pg.memory import MemoryBackend

    with pytest.raises(ConfigurationError, match=r"lanes=.*all_queues=True"):
        Worker(MemoryBackend(), {})
    with pytest.raises(ConfigurationError, match="all_queues=True"):
        Worker(MemoryBackend(), {}, WorkerConfig(poll_interval=0.05))
    assert Worker(MemoryBackend(), {}, WorkerConfig(all_queues=True)).lanes == ()
    with pytest.raises(InvalidOptions, match="all_queues serves every queue"):
        WorkerConfig(all_queues=True, lanes=(Lane("a"),))


async def _state(backend: JobQueueBackend, queue: str, job_id: str) -> JobRow:
    job = await backend.get_job(queue, job_id)
    assert job is not None
    return job


async def _active(backend: JobQueueBackend, queue: str, job_id: str) -> bool:
    return (await _state(backend, queue, job_id)).state == "active"


async def test_a_forced_stop_gives_running_jobs_back_at_once(
    backend: JobQueueBackend, queue_name: str
) -> None:
    never = asyncio.Event()
    ran: list[str] = []

    async def hangs(job: JobRow, ctx: JobContext) -> JSON:
        ran.append(job.id)
        await never.wait()
        return None

    jobs = [
        await backend.add_job(queue_name, "hangs", None, JobOptions(attempts=1)) for _ in range(2)
    ]
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, shutdown_timeout=600)
    worker = Worker(backend, {"hangs": hangs}, config)
    task = worker.start()
    try:
        for job in jobs:
            await eventually(lambda job=job: _active(backend, queue_name, job.id), timeout=BOUND)
        await eventually(lambda: worker.running == 2, timeout=BOUND)

        worker.stop()
        worker.stop()  # a second plain stop does not force
        assert not worker.forced
        await asyncio.sleep(0)
        assert not task.done() and worker.running == 2

        worker.stop(force=True)
        assert worker.forced
        await asyncio.wait_for(task, BOUND)
    finally:
        never.set()
        if not task.done():
            task.cancel()
    assert sorted(worker.given_back) == sorted((queue_name, job.id) for job in jobs)
    for job in jobs:
        row = await _state(backend, queue_name, job.id)
        assert row.state == "waiting", row
        assert (row.lock_token, row.lease_expires_at) == (None, None)
        assert (row.attempts_started, row.attempts_made, row.failed_reason) == (0, 0, None)
    assert worker.counts["released"] == 2 and worker.counts["failed"] == 0

    # Given back whole: each runs again, its single attempt intact.
    async def done(job: JobRow, ctx: JobContext) -> JSON:
        return "done"

    again = Worker(backend, {"hangs": done}, WorkerConfig(lanes=(Lane(queue_name),), burst=True))
    await asyncio.wait_for(again.run(), BOUND)
    for job in jobs:
        assert (await _state(backend, queue_name, job.id)).state == "completed"


async def test_a_forced_stop_does_not_wait_for_a_handler_that_ignores_cancellation(
    backend: JobQueueBackend, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_runtime, "FORCED_GRACE", 0.2)
    let_go = asyncio.Event()
    cancels: list[int] = []
    returned: list[str] = []

    async def stubborn(job: JobRow, ctx: JobContext) -> JSON:
        while not let_go.is_set():
            try:
                await let_go.wait()
            except asyncio.CancelledError:
                cancels.append(1)  # swallowed: the handler goes on
        returned.append(job.id)
        return "late"

    job = await backend.add_job(queue_name, "stubborn")
    worker = Worker(backend, {"stubborn": stubborn}, WorkerConfig(lanes=(Lane(queue_name),)))
    task = worker.start()
    try:
        await eventually(lambda: _active(backend, queue_name, job.id), timeout=BOUND)
        worker.stop(force=True)
        await asyncio.wait_for(task, BOUND)
        assert cancels, "the handler was never cancelled"
        assert worker.given_back == [(queue_name, job.id)]
        row = await _state(backend, queue_name, job.id)
        assert (row.state, row.lock_token, row.attempts_started) == ("waiting", None, 0)
    finally:
        let_go.set()
    await eventually(lambda: returned == [job.id], timeout=BOUND)
    await asyncio.sleep(0)  # its late outcome, had anything taken it, would be queued now
    row = await _state(backend, queue_name, job.id)
    assert (row.state, row.return_value) == ("waiting", None)


async def test_a_plain_stop_still_waits_for_running_jobs(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """Unchanged: ``stop()`` lets a running job finish and write its outcome."""
    release = asyncio.Event()

    async def waits(job: JobRow, ctx: JobContext) -> JSON:
        await release.wait()
        return "finished"

    job = await backend.add_job(queue_name, "waits")
    worker = Worker(backend, {"waits": waits}, WorkerConfig(lanes=(Lane(queue_name),)))
    task = worker.start()
    await eventually(lambda: _active(backend, queue_name, job.id), timeout=BOUND)
    worker.stop()
    release.set()
    await asyncio.wait_for(task, BOUND)
    row = await _state(backend, queue_name, job.id)
    assert (row.state, row.return_value, worker.given_back) == ("completed", "finished", [])


@pytest.mark.parametrize("method", ["run", "run_until_idle"])
async def test_cancelling_a_workers_task_cancels_its_handlers_and_gives_their_jobs_back(
    backend: JobQueueBackend, queue_name: str, method: str
) -> None:
    """A handler must not outlive its worker: with the lease renewal gone it would run on
    beside the job's next claim."""
    never = asyncio.Event()
    cancelled: list[str] = []

    async def hangs(job: JobRow, ctx: JobContext) -> JSON:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(job.id)
            raise
        return None

    job = await backend.add_job(queue_name, "hangs", None, JobOptions(attempts=1))
    worker = Worker(backend, {"hangs": hangs}, WorkerConfig(lanes=(Lane(queue_name),)))
    task = asyncio.create_task(getattr(worker, method)())
    await eventually(lambda: worker.running == 1, timeout=BOUND)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND)

    assert cancelled == [job.id] and worker.running == 0
    assert worker.given_back == [(queue_name, job.id)]
    row = await _state(backend, queue_name, job.id)
    assert (row.state, row.lock_token, row.attempts_made) == ("waiting", None, 0)
