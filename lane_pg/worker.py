"""The worker: claims jobs for its lanes, runs processors, settles results, keeps leases.

One asyncio task loop per process (DESIGN.md "Worker"):
- the claim loop asks for as many jobs as there are free slots, across its lanes in
  priority order, in one ``claim`` call, and otherwise waits for a NOTIFY, a freed slot,
  the next delayed job's due time, or the slow poll, whichever comes first;
- one task per running job (processor router by job name, per-job timeout);
- one renewal loop renews every running lease in one batched call at a fraction of the
  lease and flags (and cancels) the jobs whose lease was lost;
- one settlement loop writes completions and failures in batches: whatever finished while
  the previous batch was being written goes in the next one, so batching adds no delay;
- one maintenance loop (stalled recovery, promotion, event trimming) that does its work
  only while this worker holds the leader lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from lane_pg.backend import HasDedicatedConnection, JobQueueBackend, ReclaimsSpace
from lane_pg.errors import (
    InvalidOptions,
    JobTimedOut,
    LeaseLost,
    MaxAttemptsExceeded,
    UnknownJobName,
    UnrecoverableJobError,
)
from lane_pg.types import (
    DEFAULT_PRUNE_BATCH,
    JSON,
    Completion,
    Failure,
    FinalizeOutcome,
    Job,
    Lane,
    LeaseRef,
    QueueDemand,
    check_json,
)

if TYPE_CHECKING:
    from lane_pg.postgres.notifier import Notifier

log = logging.getLogger("lane_pg.worker")


# --------------------------------------------------------------------------- runtime


class JobContext:
    """What a processor may do besides returning a result (WORK-8, WORK-9, RETRY-8)."""

    def __init__(self, backend: JobQueueBackend, job: Job, worker_id: str) -> None:
        self._backend = backend
        self.job = job
        self.worker_id = worker_id
        self._lease_lost = False
        self._discard_retry = False

    def has_lost_lease(self) -> bool:
        """True once this worker no longer holds the job: stop side effects."""
        return self._lease_lost

    def ensure_lease(self) -> None:
        """Raise ``LeaseLost`` if the lease was lost; call before an irreversible step."""
        if self._lease_lost:
            raise LeaseLost(
                f"job {self.job.id} of queue {self.job.queue}: lease lost; another worker may"
                " be running it"
            )

    def discard_retry(self) -> None:
        """Make the failure this run ends with terminal (no further attempts)."""
        self._discard_retry = True

    @property
    def retry_discarded(self) -> bool:
        return self._discard_retry

    def mark_lease_lost(self) -> None:
        """Called by the worker when renewal finds the lease gone."""
        self._lease_lost = True

    async def update_progress(self, progress: JSON) -> None:
        self.ensure_lease()
        await self._backend.update_job_progress(self.job.queue, self.job.id, progress)

    async def log(self, message: str) -> None:
        self.ensure_lease()
        await self._backend.add_job_log(self.job.queue, self.job.id, message)

    async def update_data(self, data: JSON) -> None:
        self.ensure_lease()
        await self._backend.update_job_data(self.job.queue, self.job.id, data)


Processor: TypeAlias = Callable[[Job, JobContext], Awaitable[JSON]]


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How one worker runs. Durations are seconds."""

    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    )
    concurrency: int = 10
    lanes: tuple[Lane, ...] = ()
    """Lanes served, any order (sorted by priority); empty means every queue, priority 0."""
    lease: float = 30.0
    shutdown_timeout: float = 30.0
    poll_interval: float = 5.0
    burst: bool = False
    max_stalled_count: int = 1
    stalled_interval: float | None = None
    """Seconds between stalled-recovery passes of the leader; default ``min(lease, 1)``.

    The leader recovers every queue's jobs, whatever lease their workers use, so its
    cadence must not follow its own lease: a lost job returns within its lease plus this.
    """
    promote_interval: float = 5.0
    """Seconds between the leader's passes promoting due delayed jobs of every queue (claims
    already promote the due jobs of the queues they serve)."""
    trim_interval: float = 1.0
    """Seconds between the leader's event-trimming passes (each queue back to its
    ``max_events``). Every second, so the events table stays near its bound under load
    (W6 writes ~30,000 event rows a second) instead of growing for a minute between passes."""
    prune_interval: float = 1.0
    """Seconds between the leader's passes deleting finished jobs beyond each queue's
    retention bound (``prune_finished``); a pass repeats at once, up to 10 calls, while a
    call deleted a full batch, so a backlog drains without waiting for the next pass."""
    vacuum_min_dead: int | None = 20_000
    """The leader VACUUMs (``SKIP_LOCKED``) a table of the schema once this many dead row
    versions piled up in it since its last vacuum; ``None`` leaves it all to autovacuum.
    A queue turns every job into several dead versions (claim, completion, pruning):
    autovacuum wakes once a minute at most (``autovacuum_naptime``) and may be off, and the
    table grows with everything that dies in between (W6). PostgreSQL backends only."""
    renew_fraction: float = 1 / 3
    cancel_on_lease_loss: bool = False
    """Cancel a handler whose lease was lost. By default it keeps running and is told
    (``ctx.has_lost_lease()``, ``ctx.ensure_lease()`` raising ``LeaseLost``, context writes
    refused), so it can stop at a safe point (WORK-8); its result is never written."""
    summary_interval: float = 60.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InvalidOptions(f"concurrency must be >= 1, got {self.concurrency}")
        if self.lease <= 0 or self.poll_interval <= 0 or self.shutdown_timeout < 0:
            raise InvalidOptions("lease and poll interval must be positive")
        if self.prune_interval <= 0:
            raise InvalidOptions(f"prune_interval must be positive, got {self.prune_interval}")
        if self.trim_interval <= 0:
            raise InvalidOptions(f"trim_interval must be positive, got {self.trim_interval}")
        if self.vacuum_min_dead is not None and (
            isinstance(self.vacuum_min_dead, bool) or self.vacuum_min_dead < 1
        ):
            raise InvalidOptions(
                f"vacuum_min_dead must be a positive count or None, got {self.vacuum_min_dead}"
            )
        if not 0 < self.renew_fraction < 1:
            raise InvalidOptions("renew_fraction must be within (0, 1)")
        names = [lane.name for lane in self.lanes]
        if len(names) != len(set(names)):
            raise InvalidOptions(f"a lane is listed twice: {names}")


