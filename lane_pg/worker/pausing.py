"""Pause state read outside the claim (PAUSE-7, PAUSE-10, PAUSE-11, CLI-6).

On PostgreSQL and memory a queue's pause is checked inside the claim (``claim_jobs`` skips
paused queues), so the worker reads nothing. A driver whose pauses live elsewhere (a
settings store, a cache: seed 003's pause keys) gives the worker a ``PauseState``, which it
asks before each claim; the queues it names paused are left out of that claim.

Fail open (PAUSE-11): when the store cannot be read, the worker claims as if nothing were
paused and logs a warning, once per outage: a broken store must not stop the fleet.
With pausing disabled (``WorkerConfig.pausable`` false, ``LANE_PG_PAUSABLE=false``) the
store is never read (PAUSE-10).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol, runtime_checkable

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JobRow, JobState, PauseStatus, QueueDemand, StalledOutcome
from lane_pg.types.workers import backed_off

log = logging.getLogger("lane_pg.worker")


@runtime_checkable
class PauseState(Protocol):
    """Where a driver keeps its queue pauses, when they are not in the claim."""

    async def paused_queues(self, queues: Sequence[str]) -> Collection[str]:
        """The paused ones among ``queues``."""
        ...


class PauseFilter:
    """Drops the paused queues from a claim's demands; fails open."""

    def __init__(self, state: PauseState) -> None:
        self._state = state
        self._failing = False

    async def unpaused(self, demands: list[QueueDemand]) -> list[QueueDemand]:
        try:
            paused = await self._state.paused_queues([demand.queue for demand in demands])
        except Exception as exc:
            if not self._failing:
                log.warning(
                    "pause state unreadable (%s: %s): claiming as if no queue were paused",
                    type(exc).__name__,
                    exc,
                )
            self._failing = True
            return demands
        if self._failing:
            log.warning("pause state readable again")
            self._failing = False
        if not paused:
            return demands
        return [demand for demand in demands if demand.queue not in paused]


class WorkerHooks:
    """What a worker tells the code that runs it (the facade's events, the CLI's lines).

    The methods do nothing here; a subclass overrides the ones it needs. A hook that raises
    is logged and the worker goes on (a broken listener never stops the loop)."""

    async def queue_paused(self, queue: str | None) -> None:
        """``queue`` (a name the worker was started with, or any queue for a worker of
        every queue; None: the connection-wide pause, for a worker of every queue) became
        paused (PAUSE-7)."""

    async def queue_resumed(self, queue: str | None) -> None:
        """``queue`` became claimable again (PAUSE-7)."""

    async def interrupted(self, processed: int) -> None:
        """A restart signal newer than the worker's start was seen (CLI-6); the worker
        stops claiming next. ``processed``: jobs it settled so far."""

    async def job_failed(self, job: JobRow, cause: BaseException) -> None:
        """``job`` (as claimed) failed for good in a settlement this worker wrote (RETRY-9):
        ``cause`` is the typed cause (``lane_pg.worker.failure_cause``)."""

    # The worker's life and each written settlement (LIFE-1). ``hears_settlements`` is
    # asked once per written batch: while it is false the per-job hooks below are not
    # called, so a worker nobody listens to pays nothing per job.

    async def starting(self) -> None:
        """``run()`` starts, before its first claim."""

    async def stopping(self, processed: int) -> None:
        """``run()`` ends, its jobs settled; ``processed``: the jobs it settled."""

    async def looping(self) -> None:
        """Each turn of the claim loop, before it claims (keep it cheap)."""

    def hears_settlements(self) -> bool:
        """Whether ``job_timed_out``, ``job_retrying`` and ``job_attempted`` are wanted."""
        return False

    async def job_timed_out(self, job: JobRow, limit: float) -> None:
        """The attempt of ``job`` ran past its timeout, ``limit`` seconds; told before the
        failure it ends in (``job_retrying`` or ``job_failed``)."""

    async def job_retrying(self, job: JobRow, error: BaseException, delay: float) -> None:
        """A failed attempt of ``job`` was written and it runs again, after ``delay``
        seconds at least (the backoff's shortest; jitter may add to it)."""

    async def job_attempted(
        self, job: JobRow, state: JobState | None, error: BaseException | None
    ) -> None:
        """The outcome of an attempt of ``job`` was written: the job is now in ``state``;
        ``error`` is what failed it (None: it completed). Told last for each attempt."""

    def settlement_failed(self, operation: str, outcomes: list[tuple[str, str]]) -> None:
        """A write of outcomes raised (the jobs stay active and come back after their
        leases): ``operation`` is ``ack`` (completions) or ``nack`` (failures), ``outcomes``
        one (job name, outcome) per job, the outcome ``success``, ``retry``,
        ``dead_letter``, ``timeout_retry`` or ``timeout_dead_letter``. Synchronous: it runs
        on the write's error path."""

    def jobs_stalled(self, outcomes: list[StalledOutcome]) -> None:
        """This worker's stalled recovery (it holds the maintenance role) took back these
        jobs, whose leases expired: each is ``waiting`` again or ``failed`` for good.
        Synchronous, told after the recovery's write (each is also logged)."""


