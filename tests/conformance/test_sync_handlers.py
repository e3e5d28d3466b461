"""Plain ``def`` handlers run in the worker's thread pool, never on the event loop; a
handler's own ``TimeoutError`` is an ordinary failure, not the job's timeout."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Sequence

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import InvalidOptions, LeaseLost
from lane_pg.types import JSON, Backoff, JobOptions, JobRow, Lane, QueueDemand
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker.context import SyncJobContext
from lane_pg.worker.threads import is_async_callable
from tests.helpers import eventually

RETRY_NOW = Backoff.fixed(0)


def _worker(
    backend: JobQueueBackend,
    processors: dict[str, object],
    lanes: Sequence[Lane],
    **settings: object,
) -> Worker:
    config = WorkerConfig(lanes=tuple(lanes), poll_interval=0.05, **settings)  # type: ignore[arg-type]
    return Worker(backend, processors, config)  # type: ignore[arg-type]


async def _state(backend: JobQueueBackend, queue: str, job_id: str) -> JobRow:
    job = await backend.get_job(queue, job_id)
    assert job is not None
    return job


async def test_a_plain_def_processor_runs_once_in_a_thread_with_a_blocking_context(
    backend: JobQueueBackend, queue_name: str
) -> None:
    runs: list[tuple[str, bool]] = []

    def send_email(job: JobRow, ctx: SyncJobContext) -> JSON:
        ctx.update_progress({"sent": True})  # blocks on the worker's loop, from the thread
        ctx.log("sent")
        runs.append((threading.current_thread().name, ctx.cancelled))
        return {"to": job.payload}

    added = await backend.add_job(queue_name, "send_email", "ann@example.com")
    worker = _worker(backend, {"send_email": send_email}, [Lane(queue_name)], burst=True)
    await asyncio.wait_for(worker.run(), 30)

    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value, job.progress) == (
        "completed",
        {"to": "ann@example.com"},
        {"sent": True},
    )
    assert (await backend.get_job_logs(queue_name, added.id)).count == 1
    assert len(runs) == 1 and runs[0][1] is False
    assert runs[0][0].startswith("lane_pg-sync")  # not the event loop's thread


async def test_a_failing_sync_processor_is_retried_and_a_process_method_may_be_sync(
    backend: JobQueueBackend, queue_name: str
) -> None:
    class Flaky:
        def __init__(self) -> None:
            self.calls = 0

        def process(self, job: JobRow, ctx: SyncJobContext) -> JSON:
            self.calls += 1
            if self.calls == 1:
                raise ValueError("first call fails")
            return self.calls

    flaky = Flaky()
    added = await backend.add_job(
        queue_name, "flaky", None, JobOptions(attempts=3, backoff=RETRY_NOW)
    )
    worker = _worker(backend, {"flaky": flaky}, [Lane(queue_name)], burst=True)
    await asyncio.wait_for(worker.run(), 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value, job.attempts_made, flaky.calls) == ("completed", 2, 1, 2)
    assert "ValueError: first call fails" in job.stacktrace[0]


async def test_a_sync_handler_that_outlives_its_timeout_cannot_settle_the_job(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """Attempt 1 blocks past its timeout: the job is failed and retried by the event loop,
    attempt 2 runs (in another thread) and completes; attempt 1's late return is dropped,
    and its context sees the cancellation and has its writes refused."""
    release = threading.Event()
    late: list[object] = []

    def slow(job: JobRow, ctx: SyncJobContext) -> JSON:
        if job.attempts_started > 1:
            return {"attempt": job.attempts_started}
        release.wait(30)
        late.append(ctx.cancelled)
        try:
            ctx.update_progress("late")
        except LeaseLost:
            late.append("refused")
        late.append("returned")
        return {"late": True}

    added = await backend.add_job(
        queue_name, "slow", None, JobOptions(attempts=2, backoff=RETRY_NOW, timeout=0.2)
    )
    worker = _worker(backend, {"slow": slow}, [Lane(queue_name)], burst=True, sync_threads=2)
    await asyncio.wait_for(worker.run(), 30)  # attempt 1 is still blocked in its thread

    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value, job.attempts_made) == ("completed", {"attempt": 2}, 1)
    assert "JobTimedOut" in job.stacktrace[0]
    assert worker._runner.threads.abandoned == 1
    release.set()
    await eventually(lambda: late[-1:] == ["returned"], timeout=10)
    await eventually(lambda: worker._runner.threads.abandoned == 0, timeout=10)
    assert late == [True, "refused", "returned"]
    after = await _state(backend, queue_name, added.id)
    assert (after.state, after.return_value, after.progress) == ("completed", {"attempt": 2}, None)


async def test_a_timed_out_sync_handler_fails_the_job_for_good_when_no_attempt_is_left(
    backend: JobQueueBackend, queue_name: str
) -> None:
    release = threading.Event()
    returned = threading.Event()

    def stuck(job: JobRow, ctx: SyncJobContext) -> JSON:
        release.wait(30)
        returned.set()
        return "late"

    added = await backend.add_job(queue_name, "stuck", None, JobOptions(attempts=1, timeout=0.1))
    worker = _worker(backend, {"stuck": stuck}, [Lane(queue_name)], burst=True)
    await asyncio.wait_for(worker.run(), 30)
    release.set()
    await eventually(returned.is_set, timeout=10)
    await asyncio.sleep(0)  # the thread's late result reaches the loop, and is dropped
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value) == ("failed", None)
    assert "JobTimedOut" in (job.failed_reason or "")


async def test_leases_are_renewed_while_a_sync_handler_blocks_its_thread(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """The handler blocks its thread for three leases; the event loop keeps renewing, so
    stalled recovery (run by this worker as leader) never takes the job back."""

    def long_call(job: JobRow, ctx: SyncJobContext) -> JSON:
        time.sleep(1.5)  # a blocking client call: only this thread waits
        return {"lost": ctx.has_lost_lease()}

    added = await backend.add_job(queue_name, "long_call", None, JobOptions(attempts=3))
    worker = _worker(backend, {"long_call": long_call}, [Lane(queue_name)], burst=True, lease=0.5)
    await asyncio.wait_for(worker.run(), 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value, job.attempts_started) == ("completed", {"lost": False}, 1)
    assert worker.counts["lost"] == 0


async def test_a_lost_lease_wakes_a_sync_handler_waiting_on_its_context(
    backend: JobQueueBackend, queue_name: str
) -> None:
    await backend.add_job(queue_name, "watch", None)
    [claimed] = await backend.claim_jobs("w", [QueueDemand(queue_name, 1)], 30.0)
    context = JobContext(backend, claimed, "w")
    entered = threading.Event()

    def watch(ctx: SyncJobContext) -> tuple[bool, bool]:
        entered.set()
        return ctx.wait(30), ctx.cancelled

    running = asyncio.create_task(context.run_in_thread(watch))
    await eventually(entered.is_set, timeout=10)
    context.mark_lease_lost()  # what lease renewal does when the lease is gone
    assert await asyncio.wait_for(running, 10) == (True, True)


async def test_sync_detection_sees_partials_methods_and_callable_objects() -> None:
    async def coroutine_function(job: JobRow, ctx: JobContext) -> JSON:
        return None

    def plain(job: JobRow, ctx: SyncJobContext) -> JSON:
        return None

    class AsyncCall:
        async def __call__(self, job: JobRow, ctx: JobContext) -> JSON:
            return None

    class SyncCall:
        def __call__(self, job: JobRow, ctx: SyncJobContext) -> JSON:
            return None

    @functools.wraps(coroutine_function)
    def decorated(job: JobRow, ctx: JobContext) -> object:
        return coroutine_function(job, ctx)

    assert is_async_callable(coroutine_function)
    assert is_async_callable(functools.partial(coroutine_function))
    assert is_async_callable(AsyncCall())
    assert is_async_callable(decorated)
    assert not is_async_callable(plain)
    assert not is_async_callable(functools.partial(plain))
    assert not is_async_callable(SyncCall())


def test_sync_threads_is_validated() -> None:
    assert WorkerConfig(concurrency=7).sync_thread_count == 7
    assert WorkerConfig(sync_threads=3).sync_thread_count == 3
    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidOptions, match="sync_threads"):
            WorkerConfig(sync_threads=bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ a handler's TimeoutError


async def _own_timeout_then_success(
    backend: JobQueueBackend,
    queue_name: str,
    processor: object,
    options: JobOptions,
    **settings: object,
) -> JobRow:
    added = await backend.add_job(queue_name, "call_api", None, options)
    worker = _worker(backend, {"call_api": processor}, [Lane(queue_name)], burst=True, **settings)
    await asyncio.wait_for(worker.run(), 30)
    return await _state(backend, queue_name, added.id)


async def _flaky_api(job: JobRow, ctx: JobContext) -> JSON:
    if job.attempts_started == 1:
        raise TimeoutError("the API did not answer in 5s")
    return "answered"


def _flaky_sync_api(job: JobRow, ctx: SyncJobContext) -> JSON:
    if job.attempts_started == 1:
        raise TimeoutError("the API did not answer in 5s")  # socket.timeout is this one
    return "answered"


async def test_a_handlers_own_timeout_error_is_an_ordinary_failure_without_a_job_timeout(
    backend: JobQueueBackend, queue_name: str
) -> None:
    job = await _own_timeout_then_success(
        backend, queue_name, _flaky_api, JobOptions(attempts=2, backoff=RETRY_NOW)
    )
    assert (job.state, job.return_value, job.attempts_made) == ("completed", "answered", 1)
    assert "TimeoutError: the API did not answer in 5s" in job.stacktrace[0]
    assert "JobTimedOut" not in job.stacktrace[0]


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_handlers_own_timeout_error_keeps_its_attempts_under_fail_on_timeout(
    backend: JobQueueBackend, queue_name: str, kind: str
) -> None:
    processor = _flaky_api if kind == "async" else _flaky_sync_api
    options = JobOptions(attempts=2, backoff=RETRY_NOW, timeout=30)
    job = await _own_timeout_then_success(
        backend, queue_name, processor, options, fail_on_timeout=True
    )
    assert (job.state, job.return_value, job.attempts_made) == ("completed", "answered", 1)
    assert "TimeoutError: the API did not answer in 5s" in job.stacktrace[0]


async def test_the_jobs_own_timeout_still_fails_for_good_under_fail_on_timeout(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def slow(job: JobRow, ctx: JobContext) -> JSON:
        await asyncio.sleep(30)
        return None

    added = await backend.add_job(
        queue_name, "slow", None, JobOptions(attempts=3, backoff=RETRY_NOW, timeout=0.05)
    )
    worker = _worker(backend, {"slow": slow}, [Lane(queue_name)], burst=True, fail_on_timeout=True)
    await asyncio.wait_for(worker.run(), 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.attempts_made) == ("failed", 1)
    assert "TimeoutExceeded" in (job.failed_reason or "") or "timeout" in (job.failed_reason or "")
