"""PostgresBackend's calls on deduplication owners and repeat series (the ``Deduplicator``
and ``Repeater`` roles) and the expiry of idempotency keys: one stored function each
(sql/functions/15_dedup.sql, 16_repeat.sql, 85_idempotency.sql)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

import asyncpg

from lane_pg.backend.dedup import DebouncedAdd
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    JSON,
    Duration,
    JobOptions,
    JobRow,
    RepeatInfo,
    dumps_json,
    options_json,
    to_millis,
    validate_job_name,
    validate_queue_name,
)

REPEAT_COLUMNS = (
    "r.key, r.job_id, r.name, r.next_at, r.count, r.every_ms, r.pattern, r.tz,"
    " r.limit_count, r.end_at, r.options::text AS options"
)


def repeat_from_row(row: Mapping[str, Any]) -> RepeatInfo:
    return RepeatInfo(
        key=row["key"],
        job_id=row["job_id"],
        name=row["name"],
        next_at=row["next_at"],
        count=row["count"],
        every_ms=row["every_ms"],
        pattern=row["pattern"],
        tz=row["tz"],
        limit=row["limit_count"],
        end_at=row["end_at"],
        options=json.loads(row["options"]),
    )


class OwnerCalls:
    """The calls, over the statement helpers PostgresBackend defines."""

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    async def _job(self, function_call: str, *args: Any) -> JobRow:
        raise NotImplementedError

    # ----------------------------------------------------------------- deduplication
    async def get_deduplication_job_id(
        self, queue: str, dedup_id: str, *, now: datetime | None = None
    ) -> str | None:
        return cast(
            str | None,
            await self._fetchval(
                "SELECT lane.get_deduplication_job_id($1, $2, $3)", queue, dedup_id, now
            ),
        )

    async def remove_deduplication_key(self, queue: str, dedup_id: str) -> bool:
        return cast(
            bool,
            await self._fetchval("SELECT lane.remove_deduplication_key($1, $2)", queue, dedup_id),
        )

    async def reserve_deduplication_key(
        self,
        queue: str,
        dedup_id: str,
        token: str,
        ttl: Duration,
        *,
        now: datetime | None = None,
    ) -> bool:
        ttl_ms = to_millis(ttl, "reservation ttl")
        return cast(
            bool,
            await self._fetchval(
                "SELECT lane.reserve_deduplication_key($1, $2, $3, $4, $5)",
                queue,
                dedup_id,
                token,
                ttl_ms,
                now,
            ),
        )

    async def release_deduplication_key(
        self, queue: str, dedup_id: str, token: str, *, reservation_only: bool = False
    ) -> bool:
        return cast(
            bool,
            await self._fetchval(
                "SELECT lane.release_deduplication_key($1, $2, $3, $4)",
                queue,
                dedup_id,
                token,
                reservation_only,
            ),
        )

    async def add_debounced_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        max_wait: Duration | None = None,
        now: datetime | None = None,
    ) -> DebouncedAdd:
        validate_queue_name(queue)
        validate_job_name(name)
        max_wait_ms = None if max_wait is None else to_millis(max_wait, "max_wait")
        rows = await self._fetch(
            f"SELECT {JOB_COLUMNS}, r.replaced_id FROM lane.add_debounced_job($1, $2,"
            " $3::jsonb, $4::jsonb, $5, $6) AS r, LATERAL (SELECT (r.job).*) AS j",
            queue,
            name,
            dumps_json(data, "job data"),
            options_json(options),
            max_wait_ms,
            now,
        )
        return DebouncedAdd(job_from_row(rows[0]), rows[0]["replaced_id"])

    async def expire_dedup_owners(self, *, limit: int = 1000, now: datetime | None = None) -> int:
        return cast(
            int, await self._fetchval("SELECT lane.expire_dedup_owners($1, $2)", limit, now)
        )

    async def prune_idempotency_keys(
        self, *, limit: int = 1000, now: datetime | None = None
    ) -> int:
        """lane.prune_idempotency_keys: expired keys of lane_pg.idempotency (WORK-18)."""
        return cast(
            int, await self._fetchval("SELECT lane.prune_idempotency_keys($1, $2)", limit, now)
        )

    # ----------------------------------------------------------------- repeat series
    async def upsert_repeat(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._job(
            "lane.upsert_repeat($1, $2, $3::jsonb, $4::jsonb, $5)",
            queue,
            name,
            dumps_json(data, "job data"),
            options_json(options),
            now,
        )

    async def remove_repeat(
        self, queue: str, key: str, *, now: datetime | None = None
    ) -> str | None:
        return cast(
            str | None,
            await self._fetchval("SELECT lane.remove_repeat($1, $2, $3)", queue, key, now),
        )

    async def get_repeat(self, queue: str, key: str) -> RepeatInfo | None:
        rows = await self._fetch(
            f"SELECT {REPEAT_COLUMNS} FROM lane.list_repeats($1, 0, -1, true) AS r"
            " WHERE r.key = $2",
            queue,
            key,
        )
        return repeat_from_row(rows[0]) if rows else None

    async def list_repeats(
        self, queue: str, start: int = 0, end: int = -1, *, ascending: bool = False
    ) -> list[RepeatInfo]:
        rows = await self._fetch(
            f"SELECT {REPEAT_COLUMNS} FROM lane.list_repeats($1, $2, $3, $4) AS r",
            queue,
            start,
            end,
            ascending,
        )
        return [repeat_from_row(row) for row in rows]

    async def count_repeats(self, queue: str) -> int:
        return cast(int, await self._fetchval("SELECT lane.count_repeats($1)", queue))
