"""The worker runtime in-process, on every backend (WORK-*, RETRY-4/7/8, LANE-5; STALL-7
is in test_worker_modes.py).

These drive ``Worker`` directly with a short poll interval and no NOTIFY listener, so the
same test runs against the memory and the PostgreSQL backend. The real-process behaviour
(signals, SIGKILL, LISTEN reconnects) is in tests/worker/.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lane_pg.backend import Hooks, JobQueueBackend, OperationCall, Runs
from lane_pg.backend.runs import ClaimJobs, RenewLeases
from lane_pg.errors import LeaseLost, UnrecoverableJobError
from lane_pg.types import JSON, ClaimedJob, JobOptions, JobRow, JobSpec, Lane, LeaseRef, QueueDemand
from lane_pg.worker import JobContext, Processor, Worker, WorkerConfig
from tests.helpers import eventually


def _worker(
    backend: JobQueueBackend,
    processors: dict[str, Processor],
    lanes: Sequence[Lane],
    **settings: object,
) -> Worker:
    config = WorkerConfig(
        lanes=tuple(lanes),
        poll_interval=0.05,
        **settings,  # type: ignore[arg-type]
    )
    return Worker(backend, processors, config)


async def _state(backend: JobQueueBackend, queue: str, job_id: str) -> JobRow:
    job = await backend.get_job(queue, job_id)
    assert job is not None
    return job


async def test_results_map_to_complete_and_fail_WORK_3_WORK_10_RETRY_7_RETRY_8(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def ok(job: JobRow, ctx: JobContext) -> JSON:
        await ctx.update_progress(100)
        await ctx.log("done")
        return {"echo": job.payload}

    async def broken(job: JobRow, ctx: JobContext) -> JSON:
        raise RuntimeError("broken handler")

    async def fatal(job: JobRow, ctx: JobContext) -> JSON:
        raise UnrecoverableJobError("cannot ever work")

    async def discarding(job: JobRow, ctx: JobContext) -> JSON:
        ctx.discard_retry()
        raise ValueError("give up")

    jobs = {
        "ok": await backend.add_job(queue_name, "ok", {"n": 1}),
        "broken": await backend.add_job(queue_name, "broken", None, JobOptions(attempts=2)),
        "fatal": await backend.add_job(queue_name, "fatal", None, JobOptions(attempts=5)),
        "discarding": await backend.add_job(queue_name, "discarding", None, JobOptions(attempts=5)),
        "stranger": await backend.add_job(queue_name, "stranger"),
    }
    worker = _worker(
        backend,
        {"ok": ok, "broken": broken, "fatal": fatal, "discarding": discarding},
        [Lane(queue_name)],
        burst=True,
    )
    await asyncio.wait_for(worker.run(), 30)

    done = await _state(backend, queue_name, jobs["ok"].id)
    assert (done.state, done.return_value, done.progress) == ("completed", {"echo": {"n": 1}}, 100)
    assert (await backend.get_job_logs(queue_name, done.id)).count == 1
    broken_job = await _state(backend, queue_name, jobs["broken"].id)
    assert (broken_job.state, broken_job.attempts_made) == ("failed", 2)
    assert broken_job.failed_reason == "broken handler"
    assert "RuntimeError: broken handler" in broken_job.stacktrace[-1]  # WORK-14
    for name in ("fatal", "discarding"):
        job = await _state(backend, queue_name, jobs[name].id)
        assert (job.state, job.attempts_made) == ("failed", 1), name
    stranger = await _state(backend, queue_name, jobs["stranger"].id)
    assert stranger.state == "failed"
    assert "UnknownJobName" in (stranger.failed_reason or "")  # A14


async def test_timeout_is_a_failed_attempt_RETRY_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    async def slow(job: JobRow, ctx: JobContext) -> JSON:
        await asyncio.sleep(30)
        return None

    added = await backend.add_job(queue_name, "slow", None, JobOptions(timeout=0.05, attempts=2))
    worker = _worker(backend, {"slow": slow}, [Lane(queue_name)], burst=True)
    await asyncio.wait_for(worker.run(), 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.attempts_made) == ("failed", 2)
    assert "JobTimedOut" in (job.failed_reason or "")


async def test_peak_concurrency_equals_the_configured_value_WORK_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    running = 0
    peak = 0

    async def busy(job: JobRow, ctx: JobContext) -> JSON:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return None

    for n in range(12):
        await backend.add_job(queue_name, "busy", n)
    worker = _worker(backend, {"busy": busy}, [Lane(queue_name)], burst=True, concurrency=3)
    await asyncio.wait_for(worker.run(), 30)
    assert peak == 3
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 12


async def test_higher_priority_lane_is_served_first_with_one_slot_LANE_5(
    backend: JobQueueBackend, queue_name: str
) -> None:
    control, prompt = f"{queue_name}_control", f"{queue_name}_prompt"
    started: list[str] = []

    async def record(job: JobRow, ctx: JobContext) -> JSON:
        started.append(job.queue)
        return None

    for n in range(3):  # prompt work arrives first, interleaved with control work
        await backend.add_job(prompt, "record", n)
        await backend.add_job(control, "record", n)
    worker = _worker(
        backend,
        {"record": record},
        [Lane(prompt, priority=5), Lane(control, priority=1)],
        burst=True,
        concurrency=1,
    )
    await asyncio.wait_for(worker.run(), 30)
    assert started == [control] * 3 + [prompt] * 3


async def test_lost_lease_is_flagged_and_the_result_not_written_WORK_8_WORK_9(
    backend: JobQueueBackend, queue_name: str
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    seen: list[bool] = []
    raised: list[BaseException] = []
    contexts: list[JobContext] = []

    async def patient(job: JobRow, ctx: JobContext) -> JSON:
        contexts.append(ctx)
        started.set()
        await release.wait()
        seen.append(ctx.has_lost_lease())
        try:
            await ctx.update_progress("too late")
        except LeaseLost as exc:
            raised.append(exc)
        return "stale result"

    added = await backend.add_job(queue_name, "patient")
    worker = _worker(
        backend, {"patient": patient}, [Lane(queue_name)], lease=0.6, renew_fraction=0.25
    )
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    # Another worker takes the job over: recovery as if the lease had lapsed, then a claim.
    current = await _state(backend, queue_name, added.id)
    await backend.recover_stalled(
        [queue_name], now=datetime.now(UTC) + timedelta(seconds=5), max_stalled_count=5
    )
    [taken] = await backend.claim_jobs("thief", [QueueDemand(queue_name, 1)], 60)
    assert taken.lock_token != current.lock_token
    # The worker's next renewal fails: it flags the context; the handler keeps running.
    await eventually(lambda: contexts[0].has_lost_lease(), timeout=10)
    release.set()
    worker.stop()
    await asyncio.wait_for(run, 30)
    assert seen == [True]
    assert len(raised) == 1  # context writes are refused after the loss
    assert worker.counts["lost"] == 1  # and the stale result was never written
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.worker_id, job.progress) == ("active", "thief", None)
    assert not await backend.renew_leases(
        [LeaseRef(queue_name, added.id, taken.lock_token or "")], 60
    )


async def test_stop_lets_the_running_job_finish_and_claims_nothing_more_WORK_15(
    backend: JobQueueBackend, queue_name: str
) -> None:
    started = asyncio.Event()
    finish = asyncio.Event()

    async def step(job: JobRow, ctx: JobContext) -> JSON:
        started.set()
        await finish.wait()
        return "finished"

    first = await backend.add_job(queue_name, "step", 1)
    second = await backend.add_job(queue_name, "step", 2)
    worker = _worker(backend, {"step": step}, [Lane(queue_name)], concurrency=1)
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    worker.stop()
    finish.set()
    await asyncio.wait_for(run, 30)
    assert (await _state(backend, queue_name, first.id)).state == "completed"
    assert (await _state(backend, queue_name, second.id)).state == "waiting"


async def test_renewals_are_batched_WORK_6(backend: JobQueueBackend, queue_name: str) -> None:
    calls: list[int] = []

    async def counting(call: OperationCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if isinstance(call.arguments, RenewLeases):
            calls.append(len(call.arguments.leases))
        return await proceed()

    gate = asyncio.Event()

    async def hold(job: JobRow, ctx: JobContext) -> JSON:
        await gate.wait()
        return None

    for n in range(4):
        await backend.add_job(queue_name, "hold", n)
    worker = _worker(
        backend, {"hold": hold}, [Lane(queue_name)], concurrency=4, lease=0.4, renew_fraction=0.25
    )
    backend.hooks.add(counting)
    try:
        run = asyncio.create_task(worker.run())
        await eventually(lambda: len(calls) >= 3 and calls[-1] == 4, timeout=10)
        gate.set()
        worker.stop()
        await asyncio.wait_for(run, 30)
    finally:
        backend.hooks.remove(counting)  # the PostgreSQL backend is the session's
    assert max(calls) == 4  # one call renews every running job
    assert (await backend.get_job_counts(queue_name, ["completed"]))["completed"] == 4


async def test_lost_lease_can_cancel_the_run_when_configured(
    backend: JobQueueBackend, queue_name: str
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def patient(job: JobRow, ctx: JobContext) -> JSON:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    added = await backend.add_job(queue_name, "patient")
    worker = _worker(
        backend,
        {"patient": patient},
        [Lane(queue_name)],
        lease=0.6,
        renew_fraction=0.25,
        cancel_on_lease_loss=True,
        concurrency=1,  # the old run keeps the only slot: the thief's claim is the one
    )
    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    await backend.recover_stalled(
        [queue_name], now=datetime.now(UTC) + timedelta(seconds=5), max_stalled_count=5
    )
    await backend.claim_jobs("thief", [QueueDemand(queue_name, 1)], 60)
    await asyncio.wait_for(cancelled.wait(), 10)
    worker.stop()
    await asyncio.wait_for(run, 30)
    assert worker.counts["lost"] == 1
    assert (await _state(backend, queue_name, added.id)).worker_id == "thief"


async def test_a_worker_that_claims_back_its_own_job_tracks_both_runs_WORK_8_CLAIM_4(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """The run whose lease lapsed and the run of the same worker's new claim are two runs:
    the old one is told it lost the lease and its result is never written, the new one
    completes. (Keyed by job, the new run replaced the old in the worker's registry: the
    old run was never flagged and its slot never freed.)"""
    first_started, release_first = asyncio.Event(), asyncio.Event()
    runs: list[JobContext] = []

    async def twice(job: JobRow, ctx: JobContext) -> JSON:
        runs.append(ctx)
        if len(runs) == 1:
            first_started.set()
            await release_first.wait()
            return "first run"
        return "second run"

    added = await backend.add_job(queue_name, "twice", None, JobOptions(attempts=3))
    worker = _worker(backend, {"twice": twice}, [Lane(queue_name)], lease=0.6, concurrency=2)
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(first_started.wait(), 10)
        await backend.recover_stalled(
            [queue_name], now=datetime.now(UTC) + timedelta(seconds=5), max_stalled_count=5
        )

        async def second_run_done() -> bool:
            return (await _state(backend, queue_name, added.id)).state == "completed"

        await eventually(second_run_done, timeout=10)
        await eventually(lambda: runs[0].has_lost_lease(), timeout=10)
        release_first.set()
        await eventually(lambda: len(worker._running) == 0, timeout=10)
    finally:
        release_first.set()
        worker.stop()
        await asyncio.wait_for(run, 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.return_value) == ("completed", "second run")
    assert len(runs) == 2 and not runs[1].has_lost_lease()
    assert worker.counts["completed"] == 1 and worker.counts["lost"] == 1


async def test_burst_does_not_stop_while_a_retry_is_written_during_a_claim_WORK_15(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """A failure that puts its job back to waiting can be written while the next claim is
    in flight; that claim's empty answer must not end a burst worker (found by the
    events-toggle worker test: the retry was left waiting)."""
    claim_answered = asyncio.Event()

    async def flaky(job: JobRow, ctx: JobContext) -> JSON:
        if job.attempts_started == 1:
            await claim_answered.wait()  # fail only once the next claim found nothing
            raise RuntimeError("first attempt fails")
        return "second attempt"

    added = await backend.add_job(queue_name, "flaky", None, JobOptions(attempts=2))

    class ClaimOutlivesTheRetry:
        """Holds the claim made while the first attempt runs until that attempt is back
        in waiting and the worker has let go of it: the claim's answer predates the retry."""

        def __getattr__(self, name: str) -> object:
            if name in Runs.operations:  # the other runs operations, handed on as they are
                return backend.runs.perform
            return getattr(backend, name)

        @property
        def runs(self) -> Runs:
            """The worker claims through this handle, served by this wrapper."""
            return Runs(self, Hooks(backend.kind))

        async def dedicated(self) -> None:
            return None  # claims must come through this wrapper

        async def claim_jobs(self, args: ClaimJobs) -> list[ClaimedJob]:
            jobs = await backend.runs.perform(args)
            if not jobs and not claim_answered.is_set():
                claim_answered.set()

                async def retried() -> bool:
                    state = await backend.get_job_state(queue_name, added.id)
                    return state == "waiting" and not worker._running

                await eventually(retried)
            return jobs

    worker = _worker(
        ClaimOutlivesTheRetry(),  # type: ignore[arg-type]
        {"flaky": flaky},
        [Lane(queue_name)],
        burst=True,
        concurrency=2,
    )
    await asyncio.wait_for(worker.run(), 30)
    job = await _state(backend, queue_name, added.id)
    assert (job.state, job.attempts_made, job.return_value) == ("completed", 1, "second attempt")


async def test_a_lane_without_a_max_may_fill_the_worker_WORK_7(
    backend: JobQueueBackend, queue_name: str
) -> None:
    """``Lane(name)`` (no max) claims up to the worker's concurrency, counting the jobs it
    already runs once (it used to stop claiming at half the worker)."""
    peak = 0
    running = 0
    release = asyncio.Event()

    async def hold(job: JobRow, ctx: JobContext) -> JSON:
        nonlocal peak, running
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return None

    await backend.add_job(queue_name, "hold")
    worker = _worker(backend, {"hold": hold}, [Lane(queue_name)], concurrency=4)
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: running == 1)
        await backend.add_jobs(queue_name, [JobSpec("hold") for _ in range(3)])
        await eventually(lambda: running == 4)
    finally:
        release.set()
        worker.stop()
        await asyncio.wait_for(task, 30)
    assert peak == 4
