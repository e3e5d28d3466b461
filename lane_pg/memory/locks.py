"""``MemoryLocks``: the rules of sql/functions/57_locks.sql (MW-3..6, MW-10) over the
store's ``_locks`` and ``_limiters``; each call is one step on the event loop, so callers
sharing the backend take turns as they do on the row in PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

from lane_pg.backend.locks import (
    AcquireLock,
    CheckThrottle,
    HitRateLimit,
    RecordThrottleOutcome,
    ReleaseLock,
)
from lane_pg.errors import InvalidOptions, ValidationError
from lane_pg.memory._records import _MILLISECOND, _Limiter, _Lock, _same_token
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import Duration, to_millis


def _checked_limiter(max_attempts: int, decay: Duration) -> int:
    """``lane._check_limiter``: the decay in milliseconds."""
    if max_attempts < 1:
        raise InvalidOptions(f"a limiter needs max_attempts of at least 1, got {max_attempts}")
    decay_ms = to_millis(decay, "decay")
    if decay_ms < 1:
        raise InvalidOptions(f"a limiter needs a decay of at least 1 ms, got {decay_ms} ms")
    return decay_ms


def _wait_until(end: datetime, now: datetime) -> timedelta:
    """The wait from ``now`` to ``end`` in whole milliseconds, rounded up, at least 1 ms
    (``greatest(ceil(... * 1000), 1)`` in SQL)."""
    micros = (end - now) // timedelta(microseconds=1)
    return timedelta(milliseconds=max(-(-micros // 1000), 1))


def _checked_key(key: str, operation: str) -> None:
    if not key:
        raise ValidationError(f"{operation} needs a non-empty key")


class MemoryLocks(MemoryEntity):
    """The ``locks`` handle over a ``MemoryBackend``."""

    async def acquire_lock(self, args: AcquireLock) -> bool:
        _checked_key(args.key, "acquire_lock")
        ttl_ms = to_millis(args.ttl, "ttl")
        if ttl_ms <= 0:
            raise InvalidOptions(f"a lock's ttl must be positive, got {ttl_ms} ms")
        store = self._store
        _, job = store._owned(args.queue, args.job_id, args.token)
        moment = store._now(args.now)
        until = moment + ttl_ms * _MILLISECOND
        current = store._locks.get(args.key)
        if current is None or self._lapsed(current, moment):
            store._locks[args.key] = _Lock(
                job.key, args.queue, args.job_id, args.token, moment, until
            )
            return True
        if current.holder_key == job.key and _same_token(current.holder_token, args.token):
            current.expires_at = until
            return True
        return False

    def _lapsed(self, lock: _Lock, now: datetime) -> bool:
        """The lock is free: expired, or its holder's run is over."""
        if lock.expires_at <= now:
            return True
        found = self._store._find(lock.holder_queue, lock.holder_id)
        if found is None:
            return True
        job = found[1]
        return not (
            job.key == lock.holder_key
            and job.state == "active"
            and _same_token(job.lock_token, lock.holder_token)
        )

    async def release_lock(self, args: ReleaseLock) -> bool:
        current = self._store._locks.get(args.key)
        if (
            current is None
            or (current.holder_queue, current.holder_id) != (args.queue, args.job_id)
            or not _same_token(current.holder_token, args.token)
        ):
            return False
        del self._store._locks[args.key]
        return True

    async def hit_rate_limit(self, args: HitRateLimit) -> timedelta | None:
        _checked_key(args.key, "hit_rate_limit")
        decay = _checked_limiter(args.max_attempts, args.decay) * _MILLISECOND
        store = self._store
        moment = store._now(args.now)
        limiter = store._limiters.setdefault(args.key, _Limiter(moment))
        if limiter.window_start is None or limiter.window_start + decay <= moment:
            limiter.window_start, limiter.hits = moment, 1
        else:
            # A refused hit is counted too, capped at max + 1 (lane.hit_rate_limit).
            limiter.hits = min(limiter.hits + 1, args.max_attempts + 1)
        limiter.updated_at = moment
        if limiter.hits <= args.max_attempts:
            return None
        return _wait_until(limiter.window_start + decay, moment)

    async def check_throttle(self, args: CheckThrottle) -> timedelta | None:
        moment = self._store._now(args.now)
        limiter = self._store._limiters.get(args.key)
        if limiter is None or limiter.blocked_until is None or limiter.blocked_until <= moment:
            return None
        return _wait_until(limiter.blocked_until, moment)

    async def record_throttle_outcome(self, args: RecordThrottleOutcome) -> bool:
        _checked_key(args.key, "record_throttle_outcome")
        decay = _checked_limiter(args.max_attempts, args.decay) * _MILLISECOND
        store = self._store
        moment = store._now(args.now)
        limiter = store._limiters.get(args.key)
        if not args.failed:
            if limiter is not None and limiter.failures > 0:
                limiter.failures, limiter.updated_at = 0, moment
            return False
        if limiter is None:
            limiter = store._limiters[args.key] = _Limiter(moment)
        limiter.updated_at = moment
        if limiter.failures + 1 >= args.max_attempts:
            limiter.failures, limiter.blocked_until = 0, moment + decay
            return True
        limiter.failures += 1
        return False
