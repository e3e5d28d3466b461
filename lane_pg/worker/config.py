"""``WorkerConfig``: how one worker runs (durations in seconds)."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Literal

from lane_pg.errors import InvalidOptions
from lane_pg.types import JobRateLimit, Lane

PAUSABLE_ENV = "LANE_PG_PAUSABLE"
_FALSE = ("false", "0", "no", "off")
_TRUE = ("true", "1", "yes", "on", "")
UNKNOWN_JOB_CHOICES = ("fail", "release")
"""``WorkerConfig.on_unknown_job``'s values (A14)."""


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def pausing_enabled() -> bool:
    """Whether queue pauses apply in this process: ``$LANE_PG_PAUSABLE`` (PAUSE-10), true
    unless set to false, 0, no or off; any other value is refused, so a typo does not
    silently keep pausing on (or off)."""
    value = os.environ.get(PAUSABLE_ENV, "").strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise InvalidOptions(
        f"{PAUSABLE_ENV}={os.environ[PAUSABLE_ENV]!r}: use true or false (1/0, yes/no, on/off)"
    )


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How one worker runs. Durations are seconds."""

    worker_id: str = field(default_factory=_default_worker_id)
    # 50, not 10: the worker claims for free slots only, so at 10 a drain waits on a claim
    # round trip per 10 jobs. W3 (one process, noop handlers, one run each): 10 -> 8,100,
    # 20 -> 13,600, 50 -> 23,900 jobs/s; two processes 11,700 / 17,800 / 25,300.
    concurrency: int = 50
    lanes: tuple[Lane, ...] = ()
    """Lanes served, any order (sorted by priority). A ``Worker`` refuses to start with
    none unless ``all_queues`` (``App.create_worker`` and ``run_worker`` derive them from
    the app's lanes and job classes first: ``lane_pg.facade.serving``)."""
    all_queues: bool = False
    """Serve every queue of the database, priority 0 (with no lanes): an explicit choice,
    since such a worker claims the jobs of every app sharing the database."""
    lease: float = 30.0
    shutdown_timeout: float = 30.0
    poll_interval: float = 5.0
    burst: bool = False
    max_stalled_count: int = 1
    stalled_interval: float | None = None
    """Seconds between stalled-recovery passes of the leader; default ``min(lease, 1)``.

    The leader recovers every queue's jobs, whatever lease their workers use, so its
    cadence must not follow its own lease: a lost job returns within its lease plus this.
    The leader's vacuum check runs at the same cadence.
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
    reindex_min_bytes: int | None = 1024 * 1024
    """The leader rebuilds (``REINDEX INDEX CONCURRENTLY``) an index of the schema once it
    is bigger than this and takes more than 96 bytes per row of its table
    (``maintenance.reindex_pass``); ``None`` never does. PostgreSQL backends only."""
    reindex_interval: float = 10.0
    """Seconds between the leader's index-size checks (one catalog query)."""
    leader_lease: float = 1.0
    """Seconds the maintenance leader's lease lasts (``Leader.acquire_leadership``). The
    leader renews it every third of that and every other worker asks as often, so a leader
    that freezes or dies is replaced within about ``leader_lease * 4/3``: a frozen leader's
    1 s-lease job then runs again within its lease plus 2 s. Short on purpose: a renewal
    is one small UPDATE of one row, and losing the role for a moment (a long pause) only
    means another worker runs the next passes."""
    heartbeat_interval: float = 5.0
    """Seconds between this worker's heartbeats in the backend's list of live workers
    (``python -m lane_pg workers``): one small upsert; the list counts a worker live for
    three intervals after its last one."""
    renew_fraction: float = 1 / 3
    cancel_on_lease_loss: bool = False
    """Cancel a handler whose lease was lost. By default it keeps running and is told
    (``ctx.has_lost_lease()``, ``ctx.ensure_lease()`` raising ``LeaseLost``, context writes
    refused), so it can stop at a safe point (WORK-8); its result is never written."""
    summary_interval: float = 60.0
    claim_rate_limit: JobRateLimit | None = None
    """A worker-local claim rate limit (RATE-1): every claim of this worker takes at most
    ``max`` jobs per ``duration`` from each queue, counted in the database over every
    worker that claims from the queue; it wins over the queue's shared limit (RATE-3)."""

    blocking_claim_timeout: float = 5.0
    """Seconds ``Worker.run_once_blocking`` waits for a job (WORK-5)."""
    stacktrace_limit: int | None = 10
    """Tracebacks kept on a job, newest last (WORK-14); 0 sends none, None keeps all.
    The worker sends one per failed attempt; the stored list keeps growing past the bound
    until ``lane.fail_jobs`` trims it (see docs/decisions.md)."""
    fail_on_timeout: bool = False
    """A run that exceeds its job's timeout fails the job for good (``TimeoutExceeded``);
    by default it is a failed attempt (``JobTimedOut``), retried while attempts remain
    (RETRY-4)."""
    max_jobs: int | None = None
    """``run()`` claims at most this many jobs, then stops as on ``stop()``: they finish
    and their outcomes are written (CLI-5, the periodic-restart strategy); None: no cap."""
    sync_threads: int | None = None
    """Threads that run plain ``def`` handlers (processors and job classes' ``handle``),
    at most this many at once; None: as many as ``concurrency``, so a worker of sync
    handlers runs ``concurrency`` jobs at once like one of async handlers. Started on
    demand: a worker of async handlers starts none. A sync handler that outlives its
    job's timeout keeps its thread until it returns (a thread cannot be stopped)."""
    pausable: bool = field(default_factory=pausing_enabled)
    """Whether queue pauses stop this worker's claims (PAUSE-10); default
    ``$LANE_PG_PAUSABLE``, true unless set to false."""
    on_unknown_job: Literal["fail", "release"] = "fail"
    """What a job whose name has no processor here does (WORK-3, A14). ``"fail"``: it fails
    for good with ``UnknownJobName`` and lands in the failed store. ``"release"`` (a fleet
    running two versions): it is given back for a worker that knows the name, its attempt
    not spent, delayed by ``poll_interval`` so this worker does not claim it again at once,
    and never recorded as failed."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InvalidOptions(f"concurrency must be >= 1, got {self.concurrency}")
        if self.lease <= 0 or self.poll_interval <= 0 or self.shutdown_timeout < 0:
            raise InvalidOptions("lease and poll interval must be positive")
        for name in (
            "prune_interval",
            "trim_interval",
            "promote_interval",
            "leader_lease",
            "reindex_interval",
            "heartbeat_interval",
        ):
            value = getattr(self, name)
            if value <= 0:
                raise InvalidOptions(f"{name} must be positive, got {value}")
        if self.stalled_interval is not None and self.stalled_interval <= 0:
            raise InvalidOptions(f"stalled_interval must be positive, got {self.stalled_interval}")
        for name, least, kind in (
            ("vacuum_min_dead", 1, "a positive count"),
            ("reindex_min_bytes", 0, "a size in bytes"),
            ("stacktrace_limit", 0, "a count >= 0"),
        ):
            count = getattr(self, name)
            if count is not None and (isinstance(count, bool) or count < least):
                raise InvalidOptions(f"{name} must be {kind} or None, got {count!r}")
        if self.sync_threads is not None and (
            isinstance(self.sync_threads, bool)
            or not isinstance(self.sync_threads, int)
            or self.sync_threads < 1
        ):
            raise InvalidOptions(
                f"sync_threads must be None or a count >= 1, got {self.sync_threads!r}"
            )
        if self.max_jobs is not None and (isinstance(self.max_jobs, bool) or self.max_jobs < 1):
            raise InvalidOptions(f"max_jobs must be None or a count >= 1, got {self.max_jobs!r}")
        if self.blocking_claim_timeout < 0:
            raise InvalidOptions(
                f"blocking_claim_timeout must not be negative, got {self.blocking_claim_timeout}"
            )
        if not 0 < self.renew_fraction < 1:
            raise InvalidOptions("renew_fraction must be within (0, 1)")
        if self.claim_rate_limit is not None and not isinstance(
            self.claim_rate_limit, JobRateLimit
        ):
            raise InvalidOptions(
                f"claim_rate_limit must be a JobRateLimit or None, got {self.claim_rate_limit!r}"
            )
        if self.on_unknown_job not in UNKNOWN_JOB_CHOICES:
            raise InvalidOptions(
                f"on_unknown_job must be 'fail' or 'release', got {self.on_unknown_job!r}"
            )
        if self.all_queues and self.lanes:
            raise InvalidOptions("all_queues serves every queue: give it without lanes")
        names = [lane.name for lane in self.lanes]
        if len(names) != len(set(names)):
            raise InvalidOptions(f"a lane is listed twice: {names}")

    @property
    def sync_thread_count(self) -> int:
        """``sync_threads``, or ``concurrency`` when it is None."""
        return self.concurrency if self.sync_threads is None else self.sync_threads

    @property
    def recovery_interval(self) -> float:
        """Seconds between the leader's stalled-recovery passes (``stalled_interval``)."""
        return self.stalled_interval or min(self.lease, 1.0)
