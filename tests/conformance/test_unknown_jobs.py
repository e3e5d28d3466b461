"""A job whose name no processor serves (WORK-3, A14), through a running worker on every
backend: ``on_unknown_job="fail"`` (the default) fails it for good with ``UnknownJobName``;
``"release"`` gives it back for a worker that knows the name, without spending an attempt
and without a failed-job record."""

from __future__ import annotations

import asyncio

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import FailedJobFilter, MemoryFailedJobStore
from lane_pg.errors import InvalidOptions
from lane_pg.facade.failed import default_failed_store
from lane_pg.types import JSON, JobOptions, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from tests.helpers import eventually

POLL = 0.05


def _config(queue: str, **settings: object) -> WorkerConfig:
    return WorkerConfig(lanes=(Lane(queue),), poll_interval=POLL, **settings)  # type: ignore[arg-type]


async def _done(job: JobRow, ctx: JobContext) -> JSON:
    return "done"


async def test_release_gives_unknown_jobs_back_for_a_worker_that_knows_them_A14_WORK_3(
    backend: JobQueueBackend, queue_name: str
) -> None:
    store = default_failed_store(backend) or MemoryFailedJobStore()
    other = await backend.add_job(queue_name, "other", {"k": 1}, JobOptions(attempts=1))
    send = await backend.add_job(queue_name, "send")
    old = Worker(
        backend,
        {"send": _done},
        _config(queue_name, on_unknown_job="release"),
        failed_store=store,
    )
    running = old.start()
    try:
        await eventually(lambda: old.counts["completed"] == 1, timeout=20)
        # Given back again and again (each time delayed by the poll interval), never failed.
        await eventually(lambda: old.counts["released"] >= 4, timeout=20)
    finally:
        old.stop()
        await asyncio.wait_for(running, 30)
    assert old.counts["failed"] == 0
    stored = await backend.get_job(queue_name, other.id)
    assert stored is not None
    assert stored.state in ("waiting", "delayed")
    assert (stored.attempts_started, stored.attempts_made, stored.failed_reason) == (0, 0, None)
    assert await store.page(FailedJobFilter(queue=queue_name)) == []
    finished = await backend.get_job(queue_name, send.id)
    assert finished is not None and finished.state == "completed"

    # A worker of the newer version runs it, on its first attempt (the budget is one).
    if stored.state == "delayed":
        await backend.promote_job(queue_name, other.id)
    new = Worker(backend, {"other": _done}, _config(queue_name, burst=True), failed_store=store)
    await asyncio.wait_for(new.run(), 30)
    ran = await backend.get_job(queue_name, other.id)
    assert ran is not None
    assert (ran.state, ran.attempts_started, ran.return_value) == ("completed", 1, "done")


async def test_fail_is_the_default_and_records_the_failure_A14_WORK_3(
    backend: JobQueueBackend, queue_name: str
) -> None:
    assert WorkerConfig().on_unknown_job == "fail"
    store = MemoryFailedJobStore()
    other = await backend.add_job(queue_name, "other", None, JobOptions(attempts=3))
    worker = Worker(backend, {"send": _done}, _config(queue_name, burst=True), failed_store=store)
    await asyncio.wait_for(worker.run(), 30)
    stored = await backend.get_job(queue_name, other.id)
    assert stored is not None and stored.state == "failed"
    assert "UnknownJobName" in (stored.failed_reason or "") and "'other'" in stored.failed_reason
    [record] = await store.page(FailedJobFilter(queue=queue_name))
    assert record.job_id == other.id


@pytest.mark.parametrize("value", ["retry", "", "RELEASE", None])
def test_a_bad_on_unknown_job_is_refused_A14(value: object) -> None:
    with pytest.raises(InvalidOptions, match=r"on_unknown_job must be 'fail' or 'release'"):
        WorkerConfig(on_unknown_job=value)  # type: ignore[arg-type]
