"""Running claimed jobs: the registry of running jobs and one task per job.

A job's task routes it to its processor by name (WORK-3), enforces its timeout, and hands
the outcome to the settlement (``settlement.Settlement``); the job keeps its slot and its
lease renewals until that outcome is written.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lane_pg import tracing
from lane_pg.errors import (
    DeleteRequested,
    FailedChildren,
    JobTimedOut,
    MaxAttemptsExceeded,
    ReleaseRequested,
    TimeoutExceeded,
    UnknownJobName,
    UnrecoverableJobError,
)
from lane_pg.types import JSON, ClaimedJob, JobRow, check_json
from lane_pg.worker import joblog
from lane_pg.worker.context import AsyncProcessor, JobContext, Processor, SyncProcessor
from lane_pg.worker.joblog import jobs_log
from lane_pg.worker.threads import SyncThreads, is_async_callable

if TYPE_CHECKING:  # settlement.py imports Running from here
    from lane_pg.worker.settlement import Settlement

log = logging.getLogger("lane_pg.worker")


@dataclass(slots=True)
class Running:
    """One claimed job between its claim and the write of its outcome."""

    job: ClaimedJob
    lane: str
    context: JobContext
    task: asyncio.Task[None] | None = None
    settling: bool = False
    """Its outcome is queued for the settlement: a lease loss no longer matters to it."""
    started_at: float | None = None
    """``time.monotonic()`` at its claim, taken only when INFO is on for ``lane_pg.jobs``."""
    run_seconds: float | None = None
    """How long its handler ran (set when it completed, with ``started_at``)."""
    slot_until_written: bool = False
    """Its slot stays taken until its outcome is written (``RunningJobs.settle``)."""
    trace: object | None = None
    """Its ``process`` span's context when tracing is on: the parent of its ``settle``
    span (``lane_pg.tracing``)."""


class RunningJobs:
    """The jobs a worker holds, by ``(queue, id, lock token)``, with a count per lane (a
    lane is a queue) of those whose handler still runs. ``on_change`` runs whenever a slot
    frees up.

    A job is held from its claim until its outcome is written; its slot (``busy``,
    ``in_lane``) is free as soon as its handler ended and the outcome is queued
    (``settle``), so the next claim goes out while the settlement writes the last batch.
    Holding the slot until the write, a worker at concurrency 10 waited for two round trips
    in series per batch and idled in ``select`` half the time (W3, py-spy).

    Keyed by the token, not the job: a worker can claim back its own job while the run whose
    lease lapsed is still going (a blocked handler, stalled recovery in between). Keyed by
    job, the new run replaced the old one, which was then never flagged, cancelled or freed.
    """

    def __init__(self, on_change: Callable[[], None], hold_limit: int) -> None:
        self._jobs: dict[tuple[str, str, str], Running] = {}
        self._per_lane: dict[str, int] = {}
        self._busy = 0
        self._on_change = on_change
        self.wake_on_every_finish = False
        """Call ``on_change`` for every written outcome too (callers waiting for idle)."""
        self.hold_limit = hold_limit
        """The most jobs held at once, outcomes not yet written included: the claim loop
        claims no more than ``hold_limit - len(self)``."""

    def __len__(self) -> int:
        """Jobs held: handlers running plus outcomes not yet written."""
        return len(self._jobs)

    def __iter__(self) -> Iterator[Running]:
        return iter(list(self._jobs.values()))

    @property
    def busy(self) -> int:
        """Held jobs whose handler still runs (each takes a slot of the concurrency)."""
        return self._busy

    def get(self, queue: str, job_id: str, token: str) -> Running | None:
        return self._jobs.get((queue, job_id, token))

    def in_lane(self, lane: str) -> int:
        """Handlers running in ``lane``."""
        return self._per_lane.get(lane, 0)

    def add(self, running: Running) -> None:
        job = running.job
        self._jobs[(job.queue, job.id, job.lock_token)] = running
        self._per_lane[running.lane] = self._per_lane.get(running.lane, 0) + 1
        self._busy += 1

    def settle(self, running: Running, *, hold_slot: bool = False) -> None:
        """The handler ended and its outcome is queued for writing: its slot is free, unless
        ``hold_slot`` keeps it until the write (``finish``)."""
        if running.settling:
            return
        running.settling = True
        if hold_slot:
            running.slot_until_written = True
            return
        self._release_slot(running)
        self._on_change()

    def finish(self, running: Running) -> None:
        """Forget a job whose outcome is written (or abandoned); frees its slot."""
        job = running.job
        at_limit = len(self._jobs) >= self.hold_limit
        held = self._jobs.pop((job.queue, job.id, job.lock_token), None) is not None
        if held and (not running.settling or running.slot_until_written):
            self._release_slot(running)
        elif held and not at_limit and not self.wake_on_every_finish:
            # Its slot was freed when its outcome was queued (settle) and the hold limit
            # did not bind: nothing new to claim for. Waking the claim loop here too cost
            # an empty claim and a next_due_in round trip per job (W4).
            return
        self._on_change()

    def _release_slot(self, running: Running) -> None:
        self._per_lane[running.lane] -= 1
        self._busy -= 1


def as_async(processor: Processor) -> AsyncProcessor:
    """``processor`` itself when it is ``async``; a plain ``def`` (Celery's, RQ's habit) as
    a processor that runs it in a thread of the worker's pool with a ``SyncJobContext``:
    on the event loop it would stop every other job and the lease renewals."""
    if is_async_callable(processor):
        return processor  # type: ignore[return-value]  # async by declaration
    sync: SyncProcessor = processor  # type: ignore[assignment]

    async def in_thread(job: JobRow, ctx: JobContext) -> JSON:
        result = await ctx.run_in_thread(lambda threaded: sync(job, threaded))
        if inspect.isawaitable(result):
            # A plain function that returned a coroutine (a decorator without
            # functools.wraps around an async def): it was given a thread's context, so
            # running it now would misbehave. A mistake in the code: no retry helps.
            close = getattr(result, "close", None)
            if callable(close):
                close()
            raise UnrecoverableJobError(
                f"the processor of {job.name!r} is a plain function that returned an"
                " awaitable: declare it async def (or keep __wrapped__ on its decorator)"
            )
        return result

    return in_thread


class JobRunner:
    """Starts one task per claimed job and maps its processor's outcome (WORK-10).

    ``fallback`` runs the jobs whose name has no processor of its own (a worker made with
    one processor for every name); without it they fail with ``UnknownJobName``, or, with
    ``give_back_unknown_after`` (seconds, ``on_unknown_job="release"``, A14), are given
    back for another worker, delayed by that long. ``fail_on_timeout`` makes a timeout
    terminal (RETRY-4).
    """

    def __init__(
        self,
        processors: Mapping[str, Processor],
        jobs: RunningJobs,
        settlement: Settlement,
        counts: dict[str, int],
        *,
        fallback: Processor | None = None,
        fail_on_timeout: bool = False,
        give_back_unknown_after: float | None = None,
        sync_threads: int = 10,
    ) -> None:
        # Resolved once here: the job's task calls an async function whatever was given.
        self._processors = {name: as_async(p) for name, p in processors.items()}
        self._jobs = jobs
        self._settlement = settlement
        self._counts = counts
        self._fallback = None if fallback is None else as_async(fallback)
        self.threads = SyncThreads(sync_threads)
        """The pool of sync handlers' threads (started on demand, closed by the worker)."""
        self._fail_on_timeout = fail_on_timeout
        self._give_back_after = give_back_unknown_after
        self._given_back_names: set[str] = set()

    def start(self, job: ClaimedJob, context: JobContext) -> Running:
        self._counts["claimed"] += 1
        context.threads = self.threads
        running = Running(job, job.queue, context)
        self._jobs.add(running)
        if jobs_log.isEnabledFor(logging.INFO):  # -v: nothing is formatted otherwise
            running.started_at = time.monotonic()
            joblog.claimed(job, context.worker_id)
        running.task = asyncio.create_task(self._execute(running), name=f"lane_pg-job-{job.id}")
        return running

    async def _execute(self, running: Running) -> None:
        job, context = running.job, running.context
        settlement = self._settlement
        try:
            if job.attempts_started > job.max_attempts and job.repeat_key is None:
                # STALL-7: the budget is spent (a crash consumed it): never run again. Here,
                # in the job's task, so every way of running a job checks it (WORK-13).
                # Not a repeat series' owner: a lost delivery keeps its series, as stalled
                # recovery does (docs/options.md); failing it ended the series for good
                # after one frozen worker (found by the soak, with one attempt).
                error: BaseException = MaxAttemptsExceeded(
                    job.name,
                    job.attempts_started,
                    f"delivered {job.attempts_started} times, allowed {job.max_attempts}",
                )
                settlement.fail(running, error, discard=True)
                return
            if job.deferred_failure is not None:
                # WORK-11, FLOW-9: a child failure failed this parent; it never runs.
                settlement.fail(running, FailedChildren(job.deferred_failure), discard=True)
                return
            processor = self._processors.get(job.name) or self._fallback
            if processor is None and self._give_back_after is not None:
                self._tell_given_back(job.name)
                await settlement.give_back(running, self._give_back_after)
                return
            if processor is None:
                error = UnknownJobName(
                    f"UnknownJobName: no processor is registered for job name {job.name!r}"
                )
                settlement.fail(running, error, discard=True)
                return
            told = settlement.telling(job.queue, job.id)
            if told is not None:
                await told.wait()
            timeout = None if job.timeout_ms is None else job.timeout_ms / 1000
            try:
                # In this task, not a task of wait_for's own: one task and one event-loop
                # turn less per job (W3); no timeout, no timer.
                if tracing.enabled():  # off: one global read per job, no span
                    claimed = job.processed_at
                    waited = None if claimed is None else (claimed - job.available_at)
                    with tracing.processing(
                        job.queue,
                        job.id,
                        job.name,
                        job.attempts_started,
                        job.options.get("meta"),
                        None if waited is None else waited.total_seconds(),
                    ) as running.trace:
                        if timeout is None:
                            result = await processor(job, context)
                        else:
                            async with asyncio.timeout(timeout) as deadline:
                                result = await processor(job, context)
                elif timeout is None:
                    result = await processor(job, context)
                else:
                    async with asyncio.timeout(timeout) as deadline:
                        result = await processor(job, context)
                check_json(result, "the processor's result")
            except TimeoutError as exc:
                # Only the job's own deadline is its timeout: a TimeoutError the handler
                # raised (an HTTP client's, a socket's) is an ordinary failed attempt.
                if timeout is None or not deadline.expired():
                    settlement.fail(running, exc, discard=context.retry_discarded)
                elif self._fail_on_timeout or job.options.get("fail_on_timeout") is True:
                    error = TimeoutExceeded(job.name, timeout)
                    settlement.fail(running, error, discard=True)
                else:
                    error = JobTimedOut(f"JobTimedOut: job {job.name} ran longer than {timeout}s")
                    settlement.fail(running, error, discard=context.retry_discarded)
            except ReleaseRequested as exc:
                # MW-2, RETRY-6: back to the queue, its attempt given back.
                await settlement.give_back(running, exc.delay)
            except DeleteRequested:
                await settlement.discard(running)
            except UnrecoverableJobError as exc:
                settlement.fail(running, exc, discard=True)
            except asyncio.CancelledError:
                if context.has_lost_lease():
                    log.warning("job %s/%s: lease lost, run abandoned", job.queue, job.id)
                    settlement.abandon(running)
                    return
                raise
            except Exception as exc:
                settlement.fail(running, exc, discard=context.retry_discarded)
            else:
                settlement.complete(running, result)
        except asyncio.CancelledError:
            # Shutdown deadline passed: hand the job back to the queue for another worker.
            await settlement.release(running)
            raise

    def _tell_given_back(self, name: str) -> None:
        """Once per job name and worker: a log line per job would flood (A14)."""
        if name in self._given_back_names:
            return
        self._given_back_names.add(name)
        log.warning(
            "no processor for job name %r here: its jobs are given back for a worker that"
            " has one (on_unknown_job=release), each delayed by %gs",
            name,
            self._give_back_after,
        )
