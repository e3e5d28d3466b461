"""``Worker``: the claim loop, and the tasks that run beside it until shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping

from lane_pg.backend import (
    HasDedicatedConnection,
    HasWakeups,
    JobQueueBackend,
    Leader,
    WakeupSource,
)
from lane_pg.backend.failed import FailedJobStore
from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.types import ClaimedJob, Lane, QueueDemand
from lane_pg.types.workers import ALL_QUEUES_META
from lane_pg.worker import joblog
from lane_pg.worker.budget import ClaimBudget
from lane_pg.worker.claiming import wait_for_claim
from lane_pg.worker.config import WorkerConfig
from lane_pg.worker.context import JobContext, ProcessorLike, as_processor
from lane_pg.worker.execution import JobRunner, RunningJobs
from lane_pg.worker.maintenance import (
    Leadership,
    MaintenanceScheduler,
    Presence,
    maintenance_tasks,
)
from lane_pg.worker.outage import Outage, retry_delays
from lane_pg.worker.pausing import (
    SIGNAL_INTERVAL,
    PauseFilter,
    PauseState,
    SignalWatch,
    WorkerHooks,
)
from lane_pg.worker.renewal import renew_leases_forever
from lane_pg.worker.settlement import Settlement

log = logging.getLogger("lane_pg.worker")

SETTLE_AT_SHUTDOWN = 10.0
"""Seconds a stopping worker keeps writing outcomes after its jobs ended."""
FORCED_GRACE = 5.0
"""Seconds a forced stop waits for cancelled handlers to end before it gives their jobs
back without them (a handler that swallows its cancellation)."""


class Worker:
    """Runs processors for the jobs of its lanes until stopped (or idle, in burst mode).

    ``config.lanes`` names the queues it serves; a config without lanes must say
    ``all_queues=True`` (every queue of the database), else ``ConfigurationError``: a
    worker of every queue claims every app's jobs, so it is never one by omission.

    ``processors`` maps job names to processors (WORK-3), or is one processor for every
    name; a processor is an async function ``(job, ctx)`` or an object with an async
    ``process(job, ctx)`` method (WORK-2).
    ``notifier`` wakes the idle claim loop early (PostgreSQL: LISTEN); without one it polls.
    ``leader`` elects the maintenance leader among the backend's workers; by default the
    backend's own (its ``leader`` handle), and a backend without one makes this worker its only
    leader. ``pause_state`` is for drivers whose queue pauses live outside the claim
    (``lane_pg.worker.pausing``); PostgreSQL and memory need none. ``failed_store`` keeps
    a record of every job that fails for good (FAIL-2, ``lane_pg.backend.failed``), named
    ``connection`` unless its push stored a connection label. ``hooks`` hear of pause
    transitions of the queues the worker was started with and of a restart signal
    (``WorkerHooks``; ``run()`` only, read by a ``SignalWatch`` at most once a second).
    ``claim_budget`` is a ``max_jobs`` shared with other workers (``ClaimBudget``; by
    default the worker's own ``config.max_jobs``).

    Ways to run it: ``run()`` (or ``start()``, its task) until ``stop()``, or until idle in
    burst mode, with leases renewed, stalled jobs recovered and upkeep done by the leader;
    ``run_until_idle(max_jobs)``, ``run_once()`` and ``run_once_blocking()`` for tests and
    scripts (WORK-4, WORK-5): claims, lease renewal and settlement, no maintenance.
    """

    def __init__(
        self,
        backend: JobQueueBackend,
        processors: Mapping[str, ProcessorLike] | ProcessorLike,
        config: WorkerConfig | None = None,
        *,
        notifier: WakeupSource | None = None,
        leader: Leader | None = None,
        pause_state: PauseState | None = None,
        failed_store: FailedJobStore | None = None,
        connection: str = "default",
        hooks: WorkerHooks | None = None,
        claim_budget: ClaimBudget | None = None,
    ) -> None:
        self.backend = backend
        self._claimer: JobQueueBackend = backend
        fallback = None
        if isinstance(processors, Mapping):
            self.processors = {name: as_processor(p) for name, p in processors.items()}
        else:
            self.processors = {}
            fallback = as_processor(processors)
        self.config = config or WorkerConfig()
        if not self.config.lanes and not self.config.all_queues:
            # Serving every queue silently claimed other apps' jobs and failed them for
            # good as unknown names (issue 22): the queues are named, or "all" is said.
            raise ConfigurationError(
                "a worker needs the queues it serves: WorkerConfig(lanes=(Lane('emails'),)),"
                " or WorkerConfig(all_queues=True) to serve every queue of the database"
            )
        self.worker_id = self.config.worker_id
        self._notifier = notifier
        if leader is None:
            leader = backend.leader
        self._lanes = tuple(sorted(self.config.lanes, key=lambda lane: (lane.priority, lane.name)))
        self._wake = asyncio.Event()
        self._stopping = False
        self._forced = asyncio.Event()
        self._drained = False
        self._task: asyncio.Task[None] | None = None
        # PAUSE-10: a worker that ignores pauses reads no pause state at all.
        self._ignore_pause = not self.config.pausable
        self._pauses = (
            PauseFilter(pause_state) if pause_state is not None and self.config.pausable else None
        )
        # PAUSE-8: pause is watched on the names the worker was started with, not on the
        # lanes it serves because of a forward (those are claimed paused as their source).
        started = [lane.name for lane in self._lanes if lane.pause_as is None]
        self.hooks = hooks or WorkerHooks()
        self.signals = SignalWatch(
            backend,
            started if self._lanes else None,
            self.hooks,
            pausable=self.config.pausable,
            interval=min(SIGNAL_INTERVAL, self.config.poll_interval),
        )
        self._all_queue_names: list[str] = []
        self._queues_read_at = 0.0
        # Per claim (an attempt): "failed" counts failed attempts, "failed_for_good" and
        # "retried" split them by what the write decided (joblog.summary words them).
        self.counts = {
            "claimed": 0,
            "completed": 0,
            "failed": 0,
            "failed_for_good": 0,
            "retried": 0,
            "lost": 0,
            "released": 0,
        }
        # CLI-5: max_jobs, this worker's own or one shared with other workers.
        if claim_budget is None and self.config.max_jobs is not None:
            claim_budget = ClaimBudget(self.config.max_jobs)
        self.claim_budget = claim_budget
        if claim_budget is not None:
            claim_budget.on_spent(self._budget_spent)
        first, cap = retry_delays(self.config.poll_interval)
        self._claim_outage = Outage(f"worker {self.worker_id}: claims", log, first=first, cap=cap)
        self._running = RunningJobs(self._poke, hold_limit=2 * self.config.concurrency)
        self._settlement = Settlement(
            backend,
            self._running,
            self.counts,
            self.worker_id,
            stacktrace_limit=self.config.stacktrace_limit,
            failed_store=failed_store,
            connection=connection,
            hooks=hooks,
        )
        self._runner = JobRunner(
            self.processors,
            self._running,
            self._settlement,
            self.counts,
            fallback=fallback,
            fail_on_timeout=self.config.fail_on_timeout,
            give_back_unknown_after=(
                self.config.poll_interval if self.config.on_unknown_job == "release" else None
            ),
            sync_threads=self.config.sync_thread_count,
        )
        self.leadership = Leadership(leader, self.worker_id, self.config.leader_lease)
        self.presence = Presence(
            leader,
            self.worker_id,
            [lane.name for lane in self._lanes],
            self.config.heartbeat_interval,
            {"concurrency": self.config.concurrency, ALL_QUEUES_META: self.config.all_queues},
        )
        self.maintenance = MaintenanceScheduler(
            maintenance_tasks(backend, self.config, self.hooks), self.leadership
        )

    # ----------------------------------------------------------------- control
    def stop(self, *, force: bool = False) -> None:
        """Stop claiming now; running jobs finish (up to ``shutdown_timeout``), and the
        ones still running then are given back to their queue, their attempt not counted
        (the run was interrupted, it did not end).

        ``force`` (the CLI's second SIGTERM/SIGINT; also after a plain ``stop()``) stops
        at once: the running handlers are cancelled and their jobs given back to waiting,
        their leases cleared and their attempt not counted (``lane.give_back_job``); a
        handler that ignores its cancellation for ``FORCED_GRACE`` seconds has its job
        given back without it, and its late outcome is refused. ``given_back`` lists them.
        Calling ``stop()`` again is harmless: only ``force`` forces."""
        if not self._stopping:
            log.info("worker %s stopping: no new claims", self.worker_id)
        self._stopping = True
        if force and not self._forced.is_set():
            log.info("worker %s stopping now: running jobs are given back", self.worker_id)
            self._settlement.record_given_back = True
            self._forced.set()
        self._poke()

    @property
    def forced(self) -> bool:
        """Whether ``stop(force=True)`` was called."""
        return self._forced.is_set()

    @property
    def running(self) -> int:
        """Jobs whose handler is running now."""
        return self._running.busy

    @property
    def given_back(self) -> list[tuple[str, str]]:
        """``(queue, id)`` of each job a forced stop gave back."""
        return list(self._settlement.given_back)

    @property
    def lanes(self) -> tuple[Lane, ...]:
        return self._lanes

    @property
    def notifier(self) -> WakeupSource | None:
        return self._notifier

    @property
    def settlement_failures(self) -> int:
        """Outcomes whose write raised (WORK-16)."""
        return self._settlement.failures

    def _poke(self) -> None:
        self._wake.set()
        if self._notifier is not None:
            self._notifier.wake()

    def start(self) -> asyncio.Task[None]:
        """``run()`` in a task of its own (WORK-6): ``stop()`` ends it, and awaiting the
        task waits for the clean shutdown."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"lane_pg-worker-{self.worker_id}")
        return self._task

    async def run(self) -> None:
        """The claim loop, until ``stop()`` (or, in burst mode, until idle); then a clean
        shutdown: running jobs finish or are released, results are written. Cancelling the
        task it runs in stops it as ``stop(force=True)`` does."""
        self._drained = False
        async with self._serving(maintenance=True):
            await self._tell_hooks("starting")
            # The first signal read comes before any claim (the restart baseline, CLI-6);
            # the later ones beside the claims, never in front of one: read at the top of
            # the claim loop, each idle second's first wake-up waited for it (W4 p95 1.49 ->
            # 1.8 ms, p99 2.61 -> 3.24 ms).
            if await self._check_signals():
                self.stop()
            signals = asyncio.create_task(self._signal_loop(), name="lane_pg-signals")
            try:
                await self._claim_loop()
            finally:
                signals.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await signals
                self._force_if_cancelled()
                await self._shutdown(self.config.shutdown_timeout)
            self._drained = True
            await self._tell_hooks("stopping", self.settled)

    async def run_until_idle(self, max_jobs: int | None = None) -> int:
        """Claim and run jobs, up to ``concurrency`` at once, until a claim made with
        nothing running finds nothing (none waiting, or the rest delayed, paused or
        throttled) or ``max_jobs`` were claimed; then wait for the running ones and their
        outcomes, and return how many were claimed (WORK-4). ``stop()`` ends it early."""
        if max_jobs is not None and (isinstance(max_jobs, bool) or max_jobs < 0):
            raise InvalidOptions(f"max_jobs must be None or a count >= 0, got {max_jobs!r}")
        first = self.counts["claimed"]
        async with self._serving(maintenance=False):
            try:
                while not self._stopping:
                    self._wake.clear()
                    free = self._free_slots()
                    if max_jobs is not None:
                        left = max_jobs - (self.counts["claimed"] - first)
                        if left <= 0:
                            break  # the running ones finish below
                        free = min(free, left)
                    # As in burst mode: a job running or settling may go back to waiting.
                    had_work = bool(self._running) or self._settlement.has_unsettled()
                    jobs = await self._claim_for(free) if free > 0 else []
                    self._start_all(jobs)
                    if jobs:
                        continue
                    if not had_work and not self._running and not self._settlement.has_unsettled():
                        break
                    # A freed slot or a written outcome (wake_on_every_finish) ends the wait.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.config.poll_interval):
                            await self._wake.wait()
            finally:
                await self._finish_running()
        return self.counts["claimed"] - first

    async def run_once(self) -> ClaimedJob | None:
        """Claim one job if one is ready now, run it and write its outcome (WORK-5);
        returns the job as claimed, or None at once when nothing could be claimed."""
        async with self._serving(maintenance=False):
            try:
                jobs = await self._claim_for(1)
                self._start_all(jobs)
            finally:
                await self._finish_running()
        return jobs[0] if jobs else None

    async def run_once_blocking(self, timeout: float | None = None) -> ClaimedJob | None:  # noqa: ASYNC109 (a claim deadline)
        """``run_once``, waiting up to ``timeout`` (default ``blocking_claim_timeout``)
        seconds for a job to claim (WORK-5, CLAIM-7): on the worker's notifier, or a LISTEN
        connection opened for the call; a backend without wake-ups claims once (CLAIM-13)."""
        block = self.config.blocking_claim_timeout if timeout is None else timeout
        async with self._serving(maintenance=False), self._wakeups() as wakeups:
            try:

                async def claim() -> ClaimedJob | None:
                    jobs = await self._claim_for(1)
                    return jobs[0] if jobs else None

                job = await wait_for_claim(
                    claim,
                    lambda: self._claimer.limits.next_claim_in(
                        [lane.name for lane in self._lanes] or None, self.config.claim_rate_limit
                    ),
                    wakeups,
                    block_timeout=block,
                    poll_interval=self.config.poll_interval,
                )
                self._start_all([job] if job is not None else [])
            finally:
                await self._finish_running()
        return job

    @contextlib.asynccontextmanager
    async def _wakeups(self) -> AsyncIterator[WakeupSource | None]:
        """The worker's notifier, else one of the backend's for this call, else None."""
        if self._notifier is not None or not isinstance(self.backend, HasWakeups):
            yield self._notifier
            return
        own = self.backend.wakeups(
            [lane.name for lane in self._lanes] or None,
            name=f"lane_pg listener {self.worker_id}",
            health_interval=min(self.config.poll_interval, 5.0),
        )
        if own is None:  # no LISTEN to be had (a transaction pooler): poll
            yield None
            return
        await own.start()
        try:
            yield own
        finally:
            await own.close()

    @contextlib.asynccontextmanager
    async def _serving(self, *, maintenance: bool) -> AsyncIterator[None]:
        """The tasks beside the claims: lease renewal and settlement always; leadership,
        maintenance and the summary with ``maintenance`` (``run``), which also claims on a
        connection of its own."""
        backend = self.backend
        own = None
        if maintenance and isinstance(backend, HasDedicatedConnection):
            # The claim loop calls one thing at a time on a connection of its own: its
            # plans stay warm and it never waits behind renewals, settlements or
            # maintenance for a pooled one. Sharing the pool, a claim that ran beside a
            # maintenance pass landed on a newly opened or cold connection and took 7-14 ms
            # instead of <1 (W4 max).
            own = await backend.dedicated()
        self._claimer = own or backend
        # Outside run() nothing else wakes an idle-waiting caller once the last outcome
        # is written (run() needs no such wake-up: W4).
        self._running.wake_on_every_finish = not maintenance
        helpers = [
            asyncio.create_task(
                renew_leases_forever(backend, self._running, self.config), name="lane_pg-renew"
            ),
            asyncio.create_task(self._settlement.run(), name="lane_pg-settle"),
        ]
        if maintenance:
            helpers += [
                asyncio.create_task(self.leadership.run(), name="lane_pg-leadership"),
                asyncio.create_task(self.presence.run(), name="lane_pg-presence"),
                asyncio.create_task(self.maintenance.run(), name="lane_pg-maintenance"),
                asyncio.create_task(self._summary_loop(), name="lane_pg-summary"),
            ]
        try:
            yield
        finally:
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if maintenance:
                if self._drained and self.config.burst:
                    await self.maintenance.final_pass()
                await self.leadership.resign()
                await self.presence.leave()
            if own is not None:
                await own.close()
            self._claimer = backend
            self._running.wake_on_every_finish = False
            # Idle sync threads end; one still running a handler the shutdown gave up on
            # ends when it returns (a daemon thread: it never keeps the process alive).
            self._runner.threads.close()

    # ----------------------------------------------------------------- claiming
    async def _claim(self, demands: list[QueueDemand], total: int) -> list[ClaimedJob]:
        """One ``claim_jobs`` call for ``demands``, the queues a ``PauseState`` names
        paused left out (PAUSE-11)."""
        if self._pauses is not None:
            demands = await self._pauses.unpaused(demands)
            if not demands:
                return []
        return await self._claimer.runs.claim_jobs(
            self.worker_id,
            demands,
            self.config.lease,
            total=total,
            rate_limit=self.config.claim_rate_limit,
            ignore_pause=self._ignore_pause,
        )

    async def _claim_for(self, free: int) -> list[ClaimedJob]:
        """Up to ``free`` jobs of this worker's lanes (every queue without lanes)."""
        demands = await self._demands(free, True)
        return await self._claim(demands, free) if demands else []

    def _start_all(self, jobs: list[ClaimedJob]) -> None:
        for job in jobs:
            self._runner.start(job, JobContext(self.backend, job, self.worker_id))

    async def _all_queues(self, refresh: bool) -> list[str]:
        """Every queue, for a worker without lanes; re-read at most once a second unless
        the last claim found nothing (a new queue's first job may be what woke us)."""
        now = time.monotonic()
        if refresh or now - self._queues_read_at > 1.0:
            self._all_queue_names = await self._claimer.queues.list_queues()
            self._queues_read_at = now
        return self._all_queue_names

    def _free_slots(self) -> int:
        """Jobs to claim now: the concurrency not taken by running handlers, while the
        jobs held (outcomes still being written included) stay within twice the
        concurrency, so a slow settlement holds back claims instead of piling up leases."""
        running = self._running
        return min(self.config.concurrency - running.busy, running.hold_limit - len(running))

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
            room = min(cap - self._running.in_lane(lane.name), free)
            if room > 0:
                demands.append(QueueDemand(lane.name, room, lane.pause_as))
        return demands

    def _stop_requested(self) -> bool:
        return self._stopping

    @property
    def settled(self) -> int:
        """Jobs whose outcome this worker wrote (completed or failed, retries included)."""
        return self.counts["completed"] + self.counts["failed"]

    async def _check_signals(self) -> bool:
        """At most once per ``SignalWatch.interval``: pause transitions to the hooks, and
        True (after telling the hooks) when a restart signal says to stop (CLI-6)."""
        if not await self.signals.check():
            return False
        log.info("worker %s: restart signal seen: stopping", self.worker_id)
        try:
            await self.hooks.interrupted(self.settled)
        except Exception:
            log.exception("worker hook interrupted raised")
        return True

    async def _tell_hooks(self, name: str, *args: int) -> None:
        """``self.hooks.<name>(*args)``, its error logged: a hook never stops the worker."""
        try:
            await getattr(self.hooks, name)(*args)
        except Exception:
            log.exception("worker hook %s raised", name)

    async def _signal_loop(self) -> None:
        """``_check_signals`` every ``SignalWatch.interval`` while the worker claims."""
        while not self._stopping:
            await asyncio.sleep(max(self.signals.next_at - time.monotonic(), 0.01))
            if not self._stopping and await self._check_signals():
                self.stop()
                return

    def _budget_spent(self) -> None:
        assert self.claim_budget is not None
        log.info("worker %s: %d jobs claimed (max_jobs)", self.worker_id, self.claim_budget.limit)
        self.stop()  # CLI-5: the claimed jobs finish in the shutdown

    async def _claim_loop(self) -> None:
        found_work = False
        hooks = self.hooks
        while not self._stopping:
            # Cleared before looking, so a slot freed while we claim is not missed.
            self._wake.clear()
            try:
                await hooks.looping()  # the facade's checks has_listeners, no more (LIFE-1)
            except Exception:
                log.exception("worker hook looping raised")
            # A job running or settling now may be put back to waiting (a retry) while the
            # claim below is in flight: burst mode may stop only after a claim that began
            # with nothing in hand.
            had_work = bool(self._running) or self._settlement.has_unsettled()
            free = self._free_slots()
            budget = self.claim_budget
            if budget is not None:
                if budget.spent:
                    self.stop()
                    break
                free = budget.reserve(free) if free > 0 else 0
            demands: list[QueueDemand] = []
            jobs: list[ClaimedJob] = []
            claim_failed = False
            retry_in = 0.0
            try:
                # The queue list of a worker of every queue is a read too: both inside.
                demands = await self._demands(free, not found_work) if free > 0 else []
                if demands:
                    jobs = await self._claim(demands, free)
                    if self._claim_outage.down:
                        self._claim_outage.succeeded()
            except Exception as exc:  # a lost connection must not kill the worker
                claim_failed = True
                retry_in = self._claim_outage.failed(exc)
            finally:
                if budget is not None:
                    budget.settle(free, len(jobs))
            self._start_all(jobs)
            if jobs:
                # Let the handlers begin before this loop's next statement (the sleep's
                # next_claim_in or the next claim) is built and sent: W4 measured 0.32 ms
                # from a job's task creation to its handler's start without this turn.
                await asyncio.sleep(0)
            found_work = bool(jobs)
            if jobs:
                if len(jobs) < min(free, sum(demand.limit for demand in demands)):
                    # A short claim: the queues asked had nothing more ready. Sleep until
                    # a wake-up (a NOTIFY, a freed slot, a due delayed job) instead of
                    # asking again at once: one empty claim less per job at low load (W4:
                    # claims per job 3.8 -> 3.0 -> 2.0 with the slot wake-up in finish()).
                    await self._idle_wait(self._free_slots() > 0, demands)
                continue
            # A failed claim says nothing about the queue being empty: burst mode keeps going.
            if (
                self.config.burst
                and not claim_failed
                and not had_work
                and not self._running
                and not self._settlement.has_unsettled()
            ):
                throttled = await self._throttled_for(demands)
                if throttled is None:
                    log.info(
                        "worker %s: nothing ready and nothing running (burst): done",
                        self.worker_id,
                    )
                    return
                # Waiting jobs held back by a rate limit are ready work: drain them too
                # (a stop() still ends the wait at once).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(throttled, self.config.poll_interval)):
                        await self._wake.wait()
                continue
            if claim_failed:
                # Backoff, logged once per outage (a stop() still ends the wait at once).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(retry_in):
                        await self._wake.wait()
            else:
                await self._idle_wait(free > 0, demands)

    def _claimable(self, demands: list[QueueDemand]) -> list[str] | None:
        """The queues the last claim asked (None: every queue, for a worker without lanes).
        A lane at its concurrency is left out: ``next_claim_in`` could say "now" for it,
        and its freed slot wakes the loop anyway (``RunningJobs.settle``)."""
        return [demand.queue for demand in demands] if self._lanes else None

    async def _throttled_for(self, demands: list[QueueDemand]) -> float | None:
        """Seconds until a rate-limited queue of this worker that has waiting jobs admits a
        claim again (a millisecond when it does already); None when no such queue exists
        (delayed jobs do not count: a burst worker leaves them, as before)."""
        queues = self._claimable(demands)
        try:
            wait = await self._claimer.limits.next_claim_in(
                queues, self.config.claim_rate_limit, delayed=False
            )
        except Exception as exc:
            log.debug("next_claim_in failed: %s", exc)
            return None
        return None if wait is None else max(wait.total_seconds(), 0.001)

    async def _idle_wait(self, has_room: bool, demands: list[QueueDemand]) -> None:
        """Sleep until a wake-up, a freed slot, the next due delayed job, the moment a
        rate-limited queue admits claims again, or the poll.

        A job that becomes due earlier than the delayed job this sleep was timed for (a
        delayed add, a retry with backoff, a reschedule, a move to delayed) sends a wake-up
        (``lane._wake_for_due``): the loop claims, finds nothing due, and times the next
        sleep again. A throttled claim (CLAIM-11) sleeps until its limiter's window frees,
        so it does not spin; a maxed queue's claimers are woken by the NOTIFY of the
        finish that frees a slot (CLAIM-9)."""
        timeout = self.config.poll_interval
        if has_room and not self.config.burst:
            try:
                due = await self._claimer.limits.next_claim_in(
                    self._claimable(demands), self.config.claim_rate_limit
                )
            except Exception as exc:
                log.debug("next_claim_in failed: %s", exc)
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
                async with asyncio.timeout(timeout):  # not wait_for: see Leadership.wait_changed
                    await self._wake.wait()

    async def _summary_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.summary_interval)
            log.info(
                "worker %s: %d running; so far %s",
                self.worker_id,
                len(self._running),
                joblog.summary(self.counts),
            )

    # ----------------------------------------------------------------- shutdown
    async def _finish_running(self) -> None:
        """After ``run_once``/``run_until_idle``: the running jobs end on their own (each
        bounded by its timeout), unless ``stop()`` asked for the shutdown deadline."""
        self._force_if_cancelled()
        await self._shutdown(self.config.shutdown_timeout if self._stopping else None)

    def _force_if_cancelled(self) -> None:
        """Cancelling the task a worker runs in is a forced stop: its handlers are cancelled
        and their jobs given back. Left running, a handler outlived its worker's lease
        renewal and ran again beside the next claim of its job (found in CI: a cancelled
        worker's handler, collected later, wrote on a connection another call was using)."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            self.stop(force=True)

    async def _shutdown(self, timeout: float | None) -> None:  # noqa: ASYNC109 (a deadline)
        running = {r.task: r for r in self._running if r.task is not None and not r.task.done()}
        if running:
            log.info(
                "worker %s: waiting %s for %d running jobs",
                self.worker_id,
                "as long as they run" if timeout is None else f"up to {timeout:.0f}s",
                len(running),
            )
            await self._until_done_or_forced(list(running), timeout)
            pending = [task for task in running if not task.done()]
            for task in pending:
                task.cancel()  # the job's task releases it (gives it back, when forced)
            if pending:
                await self._until_done_or_forced(pending, None)
            if pending and self._forced.is_set():
                await asyncio.wait(pending, timeout=FORCED_GRACE)
                for task in pending:
                    if not task.done():
                        job = running[task].job
                        log.warning(
                            "job %s/%s: its handler ignores cancellation; given back without"
                            " it (its outcome will be refused)",
                            job.queue,
                            job.id,
                        )
                        await self._settlement.release(running[task])
        await self._settlement.drain(SETTLE_AT_SHUTDOWN)

    async def _until_done_or_forced(
        self,
        tasks: list[asyncio.Task[None]],
        timeout: float | None,  # noqa: ASYNC109 (a deadline)
    ) -> None:
        """Until every task of ``tasks`` is done, ``timeout`` seconds passed, or a forced
        stop; the tasks are left running."""
        if self._forced.is_set():
            return
        done = asyncio.ensure_future(asyncio.wait(tasks))
        forced = asyncio.ensure_future(self._forced.wait())
        try:
            await asyncio.wait({done, forced}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()  # cancels the waiting, not the tasks waited for
            forced.cancel()
