"""Writing outcomes: completions and failures in batches, releases at shutdown.

One settlement task writes whatever finished while the previous batch was being written
(group commit), so batching adds no waiting. Every item carries the token of its claim: a
run whose lease was taken over has its outcome refused (``lock_mismatch``) and counted as
lost, never written over the new owner's.

Failed-job records (FAIL-2, FAIL-3): with a store the backend writes itself (the database
store of the worker's own database) the failures go to ``fail_jobs_recording``, which
records those that end in the transaction that ends them. With a store elsewhere (memory)
the record of a job that fails for good is logged first; when the store raises, the job is
not settled: it stays active under our token, its lease lapses and it comes back. Without
a store nothing changes on the write path; a job that failed for good is logged (queue, id,
name, reason: never its data or ``options.meta``, FAIL-7).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Sequence
from itertools import zip_longest
from typing import TypeAlias

from lane_pg import tracing
from lane_pg.backend import FailedRecords, JobQueueBackend
from lane_pg.backend.failed import (
    FailedJobRecord,
    FailedJobStore,
    RecordsInSettlement,
    fails_for_good,
)
from lane_pg.errors import JobTimedOut, PendingDependencies, TimeoutExceeded
from lane_pg.types import JSON, Completion, Failure, FinalizeOutcome, JobRow
from lane_pg.worker import joblog
from lane_pg.worker.causes import failure_cause
from lane_pg.worker.execution import Running, RunningJobs
from lane_pg.worker.joblog import describe_error, jobs_log
from lane_pg.worker.pausing import WorkerHooks

log = logging.getLogger("lane_pg.worker")

Key: TypeAlias = tuple[str, str, str]
"""A held run: queue, job id, lock token."""
Known: TypeAlias = tuple[JobRow, BaseException, bool]
"""A queued failure's job, exception and whether its retries were discarded."""


def _in_batch(job: JobRow) -> bool:
    meta = job.options.get("meta")
    return isinstance(meta, dict) and "batch_id" in meta


