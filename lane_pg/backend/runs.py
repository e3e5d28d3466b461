"""Claiming, leases and settling outcomes (CLAIM, FIN, RETRY): the worker's hot path.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    JSON,
    ClaimedJob,
    Completion,
    Duration,
    Failure,
    FinalizeOutcome,
    JobRateLimit,
    JobRow,
    LeaseRef,
    QueueDemand,
)


class ClaimJobs(Arguments[list[ClaimedJob]]):
    """Claim up to ``demand.limit`` jobs from each queue, queues in the given order.

    For each queue in turn: promote every due delayed job (``available_at <= now``) to
    waiting (``waiting prev=delayed``, promoted in ``available_at`` order), waking no
    one (CLAIM-3); skip the queue if paused or blocked by ``rate_limit_claims_for``;
    under limits (``ClaimLimits``: ``rate_limit``, the worker-local limit, else the
    queue's shared one, and ``max_active``) take at most min(demand, free slots, rate
    capacity), counted from the stored active jobs and claim log at this claim's
    moment, and nothing at all when maxed (no rate capacity used, RATE-9); a job not
    taken keeps its state and attempts (RATE-4). Move the next waiting jobs to
    ``active`` with a fresh
    ``lock_token``, ``worker_id``, ``processed_at = now``, ``lease_expires_at = now +
    lease`` and ``attempts_started + 1``, writing ``active prev=waiting``. ``total``
    caps the number claimed over all queues, so a queue earlier in the list is always
    served first. Returns the claimed jobs in claim order, each a ``ClaimedJob`` whose
    ``lock_token`` is the token every later write of this run must carry.
    ``ignore_pause`` claims from paused queues too (PAUSE-10: workers of a process run
    with ``LANE_PG_PAUSABLE=false``); nothing else changes. A queue is paused by its own
    flag or the connection-wide one (``pause_all``); a demand with ``pause_as`` is
    paused when that queue is (its own flag then does not count, PAUSE-8).
    """

    worker_id: str
    demands: Sequence[QueueDemand]
    lease: Duration
    _: KW_ONLY
    total: int | None = None
    now: datetime | None = None
    rate_limit: JobRateLimit | None = None
    ignore_pause: bool = False


class RenewLeases(Arguments[list[LeaseRef]]):
    """Extend each lease to ``now + lease``; return the refs that could not be renewed
    (job gone, not active, or token no longer current) (CLAIM-5, CLAIM-6)."""

    leases: Sequence[LeaseRef]
    lease: Duration
    _: KW_ONLY
    now: datetime | None = None


class CompleteJob(Arguments[JobRow]):
    """Token-checked ``active -> completed`` (FIN-1): ``finished_at = now``, the
    result stored, the lock cleared; event ``completed``; then retention
    (``remove_on_complete``) and ``drained`` when no waiting or active job remains.
    Completing after the lease expired is allowed while the token is current (FIN-9).
    Raises ``JobNotFound`` or ``LockMismatch``."""

    queue: str
    job_id: str
    token: str
    result: JSON = None
    _: KW_ONLY
    now: datetime | None = None


class CompleteJobs(Arguments[list[FinalizeOutcome]]):
    """``complete`` for many jobs in one operation; a stale token or a missing job
    marks that item (``lock_mismatch`` / ``not_found``) and leaves it unchanged
    without stopping the others. Outcomes are in input order."""

    items: Sequence[Completion]
    _: KW_ONLY
    now: datetime | None = None


class FailJob(Arguments[JobRow]):
    """Token-checked failure (FIN-3..6, RETRY-7).

    ``attempts_made + 1``; ``failed_reason`` set; ``stacktrace`` (this attempt's
    formatted traceback) appended as one entry of the job's list. If attempts
    remain and ``discard_retry`` is false: the backoff for that attempt number decides
    ``delayed`` (``available_at = now + backoff``, event ``delayed`` with the delay,
    ``prev=active`` and ``failedReason``) or ``waiting`` (zero backoff, normal FIFO/LIFO
    position, event ``waiting prev=active``). Otherwise ``failed`` with
    ``finished_at``; events ``failed`` then, when ``attempts_made >= max_attempts``,
    ``retries-exhausted``; then retention (``remove_on_fail``) and ``drained``.
    """

    queue: str
    job_id: str
    token: str
    reason: str
    _: KW_ONLY
    stacktrace: str | None = None
    discard_retry: bool = False
    now: datetime | None = None


class FailJobs(Arguments[list[FinalizeOutcome]]):
    """``fail`` for many jobs in one operation, outcomes in input order."""

    items: Sequence[Failure]
    _: KW_ONLY
    now: datetime | None = None


class ReleaseJob(Arguments[JobRow]):
    """Token-checked ``active -> waiting`` at the front of its priority (ORD-3,
    MGMT-7): lock and ``processed_at`` cleared, attempts unchanged,
    event ``waiting prev=active``."""

    queue: str
    job_id: str
    token: str
    _: KW_ONLY
    now: datetime | None = None


class DelayJob(Arguments[JobRow]):
    """Token-checked ``active -> delayed`` at ``now + delay`` (MGMT-6); lock cleared;
    event ``delayed prev=active``."""

    queue: str
    job_id: str
    token: str
    delay: Duration
    _: KW_ONLY
    now: datetime | None = None


class GiveBackJob(Arguments[JobRow]):
    """A claim handed back without running (A2, A14): ``release_job`` when ``delay``
    is 0, else ``delay_job``, and the claim's attempt given back (``attempts_started
    - 1``, never below 0); ``attempts_made`` and ``stalled_count`` unchanged. A
    negative delay raises ``InvalidOptions`` and changes nothing."""

    queue: str
    job_id: str
    token: str
    delay: Duration = 0
    _: KW_ONLY
    now: datetime | None = None


class DiscardJob(Arguments[None]):
    """Token-checked removal of a claimed job (MW-2: a middleware's ``Deleted``): the job
    goes as any removed job does (event ``removed prev=active``, its dedup id and repeat
    series released, a flow parent told), without a failed record. Raises
    ``JobNotFound`` or ``LockMismatch`` and changes nothing when the job is not active
    under ``token``."""

    queue: str
    job_id: str
    token: str
    _: KW_ONLY
    now: datetime | None = None


class Runs(Handle, name="runs"):
    """Claiming, leases and settling outcomes (CLAIM, FIN, RETRY): the worker's hot path."""

    __slots__ = ()

    claim_jobs = operation(ClaimJobs)
    renew_leases = operation(RenewLeases)
    complete_job = operation(CompleteJob)
    complete_jobs = operation(CompleteJobs)
    fail_job = operation(FailJob)
    fail_jobs = operation(FailJobs)
    release_job = operation(ReleaseJob)
    delay_job = operation(DelayJob)
    give_back_job = operation(GiveBackJob)
    discard_job = operation(DiscardJob)
