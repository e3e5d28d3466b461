"""Claim limits on Redis (RATE-1..9, CLAIM-9/11): a queue's shared rate limit, max active
jobs and manual block are fields of its meta hash, written by ``set_queue_settings.lua``;
the claim applies them (``claim_jobs.lua`` with ``includes/limits.lua``, which also keeps
the claim log, the sorted set ``<tag>:claims``). The reads here take the meta fields and
the log in one MULTI and compute the waits as ``lane._rate_wait_ms`` does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

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
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.queues import known_queues
from lane_pg.redis.rows import epoch_ms
from lane_pg.types import JobRateLimit, to_millis, validate_queue_name

_MAX_INT4 = 2**31 - 1
_MAX_DURATION_MS = 9223372036854
"""``lane._max_duration_ms()``: the longest block ``rate_limit_claims_for`` takes."""

RATE_FIELDS = ("rate_max", "rate_duration_ms")


def positive_count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_INT4:
        raise InvalidOptions(f"{what} must be an integer between 1 and {_MAX_INT4}, got {value!r}")
    return value


def checked_limit(limit: JobRateLimit | None, what: str) -> JobRateLimit | None:
    """A worker-local or shared limit as given: a ``JobRateLimit`` (it checked its own
    bounds) or None."""
    if limit is not None and not isinstance(limit, JobRateLimit):
        raise InvalidOptions(f"{what} must be a JobRateLimit or None, got {limit!r}")
    return limit


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class LoggedClaim:
    """One member of the claim log: ``jobs`` claimed at ``claimed_at`` under ``window_ms``."""

    claimed_at: int
    jobs: int
    window_ms: int

    def expires(self, window_ms: int | None = None) -> int:
        return self.claimed_at + (window_ms or self.window_ms)


def claim_log(entries: Sequence[tuple[bytes, float]]) -> list[LoggedClaim]:
    """The log as ``ZRANGE ... WITHSCORES`` reads it (members ``jobs:window_ms:token``)."""
    logged = []
    for member, score in entries:
        jobs, window_ms, _ = member.decode().split(":", 2)
        logged.append(LoggedClaim(int(score), int(jobs), int(window_ms)))
    return logged


def rate_wait_ms(log: Sequence[LoggedClaim], max_jobs: int, window_ms: int | None, now: int) -> int:
    """``lane._rate_wait_ms``: 0 when one more job is admitted at ``now``, else the
    milliseconds until it is; claims by ``window_ms``, or each by its own when None. Walked
    newest expiry first, the claim at which the jobs reach ``max_jobs`` is the one whose
    expiry brings the count below it."""
    newer = 0
    live = sorted(
        ((entry.expires(window_ms), entry.jobs) for entry in log if entry.expires(window_ms) > now),
        reverse=True,
    )
    for expires, jobs in live:
        newer += jobs
        if newer >= max_jobs:
            return max(1, expires - now)
    return 0


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What the reads of one queue need, read in one MULTI."""

    rate_max: int | None
    rate_ms: int | None
    max_active: int | None
    blocked_until: int | None
    paused: bool
    log: list[LoggedClaim]
    active: int
    waiting: int
    next_due: int | None

    def block_ms(self, now: int) -> int | None:
        """Milliseconds the manual block (RATE-6) has left, None when none holds."""
        if self.blocked_until is None or self.blocked_until <= now:
            return None
        return self.blocked_until - now

    @property
    def maxed(self) -> bool:
        return self.max_active is not None and self.active >= self.max_active


