"""Removing many jobs (``Cleaner``, MGMT-17..22) for PostgresBackend: one call of a
``lane.*`` function of sql/functions/42_cleanup.sql each (obliterate: two, see there)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import asyncpg

from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    Duration,
    JobRow,
    JobState,
    to_millis,
    validate_clean_state,
    validate_count,
    validate_flag,
    validate_queue_name,
)


class CleanupCalls:
    """The ``Cleaner`` methods and the finished-result read over ``_fetch`` / ``_fetchval``,
    which PostgresBackend defines."""

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    # ----------------------------------------------------------------- removing
    async def drain_jobs(
        self, queue: str, *, delayed: bool = False, now: datetime | None = None
    ) -> int:
        validate_queue_name(queue)
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.drain_jobs($1, $2, $3)", queue, validate_flag(delayed, "delayed"), now
            ),
        )

    async def clean_jobs(
        self,
        queue: str,
        state: JobState,
        grace: Duration,
        *,
        limit: int = 0,
        now: datetime | None = None,
    ) -> list[JobRow]:
        validate_queue_name(queue)
        rows = await self._fetch(
            f"SELECT {JOB_COLUMNS} FROM lane.clean_jobs($1, $2, $3, $4, $5) AS j",
            queue,
            validate_clean_state(state),
            to_millis(grace, "grace"),
            validate_count(limit, "limit"),
            now,
        )
        return [job_from_row(row) for row in rows]

    async def obliterate_queue(
        self, queue: str, *, force: bool = False, now: datetime | None = None
    ) -> int:
        validate_queue_name(queue)
        validate_flag(force, "force")
        # The pause commits on its own, so a refusal (active jobs, no force) leaves the
        # queue paused, as MGMT-21 asks; lane.obliterate_queue then deletes it, row too.
        await self._fetch("SELECT lane.pause_queue($1, $2)", queue, now)
        return cast(
            int,
            await self._fetchval("SELECT lane.obliterate_queue($1, $2, $3)", queue, force, now),
        )

    async def remove_orphaned(
        self, count: int = 0, limit: int = 0, *, now: datetime | None = None
    ) -> int:
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.remove_orphaned($1, $2, $3)",
                validate_count(count, "count"),
                validate_count(limit, "limit"),
                now,
            ),
        )
