"""Locks and limiters of job middleware on Redis (MW-3..6, MW-10).

Their keys are global to the backend, not a queue's, so each has a hash tag of its own
under the backend's prefix: a lock is the hash ``{prefix:lock:<key>}``, a limiter (rate
window and throttle, one row in PostgreSQL's ``lane.limiters``) ``{prefix:limiter:<key>}``.
Each call is one script on that one key, so concurrent callers take turns on it.

A lock's holder is a run of a job, whose hash lies in its queue's slot, which the lock's
script cannot read. ``acquire_lock`` therefore checks runs from the client: the caller's
own run first (``JobNotFound`` / ``LockMismatch``), then, when the script reports another
holder, that holder's job; a holder found over is named to the script, which takes the
lock only if that same run still holds it. A run never becomes active again under its
token (tokens are fresh UUIDs), so "over" stays true between the read and the script.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from lane_pg.backend.locks import (
    AcquireLock,
    CheckThrottle,
    HitRateLimit,
    RecordThrottleOutcome,
    ReleaseLock,
)
from lane_pg.errors import InvalidOptions, InvalidQueueName, ValidationError
from lane_pg.redis.backend import RedisEntity, refused
from lane_pg.redis.rows import canonical_token, epoch_ms
from lane_pg.types import Duration, to_millis, validate_queue_name

TAKEOVER_ATTEMPTS = 8
"""Holders an ``acquire_lock`` call checks before it answers False: each later one took
the key while the call checked the one before, so the key is contended by live runs."""


def _checked_key(key: str, operation: str) -> None:
    if not key:
        raise ValidationError(f"{operation} needs a non-empty key")


def _checked_limiter(max_attempts: int, decay: Duration) -> int:
    """``lane._check_limiter``: the decay in milliseconds."""
    if max_attempts < 1:
        raise InvalidOptions(f"a limiter needs max_attempts of at least 1, got {max_attempts}")
    decay_ms = to_millis(decay, "decay")
    if decay_ms < 1:
        raise InvalidOptions(f"a limiter needs a decay of at least 1 ms, got {decay_ms} ms")
    return decay_ms


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class RedisLocks(RedisEntity):
    """The ``locks`` handle on Redis."""

    def _lock_key(self, key: str) -> str:
        return f"{{{self._backend.prefix}:lock:{key}}}"

    def _limiter_key(self, key: str) -> str:
        return f"{{{self._backend.prefix}:limiter:{key}}}"

    async def _run(self, script: str, key: str, arguments: dict[str, Any]) -> Any:
        return await self._backend.scripts.call(script, [key], arguments)

    async def _run_of(self, queue: str, job_id: str) -> tuple[str | None, str | None, str | None]:
        """The job's (key, state, lock_token), all None when there is no such job."""
        try:
            validate_queue_name(queue)
        except InvalidQueueName:
            return None, None, None
        fields = await self._backend.client.hmget(
            self._backend.keys(queue).job(job_id), ["key", "state", "lock_token"]
        )
        key, state, token = (_text(value) for value in fields)
        return key, state, token

    async def acquire_lock(self, args: AcquireLock) -> bool:
        _checked_key(args.key, "acquire_lock")
        ttl_ms = to_millis(args.ttl, "ttl")
        if ttl_ms <= 0:
            raise InvalidOptions(f"a lock's ttl must be positive, got {ttl_ms} ms")
        token = canonical_token(args.token) or ""
        job_key, state, held_by = await self._run_of(args.queue, args.job_id)
        if job_key is None:
            refused("not_found", args.queue, args.job_id)
        if state != "active" or not token or held_by != token:
            refused("lock_mismatch", args.queue, args.job_id)
        arguments: dict[str, Any] = {
            "queue": args.queue,
            "id": args.job_id,
            "job_key": job_key,
            "token": token,
            "ttl_ms": ttl_ms,
            "now": epoch_ms(args.now),
            "dead": None,
        }
        for _ in range(TAKEOVER_ATTEMPTS):
            answer = await self._run("acquire_lock", self._lock_key(args.key), arguments)
            if answer[0] == "ok":
                return True
            _, holder_queue, holder_id, holder_key, holder_token = answer
            if await self._live(holder_queue, holder_id, holder_key, holder_token):
                return False
            arguments["dead"] = holder_token
        return False

    async def _live(self, queue: str, job_id: str, job_key: str, token: str) -> bool:
        """The run (queue, id, key, token) is not over: its job is active under the token."""
        key, state, held_by = await self._run_of(queue, job_id)
        return key == job_key and state == "active" and held_by == token

    async def release_lock(self, args: ReleaseLock) -> bool:
        token = canonical_token(args.token)
        if not args.key or token is None:
            return False
        arguments = {"queue": args.queue, "id": args.job_id, "token": token}
        return bool(await self._run("release_lock", self._lock_key(args.key), arguments))

    async def hit_rate_limit(self, args: HitRateLimit) -> timedelta | None:
        _checked_key(args.key, "hit_rate_limit")
        decay_ms = _checked_limiter(args.max_attempts, args.decay)
        wait = await self._run(
            "hit_rate_limit",
            self._limiter_key(args.key),
            {"max": args.max_attempts, "decay_ms": decay_ms, "now": epoch_ms(args.now)},
        )
        return None if wait is None else timedelta(milliseconds=int(wait))

    async def check_throttle(self, args: CheckThrottle) -> timedelta | None:
        if not args.key:
            return None
        blocked = await self._backend.client.hget(self._limiter_key(args.key), "blocked_until")
        if blocked is None:
            return None
        now = await self._backend.now_ms(args.now)
        left = int(blocked) - now
        return timedelta(milliseconds=left) if left > 0 else None

    async def record_throttle_outcome(self, args: RecordThrottleOutcome) -> bool:
        _checked_key(args.key, "record_throttle_outcome")
        decay_ms = _checked_limiter(args.max_attempts, args.decay)
        arguments = {
            "failed": bool(args.failed),
            "max": args.max_attempts,
            "decay_ms": decay_ms,
            "now": epoch_ms(args.now),
        }
        return bool(
            await self._run("record_throttle_outcome", self._limiter_key(args.key), arguments)
        )
