"""Writing outcomes: completions and failures in batches, releases at shutdown.

One settlement task writes whatever finished while the previous batch was being written
(group commit), so batching adds no waiting. Every item carries the token of its claim: a
run whose lease was taken over has its outcome refused (``lock_mismatch``) and counted as
lost, never written over the new owner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Sequence

from lane_pg.backend import Settler
from lane_pg.types import JSON, Completion, Failure, FinalizeOutcome
from lane_pg.worker.execution import Running, RunningJobs

log = logging.getLogger("lane_pg.worker")


class Settlement:
    """Queues outcomes of running jobs and writes them in batches."""

    def __init__(
        self,
        backend: Settler,
        jobs: RunningJobs,
        counts: dict[str, int],
        worker_id: str,
        *,
        stacktrace_limit: int | None = None,
    ) -> None:
        self._backend = backend
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

    # ----------------------------------------------------------------- outcomes
    def complete(self, running: Running, result: JSON) -> None:
        if running.context.has_lost_lease():
            self.abandon(running)
            return
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
        self._wake.set()
        self._jobs.settle(running)

    def abandon(self, running: Running) -> None:
        """A run whose lease was lost: nothing it produced is written."""
        self._counts["lost"] += 1
        self._jobs.finish(running)

    async def release(self, running: Running) -> None:
        """Hand a job back to the front of its queue (shutdown deadline passed)."""
        job = running.job
        try:
            await self._backend.release_job(job.queue, job.id, job.lock_token)
            self._counts["released"] += 1
            log.info("job %s/%s released at shutdown", job.queue, job.id)
        except Exception as exc:
            log.warning(
                "job %s/%s: release failed (%s); its lease will expire", job.queue, job.id, exc
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
            await self._write("completed", completions, self._backend.complete_jobs(completions))
        if failures:
            await self._write("failed", failures, self._backend.fail_jobs(failures))
        self._settled.set()

    async def _write(
        self,
        kind: str,
        batch: Sequence[Completion | Failure],
        call: Awaitable[list[FinalizeOutcome]],
    ) -> None:
        try:
            outcomes = await call
        except Exception as exc:
            # WORK-16: the jobs stay active under our token; their leases lapse and
            # stalled recovery hands them out again (at-least-once).
            self.failures += len(batch)
            log.error("writing %d %s results failed: %s", len(batch), kind, exc)
            outcomes = []
        for item, outcome in zip(batch, outcomes, strict=False):
            if outcome.status == "ok":
                self._counts[kind] += 1
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
                self._failures.append(
                    Failure(
                        item.queue,
                        item.id,
                        item.token,
                        f"PendingDependencies: job {item.id} of queue {item.queue} cannot"
                        " complete while children are pending or have failed it",
                    )
                )
                self._wake.set()
            else:
                self._counts["lost"] += 1
                log.warning(
                    "job %s/%s: result not written (%s)", item.queue, item.id, outcome.status
                )
        for item in batch:
            running = self._jobs.get(item.queue, item.id, item.token)
            if running is not None:
                self._jobs.finish(running)