@dataclass(slots=True)
class _Running:
    job: Job
    lane: str
    context: JobContext
    task: asyncio.Task[None] | None = None
    settling: bool = False


class Worker:
    """Runs processors for the jobs of its lanes until stopped (or idle, in burst mode)."""

    def __init__(
        self,
        backend: JobQueueBackend,
        processors: Mapping[str, Processor],
        config: WorkerConfig | None = None,
        *,
        notifier: Notifier | None = None,
    ) -> None:
        self.backend = backend
        self._claimer: JobQueueBackend = backend
        self.processors = dict(processors)
        self.config = config or WorkerConfig()
        self.worker_id = self.config.worker_id
        self._notifier = notifier
        self._lanes = tuple(sorted(self.config.lanes, key=lambda lane: (lane.priority, lane.name)))
        self._running: dict[tuple[str, str], _Running] = {}
        self._per_lane: dict[str, int] = {}
        self._completions: list[Completion] = []
        self._failures: list[Failure] = []
        self._settle_wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = False
        self._all_queue_names: list[str] = []
        self._queues_read_at = 0.0
        self.counts = {"claimed": 0, "completed": 0, "failed": 0, "lost": 0, "released": 0}
        self.settlement_failures = 0

    # ----------------------------------------------------------------- control
    def stop(self) -> None:
        """Stop claiming now; running jobs finish (up to ``shutdown_timeout``)."""
        if not self._stopping:
            log.info("worker %s stopping: no new claims", self.worker_id)
        self._stopping = True
        self._poke()

    @property
    def lanes(self) -> tuple[Lane, ...]:
        return self._lanes

    @property
    def notifier(self) -> Notifier | None:
        return self._notifier

    def _poke(self) -> None:
        self._wake.set()
        if self._notifier is not None:
            self._notifier.wake()

    async def run(self) -> None:
        """The claim loop, until ``stop()`` (or, in burst mode, until idle); then a clean
        shutdown: running jobs finish or are released, results are written."""
        # The claim loop calls one thing at a time on a connection of its own: its plans
        # stay warm and it never waits behind renewals, settlements or maintenance for a
        # pooled one. Sharing the pool, a claim that ran beside a maintenance pass landed
        # on a newly opened or cold connection and took 7-14 ms instead of <1 (W4 max).
        backend = self.backend
        own = await backend.dedicated() if isinstance(backend, HasDedicatedConnection) else None
        self._claimer = own or backend
        helpers = [
            asyncio.create_task(self._renew_loop(), name="lane_pg-renew"),
            asyncio.create_task(self._settle_loop(), name="lane_pg-settle"),
            asyncio.create_task(self._maintenance_loop(), name="lane_pg-maintenance"),
            asyncio.create_task(self._summary_loop(), name="lane_pg-summary"),
        ]
        try:
            await self._claim_loop()
            await self._shutdown()
        finally:
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if own is not None:
                await own.close()
                self._claimer = backend

    # ----------------------------------------------------------------- claiming
    async def _all_queues(self, refresh: bool) -> list[str]:
        """Every queue, for a worker without lanes; re-read at most once a second unless
        the last claim found nothing (a new queue's first job may be what woke us)."""
        now = time.monotonic()
        if refresh or now - self._queues_read_at > 1.0:
            self._all_queue_names = await self._claimer.list_queues()
            self._queues_read_at = now
        return self._all_queue_names

    async def _demands(self, free: int, refresh: bool) -> list[QueueDemand]:
        if not self._lanes:
            return [QueueDemand(name, free) for name in await self._all_queues(refresh)]
        demands = []
        for lane in self._lanes:
            # Without a max the lane may fill the whole worker (not just what is free now:
            # its running jobs are subtracted below).
            cap = (
                lane.max_concurrency
                if lane.max_concurrency is not None
                else self.config.concurrency
            )
            room = min(cap - self._per_lane.get(lane.name, 0), free)
            if room > 0:
                demands.append(QueueDemand(lane.name, room))
        return demands

    async def _claim_loop(self) -> None:
        lease = self.config.lease
        found_work = False
        while not self._stopping:
            # Cleared before looking, so a slot freed while we claim is not missed.
            self._wake.clear()
            # A job running or settling now may be put back to waiting (a retry) while the
            # claim below is in flight: burst mode may stop only after a claim that began
            # with nothing in hand.
            had_work = bool(self._running) or self._has_unsettled()
            free = self.config.concurrency - len(self._running)
            demands = await self._demands(free, not found_work) if free > 0 else []
            jobs: list[Job] = []
            claim_failed = False
            if demands:
                try:
                    jobs = await self._claimer.claim_jobs(
                        self.worker_id, demands, lease, total=free
                    )
                except Exception as exc:  # a lost connection must not kill the worker
                    claim_failed = True
                    log.warning("claim failed (%s: %s); retrying", type(exc).__name__, exc)
            for job in jobs:
                self._start(job)
            found_work = bool(jobs)
            if jobs:
                continue
            # A failed claim says nothing about the queue being empty: burst mode keeps going.
            if (
                self.config.burst
                and not claim_failed
                and not had_work
                and not self._running
                and not self._has_unsettled()
            ):
                log.info(
                    "worker %s: nothing ready and nothing running (burst): done", self.worker_id
                )
                return
            if claim_failed:
                await asyncio.sleep(min(self.config.poll_interval, 1.0))
            else:
                await self._idle_wait(free > 0)

    async def _idle_wait(self, has_room: bool) -> None:
        """Sleep until a wake-up, a freed slot, the next due delayed job, or the poll."""
        timeout = self.config.poll_interval
        if has_room and not self.config.burst:
            queues = [lane.name for lane in self._lanes] or None
            try:
                due = await self._claimer.next_due_in(queues)
            except Exception as exc:
                log.debug("next_due_in failed: %s", exc)
                due = None
            if due is not None:
                timeout = min(timeout, max(due.total_seconds(), 0.001))
        if self.config.burst:
            timeout = min(timeout, 0.05)
        if self._notifier is not None:
            # _poke() wakes the notifier too, so one wait covers NOTIFY and local events.
            await self._notifier.wait(timeout)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _start(self, job: Job) -> None:
        self.counts["claimed"] += 1
        context = JobContext(self.backend, job, self.worker_id)
        running = _Running(job, job.queue, context)  # a lane is a queue
        self._running[(job.queue, job.id)] = running
        self._per_lane[running.lane] = self._per_lane.get(running.lane, 0) + 1
        log.debug(
            "job transition queue=%s id=%s name=%s state=active attempt=%d worker=%s",
            job.queue,
            job.id,
            job.name,
            job.attempts_started,
            self.worker_id,
        )
        running.task = asyncio.create_task(self._execute(running), name=f"lane_pg-job-{job.id}")

    def _finish(self, running: _Running) -> None:
        """Forget a job whose outcome is written (or abandoned); frees its slot."""
        key = (running.job.queue, running.job.id)
        if self._running.pop(key, None) is not None:
            self._per_lane[running.lane] -= 1
        self._poke()

    # ----------------------------------------------------------------- running
    async def _execute(self, running: _Running) -> None:
        job, context = running.job, running.context
        try:
            if job.attempts_started > job.max_attempts:
                # STALL-7: the budget is spent (a crash consumed it): never run again.
                error: BaseException = MaxAttemptsExceeded(
                    f"MaxAttemptsExceeded: job {job.name} was delivered"
                    f" {job.attempts_started} times, allowed {job.max_attempts}"
                )
                self._fail(running, error, discard=True)
                return
            processor = self.processors.get(job.name)
            if processor is None:
                error = UnknownJobName(
                    f"UnknownJobName: no processor is registered for job name {job.name!r}"
                )
                self._fail(running, error, discard=True)
                return
            timeout = None if job.timeout_ms is None else job.timeout_ms / 1000
            try:
                result = await asyncio.wait_for(processor(job, context), timeout)
                check_json(result, "the processor's result")
            except TimeoutError:
                error = JobTimedOut(f"JobTimedOut: job {job.name} ran longer than {timeout}s")
                self._fail(running, error, discard=context.retry_discarded)
            except UnrecoverableJobError as exc:
                self._fail(running, exc, discard=True)
            except asyncio.CancelledError:
                if context.has_lost_lease():
                    self.counts["lost"] += 1
                    log.warning("job %s/%s: lease lost, run abandoned", job.queue, job.id)
                    self._finish(running)
                    return
                raise
            except Exception as exc:
                self._fail(running, exc, discard=context.retry_discarded)
            else:
                if context.has_lost_lease():
                    self.counts["lost"] += 1
                    self._finish(running)
                    return
                running.settling = True
                self._completions.append(
                    Completion(job.queue, job.id, job.lock_token or "", result)
                )
                self._settle_wake.set()
        except asyncio.CancelledError:
            # Shutdown deadline passed: hand the job back to the queue for another worker.
            await self._release(running)
            raise

    def _fail(self, running: _Running, error: BaseException, *, discard: bool) -> None:
        job = running.job
        if running.context.has_lost_lease():
            self.counts["lost"] += 1
            self._finish(running)
            return
        reason = str(error) or type(error).__name__
        trace = "".join(traceback.format_exception(error)).rstrip()
        running.settling = True
        self._failures.append(
            Failure(job.queue, job.id, job.lock_token or "", reason, trace, discard)
        )
        self._settle_wake.set()

    async def _release(self, running: _Running) -> None:
        job = running.job
        try:
            await self.backend.release_job(job.queue, job.id, job.lock_token or "")
            self.counts["released"] += 1
            log.info("job %s/%s released at shutdown", job.queue, job.id)
        except Exception as exc:
            log.warning(
                "job %s/%s: release failed (%s); its lease will expire", job.queue, job.id, exc
            )
        finally:
            self._finish(running)

    def _has_unsettled(self) -> bool:
        return bool(self._completions or self._failures)

    # ----------------------------------------------------------------- settling
    async def _settle_loop(self) -> None:
        while True:
            await self._settle_wake.wait()
            self._settle_wake.clear()
            await self._flush()

    async def _flush(self) -> None:
        completions, self._completions = self._completions, []
        failures, self._failures = self._failures, []
        if completions:
            await self._write("completed", completions, self.backend.complete_jobs(completions))
        if failures:
            await self._write("failed", failures, self.backend.fail_jobs(failures))
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
            self.settlement_failures += len(batch)
            log.error("writing %d %s results failed: %s", len(batch), kind, exc)
            outcomes = []
        for item, outcome in zip(batch, outcomes, strict=False):
            if outcome.status == "ok":
                self.counts[kind] += 1
                log.debug(
                    "job transition queue=%s id=%s outcome=%s state=%s worker=%s",
                    item.queue,
                    item.id,
                    kind,
                    outcome.state,
                    self.worker_id,
                )
            else:
                self.counts["lost"] += 1
                log.warning(
                    "job %s/%s: result not written (%s)", item.queue, item.id, outcome.status
                )
        for item in batch:
            running = self._running.get((item.queue, item.id))
            if running is not None:
                self._finish(running)

    # ----------------------------------------------------------------- leases
    async def _renew_loop(self) -> None:
        interval = self.config.lease * self.config.renew_fraction
        while True:
            await asyncio.sleep(interval)
            held = [
                LeaseRef(r.job.queue, r.job.id, r.job.lock_token or "")
                for r in self._running.values()
            ]
            if not held:
                continue
            try:
                lost = await self.backend.renew_leases(held, self.config.lease)
            except Exception as exc:
                log.warning("lease renewal failed (%s); retrying", exc)
                continue
            for ref in lost:
                running = self._running.get((ref.queue, ref.id))
                if running is None or running.settling or running.context.has_lost_lease():
                    continue
                running.context.mark_lease_lost()
                log.warning("job %s/%s: lease lost", ref.queue, ref.id)
                if self.config.cancel_on_lease_loss and running.task is not None:
                    running.task.cancel()

    # ----------------------------------------------------------------- maintenance
    async def _maintenance_loop(self) -> None:
        config = self.config
        interval = config.stalled_interval or min(config.lease, 1.0)
        next_promote = next_trim = next_prune = 0.0
        vacuum_floors: dict[str, int] = {}
        prune_batch, prune_calls = DEFAULT_PRUNE_BATCH, 10  # at most 10 batches per pass
        while True:
            leader = True if self._notifier is None else await self._notifier.try_lead()
            if leader:
                try:
                    recovered = await self.backend.recover_stalled(
                        None, max_stalled_count=config.max_stalled_count
                    )
                    promoted = trimmed = pruned = 0
                    now = time.monotonic()
                    if now >= next_promote:
                        promoted = await self.backend.promote_due_jobs(None)
                        next_promote = now + config.promote_interval
                    if now >= next_trim:
                        trimmed = await self.backend.trim_events(None)
                        next_trim = now + config.trim_interval
                    if now >= next_prune:
                        for _ in range(prune_calls):
                            deleted = await self.backend.prune_finished(None, batch=prune_batch)
                            pruned += deleted
                            if deleted < prune_batch:  # no queue can have a full batch left
                                break
                        next_prune = now + config.prune_interval
                    vacuumed = await self._vacuum_pass(vacuum_floors)
                    if recovered or promoted or trimmed or pruned or vacuumed:
                        log.info(
                            "maintenance: %d stalled recovered, %d promoted, %d events trimmed,"
                            " %d finished jobs pruned, vacuumed %s",
                            len(recovered),
                            promoted,
                            trimmed,
                            pruned,
                            ", ".join(vacuumed) or "nothing",
                        )
                except Exception as exc:
                    log.warning("maintenance pass failed: %s", exc)
            await asyncio.sleep(interval)

    async def _vacuum_pass(self, floors: dict[str, int]) -> list[str]:
        """VACUUM each table with ``vacuum_min_dead`` more dead row versions than its last
        vacuum left (``floors``): a vacuum that could not remove them (an old snapshot
        still sees them, or we do not own the table) is not repeated every second."""
        threshold = self.config.vacuum_min_dead
        backend = self.backend
        if threshold is None or not isinstance(backend, ReclaimsSpace):
            return []
        done = []
        for table, dead in sorted((await backend.dead_tuples()).items()):
            if dead >= floors.get(table, 0) + threshold:
                floors[table] = await backend.vacuum(table)
                done.append(f"{table} ({dead} -> {floors[table]} dead)")
        return done

    async def _summary_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.summary_interval)
            log.info(
                "worker %s: %d running; totals %s", self.worker_id, len(self._running), self.counts
            )

    # ----------------------------------------------------------------- shutdown
    async def _shutdown(self) -> None:
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            log.info(
                "worker %s: waiting up to %.0fs for %d running jobs",
                self.worker_id,
                self.config.shutdown_timeout,
                len(tasks),
            )
            _, pending = await asyncio.wait(tasks, timeout=self.config.shutdown_timeout)
            for task in pending:
                task.cancel()  # _execute releases the job back to waiting
            if pending:
                await asyncio.wait(pending)
        deadline = time.monotonic() + 10
        while (self._has_unsettled() or self._running) and time.monotonic() < deadline:
            self._settled.clear()
            self._settle_wake.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._settled.wait(), 1.0)
