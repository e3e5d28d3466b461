"""Claim limits for PostgresBackend (``ClaimLimits``, RATE): one call of a ``lane.*``
function of sql/functions/52_limits.sql each."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import asyncpg

from lane_pg.errors import InvalidOptions
from lane_pg.types import Duration, JobRateLimit, to_millis, validate_queue_name


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


class ClaimLimitCalls:
    """The ``ClaimLimits`` methods over ``_fetch`` / ``_fetchval``, which PostgresBackend
    defines."""

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    async def set_claim_rate_limit(self, queue: str, limit: JobRateLimit) -> None:
        validate_queue_name(queue)
        max_jobs, duration_ms = rate_limit_arguments(limit)
        await self._fetch(
            "SELECT lane.set_claim_rate_limit($1, $2, $3)", queue, max_jobs, duration_ms
        )

    async def get_claim_rate_limit(self, queue: str) -> JobRateLimit | None:
        validate_queue_name(queue)
        rows = await self._fetch(
            "SELECT max, duration_ms FROM lane.get_claim_rate_limit($1)", queue
        )
        if not rows:
            return None
        return JobRateLimit(rows[0]["max"], timedelta(milliseconds=rows[0]["duration_ms"]))

    async def clear_claim_rate_limit(self, queue: str) -> None:
        validate_queue_name(queue)
        await self._fetch("SELECT lane.clear_claim_rate_limit($1)", queue)

    async def get_claim_rate_limit_ttl(
        self, queue: str, max: int | None = None, *, now: datetime | None = None
    ) -> int:
        validate_queue_name(queue)
        if max is not None:
            _positive_count(max, "max")
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.get_claim_rate_limit_ttl($1, $2, $3)", queue, max, now
            ),
        )

    async def rate_limit_claims_for(
        self, queue: str, duration: Duration, *, now: datetime | None = None
    ) -> None:
        validate_queue_name(queue)
        await self._fetch(
            "SELECT lane.rate_limit_claims_for($1, $2, $3)",
            queue,
            to_millis(duration, "duration"),
            now,
        )

    async def clear_claim_rate_limit_key(self, queue: str) -> None:
        validate_queue_name(queue)
        await self._fetch("SELECT lane.clear_claim_rate_limit_key($1)", queue)

    async def set_max_active_jobs(self, queue: str, max_active: int) -> None:
        validate_queue_name(queue)
        _positive_count(max_active, "max_active")
        await self._fetch("SELECT lane.set_max_active_jobs($1, $2)", queue, max_active)

    async def get_max_active_jobs(self, queue: str) -> int | None:
        validate_queue_name(queue)
        return cast(int | None, await self._fetchval("SELECT lane.get_max_active_jobs($1)", queue))

    async def clear_max_active_jobs(self, queue: str) -> None:
        validate_queue_name(queue)
        await self._fetch("SELECT lane.clear_max_active_jobs($1)", queue)

    async def is_maxed(self, queue: str) -> bool:
        validate_queue_name(queue)
        return cast(bool, await self._fetchval("SELECT lane.is_maxed($1)", queue))

    async def next_claim_in(
        self,
        queues: Sequence[str] | None = None,
        rate_limit: JobRateLimit | None = None,
        *,
        delayed: bool = True,
    ) -> timedelta | None:
        max_jobs, duration_ms = rate_limit_arguments(rate_limit)
        millis = await self._fetchval(
            "SELECT lane.next_claim_in_ms($1::text[], $2, $3, $4)",
            None if queues is None else list(queues),
            max_jobs,
            duration_ms,
            delayed,
        )
        return None if millis is None else timedelta(milliseconds=millis)