SIGNAL_INTERVAL = 1.0
SIGNAL_RETRY_CAP = 8.0
"""Seconds between reads of the signals at most while they fail (the database is away)."""
"""Seconds between two signal reads of a busy worker (``SignalWatch``)."""


class SignalWatch:
    """The worker's view of the signals it does not get from its claims: pause transitions
    of the queues it was started with (PAUSE-7, PAUSE-8), or, for a worker of every queue
    (``names`` None), of the connection-wide pause (reported as None) and of each queue's
    own flag, and the restart signal (CLI-6).

    One ``get_pause_status`` round trip answers both, and it is made at most once per
    ``interval`` seconds at the top of a loop iteration: an idle worker reads once per poll
    cycle (or per wake-up, at most once per ``interval``), a busy one once per ``interval``
    whatever its claim rate, so the claim path itself pays nothing. The claim function
    stays the authority on what may be claimed; this only says when the answer changed.

    The restart baseline is the signal read first (at start-up, before any claim), so a
    worker exits for a signal given after that read, on the database's clock, whatever the
    host clocks say. A failed read changes nothing (the last known state stays; fail open,
    PAUSE-11) and is logged once per outage. With pausing disabled (PAUSE-10) the read
    serves the restart signal only."""

    def __init__(
        self,
        backend: JobQueueBackend,
        names: Sequence[str] | None,
        hooks: WorkerHooks,
        *,
        pausable: bool,
        interval: float = SIGNAL_INTERVAL,
    ) -> None:
        self._backend = backend
        self._names = None if names is None else list(names)
        self._hooks = hooks
        self._pausable = pausable
        self.interval = interval
        self.next_at = 0.0
        """``time.monotonic()`` at which the next ``check`` reads (0: at once)."""
        self._baseline: int | None = None
        self._started = False
        self._paused: set[str | None] = set()
        self._failures = 0
        self.reads = 0

    @property
    def paused(self) -> frozenset[str | None]:
        """The names last seen paused (None: every queue, for a worker of every queue)."""
        return frozenset(self._paused)

    async def check(self) -> bool:
        """Read the signals if due; report pause transitions; True when the worker must
        restart (a restart signal newer than the first one read)."""
        now = time.monotonic()
        if now < self.next_at:
            return False
        self.next_at = now + self.interval
        # A worker of every queue asks for every paused queue (None); with pausing off,
        # for none: the read then serves the restart signal only.
        asked = self._names if self._pausable else ()
        try:
            status = await self._backend.queues.get_pause_status(asked)
        except Exception as exc:
            if not self._failures:
                log.warning(
                    "pause and restart signals unreadable (%s: %s); going on as before",
                    type(exc).__name__,
                    exc,
                )
            self._failures += 1
            self.next_at = now + backed_off(self.interval, self._failures, SIGNAL_RETRY_CAP)
            return False
        if self._failures:
            log.warning("pause and restart signals readable again")
            self._failures = 0
        self.reads += 1
        if not self._started:
            self._started = True
            self._baseline = status.restart_at_ms
        elif status.restart_at_ms is not None and (
            self._baseline is None or status.restart_at_ms > self._baseline
        ):
            return True
        if self._pausable:
            await self._transitions(status)
        return False

    async def _transitions(self, status: PauseStatus) -> None:
        if self._names is None:
            # The global switch as None, then each queue whose own flag changed, by name.
            now_paused: set[str | None] = {None} if status.all_paused else set()
            now_paused.update(status.paused)
            named = {name for name in self._paused | now_paused if name is not None}
            order: list[str | None] = [None, *sorted(named)]
        else:
            now_paused = {name for name in self._names if status.is_paused(name)}
            order = list(self._names)
        for name in order:
            if name in now_paused and name not in self._paused:
                await self._call(self._hooks.queue_paused, name)
            elif name not in now_paused and name in self._paused:
                await self._call(self._hooks.queue_resumed, name)
        self._paused = now_paused

    async def _call(self, hook: Callable[[str | None], Awaitable[None]], name: str | None) -> None:
        try:
            await hook(name)
        except Exception:
            log.exception("worker hook %r raised", hook)
