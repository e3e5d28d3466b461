"""Locks and limiters of job middleware (MW-3..6, MW-10): WithoutOverlapping's locks,
RateLimited's windows and ThrottlesExceptions' failure counts, stored with the jobs.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring). Keys
are global to the backend (not per queue): the middleware builds them.
"""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime, timedelta

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import Duration


class AcquireLock(Arguments[bool]):
    """Take ``key`` for the run ``(queue, job_id, token)`` until ``now + ttl``: True when
    the run holds it afterwards, because the key was free, its expiry passed, its holder's
    run is over (the holder job is gone or no longer ``active`` under the holder's token:
    a dead worker's lock ends when stalled recovery takes its job back), or this run held
    it already (its expiry renewed). False, and nothing changes, while another live run
    holds it. The caller's job must be active under ``token`` (``JobNotFound`` /
    ``LockMismatch``); an empty key raises ``ValidationError`` and a ``ttl`` that is not
    positive ``InvalidOptions``, writing nothing."""

    key: str
    queue: str
    job_id: str
    token: str
    ttl: Duration
    _: KW_ONLY
    now: datetime | None = None


class ReleaseLock(Arguments[bool]):
    """Give ``key`` up if the run ``(queue, job_id, token)`` holds it (True); False when it
    holds nothing (its lock expired and another run took the key, say)."""

    key: str
    queue: str
    job_id: str
    token: str


class HitRateLimit(Arguments[timedelta | None]):
    """One hit on the fixed window of ``key``: at most ``max_attempts`` hits per ``decay``,
    the window starting at its first hit and a new one at the first hit after it ended.
    Returns None when the hit is granted, else the time left until the window ends (at
    least 1 ms). Checked and counted in one step, so concurrent callers never get more
    than ``max_attempts`` grants in a window between them. ``max_attempts`` below 1 or a
    ``decay`` under 1 ms raise ``InvalidOptions``."""

    key: str
    max_attempts: int
    decay: Duration
    _: KW_ONLY
    now: datetime | None = None


class CheckThrottle(Arguments[timedelta | None]):
    """How long ``key``'s throttle stays open (jobs are released without running), or None
    when it is closed (never opened, or its block ended by ``now``)."""

    key: str
    _: KW_ONLY
    now: datetime | None = None


class RecordThrottleOutcome(Arguments[bool]):
    """One handler outcome under ``key``'s throttle: a success resets the count of
    consecutive failures; a failure adds one, and the ``max_attempts``-th failure in a
    row opens the throttle until ``now + decay`` and starts the count again from 0.
    Returns True when this outcome opened it. Limits as for ``hit_rate_limit``."""

    key: str
    failed: bool
    max_attempts: int
    decay: Duration
    _: KW_ONLY
    now: datetime | None = None


class Locks(Handle, name="locks"):
    """WithoutOverlapping's locks (``acquire_lock``, ``release_lock``), RateLimited's
    windows (``hit_rate_limit``) and ThrottlesExceptions' consecutive failures
    (``check_throttle``, ``record_throttle_outcome``): each call one step on one key's
    row, so workers on other connections or hosts agree."""

    __slots__ = ()

    acquire_lock = operation(AcquireLock)
    release_lock = operation(ReleaseLock)
    hit_rate_limit = operation(HitRateLimit)
    check_throttle = operation(CheckThrottle)
    record_throttle_outcome = operation(RecordThrottleOutcome)