class Settlement:
    """Queues outcomes of running jobs and writes them in batches."""

    def __init__(
        self,
        backend: JobQueueBackend,
        jobs: RunningJobs,
        counts: dict[str, int],
        worker_id: str,
        *,
        stacktrace_limit: int | None = None,
        failed_store: FailedJobStore | None = None,
        connection: str = "default",
        hooks: WorkerHooks | None = None,
    ) -> None:
        self._backend = backend
        self._hooks = hooks
        self._errors: dict[tuple[str, str, str], tuple[JobRow, BaseException, bool]] = {}
        """The error of each queued failure, for its log line and the hooks' ``job_failed``
        (RETRY-9)."""
        self._failed_store = failed_store
        self._connection = connection
        """The connection name records carry when the job's push stored none (FAIL-2)."""
        self._records_in_backend: FailedRecords | None = None
        self._store_checked = failed_store is None
        self._stacktrace_limit = stacktrace_limit
        self._jobs = jobs
        self._counts = counts
        self._worker_id = worker_id
        self._completions: list[Completion] = []
        self._failures: list[Failure] = []
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self.failures = 0
        """Outcomes whose write raised (WORK-16): their jobs are left to lease expiry."""
        self.record_given_back = False
        """A forced stop: ``release`` lists the jobs it gives back in ``given_back``."""
        self.given_back: list[tuple[str, str]] = []
        """``(queue, id)`` of the jobs ``release`` gave back under a forced stop."""
        self._telling: dict[tuple[str, str], asyncio.Event] = {}
        """``(queue, id)`` of each job whose outcome is being written and told to the hooks:
        a next run of the job in this worker waits for it (``telling``), so a listener hears
        one attempt's events before the next attempt's."""
        self._carried: dict[Key, object] = {}
        """The ``process`` span's context of a traced flow parent whose completion was
        refused (FIN-8): its failure, written next, is settled under it too."""

    # ----------------------------------------------------------------- outcomes
    def complete(self, running: Running, result: JSON) -> None:
        if running.context.has_lost_lease():
            self.abandon(running)
            return
        if running.started_at is not None:  # INFO was on at its claim: its line has a duration
            running.run_seconds = time.monotonic() - running.started_at
        job = running.job
        self._completions.append(Completion(job.queue, job.id, job.lock_token, result))
        self._wake.set()
        self._jobs.settle(running)

    def fail(self, running: Running, error: BaseException, *, discard: bool) -> None:
        if running.context.has_lost_lease():
            self.abandon(running)
            return
        job = running.job
        reason = str(error) or type(error).__name__
        limit = self._stacktrace_limit
        # WORK-14: a limit of 0 keeps none, so none is formatted or sent.
        trace = "".join(traceback.format_exception(error)).rstrip() if limit != 0 else None
        self._failures.append(
            Failure(job.queue, job.id, job.lock_token, reason, trace, discard, limit)
        )
        # Kept until the write decides the outcome: its log line (retry or failed for
        # good, with the traceback) and the hooks' job_failed need the exception.
        self._errors[(job.queue, job.id, job.lock_token)] = (job, error, discard)
        self._wake.set()
        # A batch member's failure can cancel its batch: its slot stays taken until the
        # failure is written, so this worker's next claim (at concurrency 1, the batch's
        # next job) sees the batch cancelled and SkipIfBatchCancelled drops it, instead of
        # racing the write. Only failures of batch jobs pay this; the plain path does not.
        self._jobs.settle(running, hold_slot=_in_batch(job))

    def abandon(self, running: Running) -> None:
        """A run whose lease was lost: nothing it produced is written."""
        self._counts["lost"] += 1
        self._jobs.finish(running)

    async def release(self, running: Running) -> None:
        """Hand a job back to the front of its queue, its attempt not spent (the shutdown
        deadline passed, or a forced stop): the run was interrupted, it did not end. With
        ``release_job`` (attempt kept) a job of one attempt was failed as
        MaxAttemptsExceeded at its next claim, lost to a deploy's SIGTERM."""
        job = running.job
        if self._jobs.get(job.queue, job.id, job.lock_token) is None:
            return  # given back already (a forced stop did not wait for this handler)
        try:
            with tracing.settling(running.trace, job.queue, job.id, "released"):
                await self._backend.runs.give_back_job(job.queue, job.id, job.lock_token, 0)
            if self.record_given_back:
                self.given_back.append((job.queue, job.id))
            self._counts["released"] += 1
            log.info("job %s/%s released at shutdown", job.queue, job.id)
        except Exception as exc:
            log.warning(
                "job %s/%s: release failed (%s); its lease will expire", job.queue, job.id, exc
            )
        finally:
            self._jobs.finish(running)

    async def give_back(self, running: Running, delay: float) -> None:
        """Hand a job this worker cannot run back for another, its attempt not spent,
        delayed by ``delay`` seconds (A14)."""
        job = running.job
        try:
            with tracing.settling(running.trace, job.queue, job.id, "released"):
                await self._backend.runs.give_back_job(job.queue, job.id, job.lock_token, delay)
            self._counts["released"] += 1
        except Exception as exc:
            log.warning(
                "job %s/%s: giving it back failed (%s); its lease will expire",
                job.queue,
                job.id,
                exc,
            )
        finally:
            self._jobs.finish(running)

    async def discard(self, running: Running) -> None:
        """Remove a job its processor asked to delete (MW-2: a middleware's ``Deleted``),
        without a failed record."""
        job = running.job
        try:
            with tracing.settling(running.trace, job.queue, job.id, "deleted"):
                await self._backend.runs.discard_job(job.queue, job.id, job.lock_token)
            self._counts["deleted"] = self._counts.get("deleted", 0) + 1
        except Exception as exc:
            log.warning(
                "job %s/%s: deleting it failed (%s); its lease will expire",
                job.queue,
                job.id,
                exc,
            )
        finally:
            self._jobs.finish(running)

    def has_unsettled(self) -> bool:
        return bool(self._completions or self._failures)

    # ----------------------------------------------------------------- writing
    async def run(self) -> None:
        """The settlement task: write a batch whenever outcomes are queued."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._flush()

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (a shutdown deadline)
        """Until nothing is queued and no job is held, or ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        while (self.has_unsettled() or self._jobs) and time.monotonic() < deadline:
            self._settled.clear()
            self._wake.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):  # not wait_for: see Leadership.wait_changed
                    await self._settled.wait()

    async def _flush(self) -> None:
        completions, self._completions = self._completions, []
        failures, self._failures = self._failures, []
        if completions:
            await self._write(
                "completed", completions, self._backend.runs.complete_jobs(completions)
            )
        if failures:
            await self._write_failures(failures)
        self._settled.set()

    async def _check_store(self) -> None:
        """At the first failure: does the backend write the store's records itself? Asked
        again at the next batch when the store could not answer."""
        store: object = self._failed_store  # a store may have either capability, or both
        recorder = self._backend.failed_records
        try:
            if (
                isinstance(store, RecordsInSettlement)
                and recorder is not None
                and await store.records_in(self._backend)
            ):
                self._records_in_backend = recorder
            self._store_checked = True
        except Exception as exc:
            # Not known to be this database: this batch goes the way of a store elsewhere,
            # whose refused records leave their jobs to their leases (FAIL-3).
            log.error("the failed-job store cannot be checked (%s)", exc)

    async def _write_failures(self, failures: list[Failure]) -> None:
        if not self._store_checked:
            await self._check_store()
        store = self._failed_store
        if self._records_in_backend is not None:
            # FAIL-2, A4: the records are written in the transaction of the transitions.
            call = self._records_in_backend.fail_jobs_recording(failures, self._connection)
            await self._write("failed", failures, call)
            return
        if store is None:
            await self._write("failed", failures, self._backend.runs.fail_jobs(failures))
            return
        logged: dict[tuple[str, str, str], FailedJobRecord] = {}
        settle: list[Failure] = []
        for item in failures:
            running = self._jobs.get(item.queue, item.id, item.token)
            if running is None or not fails_for_good(running.job, item.discard_retry):
                settle.append(item)
                continue
            record = self._record(running.job, item)
            try:
                await store.log(record)
            except Exception as exc:
                # FAIL-3: never finalise a job whose record was not kept; it stays active
                # under our token and returns when its lease lapses.
                self.failures += 1
                log.error(
                    "job %s/%s: the failed-job store refused its record (%s); the job is"
                    " left to its lease and will come back",
                    item.queue,
                    item.id,
                    exc,
                )
                self._jobs.finish(running)
                self._errors.pop((item.queue, item.id, item.token), None)
                continue
            logged[(item.queue, item.id, item.token)] = record
            settle.append(item)
        if not settle:
            return
        outcomes = await self._write("failed", settle, self._backend.runs.fail_jobs(settle))
        written = {
            (item.queue, item.id, item.token)
            for item, outcome in zip(settle, outcomes, strict=False)
            if outcome.status == "ok"
        }
        for key, record in logged.items():
            if key not in written:
                # The job was not failed by us after all (lease lost, write failed): its
                # next owner records its own end.
                with contextlib.suppress(Exception):
                    await store.forget(record.id)

    def _record(self, job: JobRow, item: Failure) -> FailedJobRecord:
        """The record of ``job`` as ``lane._fail_one`` leaves it (one more attempt made,
        the reason and traceback of this failure)."""
        exception = item.stacktrace if item.stacktrace is not None else item.reason
        record = FailedJobRecord.of_job(job, self._connection, exception)
        stacktrace = list(job.stacktrace)
        if item.stacktrace is not None:
            stacktrace.append(item.stacktrace)
        if item.stacktrace_limit is not None:
            stacktrace = stacktrace[-item.stacktrace_limit :] if item.stacktrace_limit > 0 else []
        record.envelope.update(
            attempts_made=job.attempts_made + 1,
            failed_reason=item.reason,
            stacktrace=list(stacktrace),
        )
        return record

    def telling(self, queue: str, job_id: str) -> asyncio.Event | None:
        """Set once the hooks heard the outcome of the job's last run in this worker (None:
        nothing is being told). A retry without delay is claimable the moment its failure
        commits: a next run that did not wait could start (JobProcessing) before the last
        one's JobAttempted was told (LIFE-5)."""
        return self._telling.get((queue, job_id))

    async def _write(
        self,
        kind: str,
        batch: Sequence[Completion | Failure],
        call: Awaitable[list[FinalizeOutcome]],
    ) -> list[FinalizeOutcome]:
        if self._hooks is None:  # nobody is told: nothing to wait for
            return await self._write_and_tell(kind, batch, call)
        telling = asyncio.Event()
        for item in batch:
            self._telling[(item.queue, item.id)] = telling
        try:
            return await self._write_and_tell(kind, batch, call)
        finally:
            for item in batch:
                if self._telling.get((item.queue, item.id)) is telling:
                    del self._telling[(item.queue, item.id)]
            telling.set()

    async def _write_and_tell(
        self,
        kind: str,
        batch: Sequence[Completion | Failure],
        call: Awaitable[list[FinalizeOutcome]],
    ) -> list[FinalizeOutcome]:
        failed = kind == "failed"
        errors = self._take_errors(batch) if failed else {}
        traced = tracing.enabled()  # off: one global read per batch
        started = tracing.clock() if traced else 0
        raised: Exception | None = None
        try:
            outcomes = await call
        except Exception as exc:
            raised = exc
            # WORK-16: the jobs stay active under our token; their leases lapse and
            # stalled recovery hands them out again (at-least-once).
            self.failures += len(batch)
            log.error(
                "writing %d %s results failed (%s): the jobs stay active and come back when"
                " their leases expire",
                len(batch),
                kind,
                describe_error(exc),
                exc_info=exc,
            )
            outcomes = []
            if failed:
                self._log_unwritten(batch, errors, exc)
            if self._hooks is not None:
                try:
                    self._hooks.settlement_failed(
                        "nack" if failed else "ack", self._meant(batch, errors)
                    )
                except Exception:
                    log.exception("a worker hook raised")
        debug = log.isEnabledFor(logging.DEBUG)
        info = not failed and jobs_log.isEnabledFor(logging.INFO)
        for item, outcome in zip(batch, outcomes, strict=False):
            if outcome.status == "ok":
                self._counts[kind] += 1
                if failed:
                    ended = outcome.state == "failed"
                    self._counts["failed_for_good" if ended else "retried"] += 1
                    self._log_failure(item, outcome, errors)
                elif info:
                    running = self._jobs.get(item.queue, item.id, item.token)
                    if running is not None:
                        joblog.completed(running.job, self._worker_id, running.run_seconds)
                if debug:
                    log.debug(
                        "job transition queue=%s id=%s outcome=%s state=%s worker=%s",
                        item.queue,
                        item.id,
                        kind,
                        outcome.state,
                        self._worker_id,
                    )
            elif outcome.status == "pending_dependencies" and isinstance(item, Completion):
                # FIN-8: a flow parent that ran before its children were all done (released
                # early by continue_parent_on_failure) may not complete: its run fails, and
                # is retried by its options, under the same token.
                reason = (
                    f"PendingDependencies: job {item.id} of queue {item.queue} cannot"
                    " complete while children are pending or have failed it"
                )
                self._failures.append(Failure(item.queue, item.id, item.token, reason))
                running = self._jobs.get(item.queue, item.id, item.token)
                if running is not None:  # for the failure's log line
                    key = (item.queue, item.id, item.token)
                    self._errors[key] = (running.job, PendingDependencies(reason), False)
                self._wake.set()
            else:
                self._counts["lost"] += 1
                known = errors.get((item.queue, item.id, item.token)) if failed else None
                log.warning(
                    "job %s/%s: result not written (%s): this worker no longer holds the job%s",
                    item.queue,
                    item.id,
                    outcome.status,
                    "" if known is None else f"; the run had failed: {describe_error(known[1])}",
                )
        if traced:
            self._trace(batch, outcomes, started, raised)
        hooks = self._hooks
        # One check per batch: with nobody listening, no job is looked at again (W3).
        held: dict[Key, JobRow] | None = (
            {} if hooks is not None and hooks.hears_settlements() else None
        )
        for item in batch:
            running = self._jobs.get(item.queue, item.id, item.token)
            if running is not None:
                if held is not None:
                    held[(item.queue, item.id, item.token)] = running.job
                self._jobs.finish(running)
        if hooks is not None and (failed or held is not None):
            await self._tell(batch, outcomes, errors, held)
        return outcomes

    def _trace(
        self,
        batch: Sequence[Completion | Failure],
        outcomes: list[FinalizeOutcome],
        started: int,
        raised: Exception | None,
    ) -> None:
        """A ``settle`` span per traced job of a written batch, a child of the job's
        ``process`` span (the run ended before the batch was written)."""
        for item, outcome in zip_longest(batch, outcomes):
            if item is None:
                break
            key = (item.queue, item.id, item.token)
            running = self._jobs.get(item.queue, item.id, item.token)
            parent = self._carried.pop(key, None) if running is None else running.trace
            if parent is None:
                continue
            if outcome is None:
                settled_as = "unwritten"
            elif outcome.status == "ok":
                if isinstance(item, Completion):
                    settled_as = "completed"
                else:
                    settled_as = "failed" if outcome.state == "failed" else "retried"
            elif outcome.status == "pending_dependencies" and isinstance(item, Completion):
                settled_as = "pending_dependencies"
                self._carried[key] = parent
            else:
                settled_as = "lost"
            tracing.settled(parent, item.queue, item.id, settled_as, started, raised)

    def _meant(
        self, batch: Sequence[Completion | Failure], errors: dict[Key, Known]
    ) -> list[tuple[str, str]]:
        """What each unwritten item would have done: ``success`` for a completion; for a
        failure ``retry`` or ``dead_letter`` by the attempts left, ``timeout_`` first when
        the attempt ran past its timeout."""
        meant = []
        for item in batch:
            known = errors.get((item.queue, item.id, item.token))
            running = self._jobs.get(item.queue, item.id, item.token)
            job = known[0] if known is not None else None if running is None else running.job
            name = "unknown" if job is None else job.name
            if isinstance(item, Completion):
                meant.append((name, "success"))
                continue
            last = job is None or item.discard_retry or job.attempts_made + 1 >= job.max_attempts
            timed_out = known is not None and isinstance(known[1], TIMEOUTS)
            outcome = ("timeout_" if timed_out else "") + ("dead_letter" if last else "retry")
            meant.append((name, outcome))
        return meant

    def _take_errors(self, batch: Sequence[Completion | Failure]) -> dict[Key, Known]:
        errors = {}
        for item in batch:
            key = (item.queue, item.id, item.token)
            known = self._errors.pop(key, None)
            if known is not None:
                errors[key] = known
        return errors

    def _log_failure(
        self, item: Completion | Failure, outcome: FinalizeOutcome, errors: dict[Key, Known]
    ) -> None:
        """The line of a written failure: ERROR when it ended the job, else WARNING."""
        known = errors.get((item.queue, item.id, item.token))
        error: BaseException | str
        if known is not None:
            job, error = known[0], known[1]
        else:  # not queued by fail() (a job left to its lease by a refused record, say)
            running = self._jobs.get(item.queue, item.id, item.token)
            if running is None:
                return
            job, error = running.job, _reason(item)
        if outcome.state == "failed":
            joblog.failed_for_good(job, error, self._worker_id)
        else:
            joblog.retrying(job, error, outcome.state, self._worker_id)

    def _log_unwritten(
        self, batch: Sequence[Completion | Failure], errors: dict[Key, Known], cause: Exception
    ) -> None:
        for item in batch:
            known = errors.get((item.queue, item.id, item.token))
            running = self._jobs.get(item.queue, item.id, item.token)
            if known is not None:
                joblog.not_written(known[0], known[1], cause, self._worker_id)
            elif running is not None:
                joblog.not_written(running.job, _reason(item), cause, self._worker_id)

    async def _tell(
        self,
        batch: Sequence[Completion | Failure],
        outcomes: list[FinalizeOutcome],
        errors: dict[Key, Known],
        held: dict[Key, JobRow] | None,
    ) -> None:
        """To the hooks, after the write committed, for each outcome it wrote: a timeout,
        then the retry or the end for good (RETRY-9), then the attempt (LIFE-5). An
        outcome the write lost is not told. ``held``: the settled jobs when the hooks hear
        settlements; None tells the ends for good only."""
        hooks = self._hooks
        assert hooks is not None
        for item, outcome in zip(batch, outcomes, strict=False):
            if outcome.status != "ok":
                continue
            key = (item.queue, item.id, item.token)
            known = errors.get(key)
            job = known[0] if known is not None else None if held is None else held.get(key)
            if job is None:
                continue
            error = None if known is None else known[1]
            hears = held is not None
            if hears and isinstance(error, TIMEOUTS) and job.timeout_ms is not None:
                await _call(hooks.job_timed_out(job, job.timeout_ms / 1000))
            if known is not None and outcome.state == "failed":
                cause = failure_cause(job, known[1], discarded=known[2])
                await _call(hooks.job_failed(job, cause))
            elif hears and error is not None:
                window = joblog.next_run_in(job, outcome.state)
                await _call(hooks.job_retrying(job, error, 0.0 if window is None else window[0]))
            if hears:
                await _call(hooks.job_attempted(job, outcome.state, error))


TIMEOUTS = (JobTimedOut, TimeoutExceeded)
"""The errors of an attempt that ran past its timeout (``JobRunner``)."""


async def _call(hook: Awaitable[None]) -> None:
    """A hook, whose error is logged: a broken listener never stops the settlement."""
    try:
        await hook
    except Exception:
        log.exception("a worker hook raised")


def _reason(item: Completion | Failure) -> str:
    return item.reason if isinstance(item, Failure) else "failed"
