"""Claim limits of a queue (RATE): a claim rate limit and a ceiling on active jobs.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring); how a
claim applies these limits is in ``Runs.claim_jobs``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime, timedelta

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import Duration, JobRateLimit


class SetClaimRateLimit(Arguments[None]):
    """Store the queue's shared limit (``rate_max``, ``rate_duration_ms``), creating
    the queue when missing; wakes its idle claimers (RATE-2)."""

    queue: str
    limit: JobRateLimit


class GetClaimRateLimit(Arguments[JobRateLimit | None]):
    """The queue's shared limit, or None (also for a queue that does not exist)."""

    queue: str


class ClearClaimRateLimit(Arguments[None]):
    """Remove the shared limit; the claims logged so far stay (RATE-2)."""

    queue: str


class GetClaimRateLimitTtl(Arguments[int]):
    """Milliseconds until the limiter admits a claim (RATE-5).

    With ``max`` (or else the shared limit's max): 0 while one more job would be
    admitted now, otherwise the milliseconds until it would be, a manual block
    (``rate_limit_claims_for``) included; windows are the shared limit's duration when
    one is set, else each logged claim's own. With neither: the raw time-to-live of
    the limiter, the milliseconds until its last logged claim (or the manual block)
    expires, and ``-2`` when it holds nothing live (Redis' PTTL of a missing key).
    A ``max`` below 1 raises ``InvalidOptions``."""

    queue: str
    max: int | None = None
    _: KW_ONLY
    now: datetime | None = None


class RateLimitClaimsFor(Arguments[None]):
    """Block every claim of the queue until ``now + duration`` whatever its limits
    (BullMQ's ``rateLimit()``, RATE-6); a later call replaces the time. The duration
    must be at least 1 ms (else ``InvalidOptions``)."""

    queue: str
    duration: Duration
    _: KW_ONLY
    now: datetime | None = None


class ClearClaimRateLimitKey(Arguments[None]):
    """Forget the logged claims and any manual block, so claims are admitted at once;
    the configured limit stays (RATE-6). Wakes the queue's idle claimers."""

    queue: str


class SetMaxActiveJobs(Arguments[None]):
    """At most ``max_active`` (>= 1) jobs of the queue active at once over every
    worker (RATE-7), creating the queue when missing; wakes its idle claimers."""

    queue: str
    max_active: int


class GetMaxActiveJobs(Arguments[int | None]):
    """The queue's ceiling, or None."""

    queue: str


class ClearMaxActiveJobs(Arguments[None]):
    """Remove the ceiling; wakes the queue's idle claimers."""

    queue: str


class IsMaxed(Arguments[bool]):
    """Whether the queue's active jobs reach its ``max_active``, in one read (RATE-8);
    False without a ceiling."""

    queue: str


class NextClaimIn(Arguments[timedelta | None]):
    """How long until a claim of these queues (every queue when None) may get a job it
    cannot get now: the next delayed job's due time (``next_due_in``; left out when
    ``delayed`` is false), or when a rate-limited queue that has waiting jobs admits a
    claim again (``rate_limit`` is the worker-local limit, as passed to
    ``claim_jobs``): zero when it admits one already (the window may have freed since
    the caller's claim). None when neither applies: a paused or maxed queue is woken
    by its resume or a freed slot (CLAIM-9/11). Pass only the queues the caller can
    claim from now, or a zero makes it claim again for nothing."""

    queues: Sequence[str] | None = None
    rate_limit: JobRateLimit | None = None
    _: KW_ONLY
    delayed: bool = True


class Limits(Handle, name="limits"):
    """A queue's claim rate limit and max active jobs (RATE-1..9).

    The rate limiter is a log of the claims of each queue: a claim under ``N`` per ``D``
    takes ``k`` jobs only while the jobs claimed in the last ``D`` plus ``k`` stay within
    ``N``, so no window of length ``D`` (wherever it starts) holds more than ``N`` claimed
    jobs, over every worker of the queue. The limit a claim uses is the worker-local one
    it passes (``claim_jobs(rate_limit=...)``) or else the queue's shared one (RATE-3);
    both count in the same log.
    """

    __slots__ = ()

    set_claim_rate_limit = operation(SetClaimRateLimit)
    get_claim_rate_limit = operation(GetClaimRateLimit)
    clear_claim_rate_limit = operation(ClearClaimRateLimit)
    get_claim_rate_limit_ttl = operation(GetClaimRateLimitTtl)
    rate_limit_claims_for = operation(RateLimitClaimsFor)
    clear_claim_rate_limit_key = operation(ClearClaimRateLimitKey)
    set_max_active_jobs = operation(SetMaxActiveJobs)
    get_max_active_jobs = operation(GetMaxActiveJobs)
    clear_max_active_jobs = operation(ClearMaxActiveJobs)
    is_maxed = operation(IsMaxed)
    next_claim_in = operation(NextClaimIn)
