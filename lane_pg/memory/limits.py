"""Claim limits (RATE): the twin of sql/functions/52_limits.sql."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

from lane_pg.backend.limits import (
    ClearClaimRateLimit,
    ClearClaimRateLimitKey,
    ClearMaxActiveJobs,
    GetClaimRateLimit,
    GetClaimRateLimitTtl,
    GetMaxActiveJobs,
    IsMaxed,
    NextClaimIn,
    RateLimitClaimsFor,
    SetClaimRateLimit,
    SetMaxActiveJobs,
)
from lane_pg.errors import InvalidOptions
from lane_pg.memory._records import _MILLISECOND, _LoggedClaim, _Queue
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import JobRateLimit, to_millis, validate_queue_name

_MAX_INT4 = 2**31 - 1
_MAX_DURATION_MS = 9223372036854


def _ceil_ms(delta: timedelta) -> int:
    """Whole milliseconds, rounded up (SQL: ``ceil(extract(epoch ...) * 1000)``)."""
    return math.ceil(delta / _MILLISECOND)


def _largest(*values: int) -> int:
    # get_claim_rate_limit_ttl's parameter ``max`` (RATE-5's name) shadows the builtin.
    return max(values)


def _largest_time(values: Iterable[datetime], default: None) -> datetime | None:
    return max(values, default=default)


def _positive_count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_INT4:
        raise InvalidOptions(f"{what} must be an integer between 1 and {_MAX_INT4}, got {value!r}")
    return value


def _checked_limit(limit: JobRateLimit | None, what: str) -> JobRateLimit | None:
    if limit is not None and not isinstance(limit, JobRateLimit):
        raise InvalidOptions(f"{what} must be a JobRateLimit or None, got {limit!r}")
    return limit


def _rate_wait_ms(q: _Queue, max_jobs: int, window_ms: int | None, now: datetime) -> int:
    """``lane._rate_wait_ms``: 0 when one more job is admitted now, else the milliseconds
    until it is (rows by ``window_ms``, or each by its own window when None)."""
    live = sorted(
        (entry for entry in q.claim_log if entry.expires(window_ms) > now),
        key=lambda entry: entry.expires(window_ms),
        reverse=True,
    )
    newer = 0
    for entry in live:
        newer += entry.jobs
        if newer >= max_jobs:
            return max(1, _ceil_ms(entry.expires(window_ms) - now))
    return 0


def _limited_claim(
    q: _Queue, want: int, local: JobRateLimit | None, now: datetime
) -> tuple[int, int | None]:
    """``lane._limited_claim``: how many of ``want`` jobs may be claimed now and the
    rate window they are logged under (None: no rate limit applies)."""
    allowed = want
    if q.max_active is not None:
        allowed = min(allowed, q.max_active - len(q.by_state["active"]))
    rate_max, rate_ms = q.rate_max, q.rate_duration_ms
    if local is not None:
        rate_max, rate_ms = local.max, local.duration_ms
    if allowed <= 0 or rate_max is None or rate_ms is None:
        return allowed, None  # RATE-9: a maxed claim reads no rate capacity
    q.claim_log = [
        entry
        for entry in q.claim_log
        if entry.claimed_at > now - rate_ms * _MILLISECOND
        or entry.claimed_at > now - entry.window_ms * _MILLISECOND
    ]
    window_start = now - rate_ms * _MILLISECOND
    used = sum(entry.jobs for entry in q.claim_log if entry.claimed_at > window_start)
    return min(allowed, rate_max - used), rate_ms


def _log_claim(q: _Queue, now: datetime, jobs: int, window_ms: int) -> None:
    q.claim_log.append(_LoggedClaim(now, jobs, window_ms))


class MemoryLimits(MemoryEntity):
    """The ``limits`` handle (RATE): the twin of sql/functions/52_limits.sql."""

    async def set_claim_rate_limit(self, args: SetClaimRateLimit) -> None:
        validate_queue_name(args.queue)
        if _checked_limit(args.limit, "limit") is None:
            raise InvalidOptions("limit must be a JobRateLimit, got None")
        q = self._store._queue(args.queue)
        q.rate_max, q.rate_duration_ms = args.limit.max, args.limit.duration_ms

    async def get_claim_rate_limit(self, args: GetClaimRateLimit) -> JobRateLimit | None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        if q is None or q.rate_max is None or q.rate_duration_ms is None:
            return None
        return JobRateLimit(q.rate_max, timedelta(milliseconds=q.rate_duration_ms))

    async def clear_claim_rate_limit(self, args: ClearClaimRateLimit) -> None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        if q is not None:
            q.rate_max = q.rate_duration_ms = None

    async def get_claim_rate_limit_ttl(self, args: GetClaimRateLimitTtl) -> int:
        validate_queue_name(args.queue)
        if args.max is not None:
            _positive_count(args.max, "max")
        moment = self._store._now(args.now)
        q = self._store._queues.get(args.queue)
        if q is None:
            return 0 if args.max is not None else -2
        block_ms = (
            _ceil_ms(q.rate_blocked_until - moment)
            if q.rate_blocked_until is not None and q.rate_blocked_until > moment
            else None
        )
        max_jobs = args.max if args.max is not None else q.rate_max
        if max_jobs is not None:
            return _largest(block_ms or 0, _rate_wait_ms(q, max_jobs, q.rate_duration_ms, moment))
        last = _largest_time((entry.expires() for entry in q.claim_log), default=None)
        if last is not None and last > moment:
            block_ms = _largest(block_ms or 0, _ceil_ms(last - moment))
        return -2 if block_ms is None else block_ms

    async def rate_limit_claims_for(self, args: RateLimitClaimsFor) -> None:
        validate_queue_name(args.queue)
        millis = to_millis(args.duration, "duration")
        if not 1 <= millis <= _MAX_DURATION_MS:
            raise InvalidOptions(
                f"the duration must be 1 to {_MAX_DURATION_MS} ms, got {millis} ms"
            )
        self._store._queue(args.queue).rate_blocked_until = (
            self._store._now(args.now) + millis * _MILLISECOND
        )

    async def clear_claim_rate_limit_key(self, args: ClearClaimRateLimitKey) -> None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        if q is not None:
            q.claim_log = []
            q.rate_blocked_until = None

    async def set_max_active_jobs(self, args: SetMaxActiveJobs) -> None:
        validate_queue_name(args.queue)
        self._store._queue(args.queue).max_active = _positive_count(args.max_active, "max_active")

    async def get_max_active_jobs(self, args: GetMaxActiveJobs) -> int | None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        return None if q is None else q.max_active

    async def clear_max_active_jobs(self, args: ClearMaxActiveJobs) -> None:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        if q is not None:
            q.max_active = None

    async def is_maxed(self, args: IsMaxed) -> bool:
        validate_queue_name(args.queue)
        q = self._store._queues.get(args.queue)
        return (
            q is not None and q.max_active is not None and len(q.by_state["active"]) >= q.max_active
        )

    async def next_claim_in(self, args: NextClaimIn) -> timedelta | None:
        local = _checked_limit(args.rate_limit, "rate_limit")
        moment = self._store._now(None)
        waits: list[int] = []
        for q in self._store._selected(args.queues):
            due = (
                [job.available_at for job in q.by_state["delayed"].values()] if args.delayed else []
            )
            if due:
                waits.append(max(0, _ceil_ms(min(due) - moment)))
            if q.paused or self._store._all_paused or not q.by_state["waiting"]:
                continue
            wait = (
                _ceil_ms(q.rate_blocked_until - moment)
                if q.rate_blocked_until is not None and q.rate_blocked_until > moment
                else 0
            )
            rate_max, rate_ms = q.rate_max, q.rate_duration_ms
            if local is not None:
                rate_max, rate_ms = local.max, local.duration_ms
            if rate_max is None and wait == 0:
                continue  # neither limited nor blocked: nothing to time
            if rate_max is not None:
                wait = max(wait, _rate_wait_ms(q, rate_max, rate_ms, moment))
            if wait == 0 and q.max_active is not None and len(q.by_state["active"]) >= q.max_active:
                continue  # admitted but maxed: woken by the finish that frees a slot
            waits.append(wait)
        return timedelta(milliseconds=min(waits)) if waits else None