class RedisLimits(RedisEntity):
    """The ``limits`` handle on Redis."""

    async def _limits(self, queues: Sequence[str]) -> list[QueueLimits]:
        keys = [self._backend.keys(queue) for queue in queues]
        if not keys:
            return []
        async with self._backend.snapshot() as pipe:
            for key in keys:
                pipe.hmget(
                    key.meta,
                    [*RATE_FIELDS, "max_active", "rate_blocked_until", "paused", "paused_all"],
                )
                pipe.zrange(key.key("claims"), 0, -1, withscores=True)
                pipe.zcard(key.active)
                pipe.zcard(key.waiting)
                pipe.zrange(key.delayed, 0, 0, withscores=True)
            answers = await pipe.execute()
        read: list[QueueLimits] = []
        for n in range(len(keys)):
            meta, log, active, waiting, first_due = answers[5 * n : 5 * n + 5]
            rate_max, rate_ms, max_active, blocked, paused, paused_all = meta
            read.append(
                QueueLimits(
                    rate_max=_int(rate_max),
                    rate_ms=_int(rate_ms),
                    max_active=_int(max_active),
                    blocked_until=_int(blocked),
                    paused=b"1" in (paused, paused_all),
                    log=claim_log(log),
                    active=int(active),
                    waiting=int(waiting),
                    next_due=int(first_due[0][1]) if first_due else None,
                )
            )
        return read

    async def _settings(self, queue: str, arguments: dict[str, Any]) -> None:
        validate_queue_name(queue)
        if arguments.get("create"):
            await self._backend.register(queue)
        await self._backend.call("set_queue_settings", queue, arguments)

    async def set_claim_rate_limit(self, args: SetClaimRateLimit) -> None:
        validate_queue_name(args.queue)
        limit = checked_limit(args.limit, "limit")
        if limit is None:
            raise InvalidOptions("limit must be a JobRateLimit, got None")
        fields = {"rate_max": str(limit.max), "rate_duration_ms": str(limit.duration_ms)}
        await self._settings(args.queue, {"set": fields, "create": True, "wake": "always"})

    async def get_claim_rate_limit(self, args: GetClaimRateLimit) -> JobRateLimit | None:
        validate_queue_name(args.queue)
        meta = self._backend.keys(args.queue).meta
        rate_max, rate_ms = await self._backend.client.hmget(meta, list(RATE_FIELDS))
        if rate_max is None or rate_ms is None:
            return None
        return JobRateLimit(int(rate_max), timedelta(milliseconds=int(rate_ms)))

    async def clear_claim_rate_limit(self, args: ClearClaimRateLimit) -> None:
        await self._settings(args.queue, {"clear": list(RATE_FIELDS), "wake": "changed"})

    async def get_claim_rate_limit_ttl(self, args: GetClaimRateLimitTtl) -> int:
        validate_queue_name(args.queue)
        if args.max is not None:
            positive_count(args.max, "max")
        now = await self._backend.now_ms(args.now)
        [limits] = await self._limits([args.queue])
        block_ms = limits.block_ms(now)
        max_jobs = args.max if args.max is not None else limits.rate_max
        if max_jobs is not None:
            return max(block_ms or 0, rate_wait_ms(limits.log, max_jobs, limits.rate_ms, now))
        last = max((entry.expires() for entry in limits.log), default=None)
        if last is not None and last > now:
            block_ms = max(block_ms or 0, last - now)
        return -2 if block_ms is None else block_ms

    async def rate_limit_claims_for(self, args: RateLimitClaimsFor) -> None:
        validate_queue_name(args.queue)
        millis = to_millis(args.duration, "duration")
        if not 1 <= millis <= _MAX_DURATION_MS:
            raise InvalidOptions(
                f"the duration must be 1 to {_MAX_DURATION_MS} ms, got {millis} ms"
            )
        await self._settings(
            args.queue, {"block_ms": millis, "create": True, "now": epoch_ms(args.now)}
        )

    async def clear_claim_rate_limit_key(self, args: ClearClaimRateLimitKey) -> None:
        await self._settings(
            args.queue,
            {"clear": ["rate_blocked_until"], "forget_claims": True, "wake": "always"},
        )

    async def set_max_active_jobs(self, args: SetMaxActiveJobs) -> None:
        validate_queue_name(args.queue)
        fields = {"max_active": str(positive_count(args.max_active, "max_active"))}
        await self._settings(args.queue, {"set": fields, "create": True, "wake": "always"})

    async def get_max_active_jobs(self, args: GetMaxActiveJobs) -> int | None:
        validate_queue_name(args.queue)
        meta = self._backend.keys(args.queue).meta
        return _int(await self._backend.client.hget(meta, "max_active"))

    async def clear_max_active_jobs(self, args: ClearMaxActiveJobs) -> None:
        await self._settings(args.queue, {"clear": ["max_active"], "wake": "changed"})

    async def is_maxed(self, args: IsMaxed) -> bool:
        validate_queue_name(args.queue)
        keys = self._backend.keys(args.queue)
        async with self._backend.client.pipeline(transaction=True) as pipe:
            pipe.hget(keys.meta, "max_active")
            pipe.zcard(keys.active)
            max_active, active = await pipe.execute()
        return max_active is not None and int(active) >= int(max_active)

    async def next_claim_in(self, args: NextClaimIn) -> timedelta | None:
        local = checked_limit(args.rate_limit, "rate_limit")
        backend = self._backend
        if args.queues is None:
            queues = await known_queues(backend)
        else:
            queues = list(dict.fromkeys(validate_queue_name(queue) for queue in args.queues))
        now = await backend.now_ms(None)
        waits: list[int] = []
        for limits in await self._limits(queues):
            if args.delayed and limits.next_due is not None:
                waits.append(max(0, limits.next_due - now))
            if limits.paused or limits.waiting == 0:
                continue
            wait = limits.block_ms(now) or 0
            rate_max, rate_ms = limits.rate_max, limits.rate_ms
            if local is not None:
                rate_max, rate_ms = local.max, local.duration_ms
            if rate_max is None and wait == 0:
                continue  # neither limited nor blocked: nothing to time
            if rate_max is not None:
                wait = max(wait, rate_wait_ms(limits.log, rate_max, rate_ms, now))
            if wait == 0 and limits.maxed:
                continue  # admitted but maxed: woken by the finish that frees a slot
            waits.append(wait)
        return timedelta(milliseconds=min(waits)) if waits else None
