"""Claim limits on PostgreSQL (``Limits``, RATE): one call of a ``lane.*`` function of
sql/functions/52_limits.sql each."""

from __future__ import annotations

from datetime import timedelta

from lane_pg.backend.limits import Limits, NextClaimIn, SetClaimRateLimit
from lane_pg.errors import InvalidOptions
from lane_pg.postgres.calls import Entity, Rows, nothing, statement, value
from lane_pg.types import JobRateLimit, to_millis, validate_queue_name


def rate_limit_arguments(limit: JobRateLimit | None) -> tuple[int | None, int | None]:
    """``claim_jobs``' ``p_rate_max`` and ``p_rate_duration_ms`` (NULL, NULL: no local limit)."""
    if limit is None:
        return None, None
    if not isinstance(limit, JobRateLimit):
        raise InvalidOptions(f"rate_limit must be a JobRateLimit or None, got {limit!r}")
    return limit.max, limit.duration_ms


def _positive_count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        raise InvalidOptions(f"{what} must be an integer between 1 and {2**31 - 1}, got {value!r}")
    return value


def _optional_max(max: int | None) -> int | None:
    return None if max is None else _positive_count(max, "max")


def _rate_limit(rows: Rows) -> JobRateLimit | None:
    if not rows:
        return None
    return JobRateLimit(rows[0]["max"], timedelta(milliseconds=rows[0]["duration_ms"]))


class PostgresLimits(Entity, serves=Limits):
    """The ``limits`` handle: a queue's claim rate limit and max active jobs."""

    async def set_claim_rate_limit(self, args: SetClaimRateLimit) -> None:
        validate_queue_name(args.queue)
        max_jobs, duration_ms = rate_limit_arguments(args.limit)
        await self._db.fetch(
            "SELECT lane.set_claim_rate_limit($1, $2, $3)", args.queue, max_jobs, duration_ms
        )

    get_claim_rate_limit = statement(
        "SELECT max, duration_ms FROM lane.get_claim_rate_limit($1)",
        result=_rate_limit,
        queue=validate_queue_name,
    )
    clear_claim_rate_limit = statement(
        "SELECT lane.clear_claim_rate_limit($1)", result=nothing, queue=validate_queue_name
    )
    get_claim_rate_limit_ttl = statement(
        "SELECT lane.get_claim_rate_limit_ttl($1, $2, $3)",
        result=value,
        queue=validate_queue_name,
        max=_optional_max,
    )
    rate_limit_claims_for = statement(
        "SELECT lane.rate_limit_claims_for($1, $2, $3)",
        result=nothing,
        queue=validate_queue_name,
        duration=lambda duration: to_millis(duration, "duration"),
    )
    clear_claim_rate_limit_key = statement(
        "SELECT lane.clear_claim_rate_limit_key($1)", result=nothing, queue=validate_queue_name
    )
    set_max_active_jobs = statement(
        "SELECT lane.set_max_active_jobs($1, $2)",
        result=nothing,
        queue=validate_queue_name,
        max_active=lambda count: _positive_count(count, "max_active"),
    )
    get_max_active_jobs = statement(
        "SELECT lane.get_max_active_jobs($1)", result=value, queue=validate_queue_name
    )
    clear_max_active_jobs = statement(
        "SELECT lane.clear_max_active_jobs($1)", result=nothing, queue=validate_queue_name
    )
    is_maxed = statement("SELECT lane.is_maxed($1)", result=value, queue=validate_queue_name)

    async def next_claim_in(self, args: NextClaimIn) -> timedelta | None:
        max_jobs, duration_ms = rate_limit_arguments(args.rate_limit)
        millis = await self._db.fetchval(
            "SELECT lane.next_claim_in_ms($1::text[], $2, $3, $4)",
            None if args.queues is None else list(args.queues),
            max_jobs,
            duration_ms,
            args.delayed,
        )
        return None if millis is None else timedelta(milliseconds=millis)
