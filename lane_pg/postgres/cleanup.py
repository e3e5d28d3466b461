"""Removing many jobs (``PostgresCleanup``, MGMT-17..22) and the count reads of MGMT-24..27
and STATE-4 for PostgresBackend: one call of a ``lane.*`` function of
sql/functions/42_cleanup.sql or 65_reads.sql each (obliterate: two, see there)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import asyncpg

from lane_pg.backend.cleanup import Cleanup, clear_queue_names
from lane_pg.postgres.calls import Entity, job_list, statement, value
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    Completed,
    Failed,
    FinishedResult,
    JobPage,
    JobRow,
    JobState,
    NotFinished,
    QueueStats,
    to_millis,
    validate_clean_state,
    validate_count,
    validate_flag,
    validate_priority,
    validate_queue_name,
)

# One statement, so a page and its total come from one snapshot and one instant (the
# database's clock when ``now`` is None); the LEFT JOIN gives the total an empty page.
_READINESS_PAGE_SQL = f"""
    WITH m AS (SELECT coalesce($5::timestamptz, clock_timestamp()) AS at),
         t AS (SELECT m.at, CASE WHEN $2 THEN lane.count_ready_jobs($1, m.at)
                                 ELSE lane.count_scheduled_jobs($1, m.at) END AS total
                 FROM m)
    SELECT {JOB_COLUMNS}, t.total AS readiness_total
      FROM t LEFT JOIN LATERAL lane.list_jobs_by_readiness($1, $2, $3, $4, t.at) AS j ON true"""


class CleanupCalls:
    """The count reads over ``_fetch`` / ``_fetchval``, which PostgresBackend defines."""

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        raise NotImplementedError

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        raise NotImplementedError

    # ----------------------------------------------------------------- counting
    async def get_job_count(self, queue: str, states: Sequence[JobState] | None = None) -> int:
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.count_jobs($1, $2::text[])",
                queue,
                None if states is None else list(states),
            ),
        )

    async def count_pending_jobs(self, queue: str) -> int:
        return cast(int, await self._fetchval("SELECT lane.count_pending_jobs($1)", queue))

    async def count_ready_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        return cast(int, await self._fetchval("SELECT lane.count_ready_jobs($1, $2)", queue, now))

    async def count_scheduled_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        return cast(
            int, await self._fetchval("SELECT lane.count_scheduled_jobs($1, $2)", queue, now)
        )

    async def list_ready_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return await self._readiness_page(queue, True, offset, limit, now)

    async def list_scheduled_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return await self._readiness_page(queue, False, offset, limit, now)

    async def _readiness_page(
        self, queue: str, ready: bool, offset: int, limit: int, now: datetime | None
    ) -> JobPage:
        rows = await self._fetch(_READINESS_PAGE_SQL, queue, ready, offset, limit, now)
        items: list[JobRow] = [job_from_row(row) for row in rows if row["id"] is not None]
        return JobPage(items, rows[0]["readiness_total"], offset, limit)

    async def get_counts_per_priority(
        self, queue: str, priorities: Sequence[int]
    ) -> dict[int, int]:
        wanted = [validate_priority(priority) for priority in priorities]
        rows = await self._fetch(
            "SELECT priority, count FROM lane.get_counts_per_priority($1, $2::int[])",
            queue,
            wanted,
        )
        return {row["priority"]: row["count"] for row in rows}

    async def get_queue_stats(self, queue: str) -> QueueStats:
        rows = await self._fetch(
            "SELECT paused, waiting, delayed, active, waiting_children, completed, failed"
            " FROM lane.get_queue_stats($1)",
            queue,
        )
        return QueueStats(**dict(rows[0]))

    async def get_job_finished_result(self, queue: str, job_id: str) -> FinishedResult | None:
        rows = await self._fetch(
            "SELECT state, return_value::text AS return_value, failed_reason"
            " FROM lane.get_job_finished_result($1, $2)",
            queue,
            job_id,
        )
        if not rows:
            return None
        row = rows[0]
        if row["state"] == "completed":
            return Completed(json.loads(row["return_value"]))
        if row["state"] == "failed":
            return Failed(row["failed_reason"])
        return NotFinished(row["state"])


class PostgresCleanup(Entity, serves=Cleanup):
    drain_jobs = statement(
        "SELECT lane.drain_jobs($1, $2, $3)",
        result=value,
        queue=validate_queue_name,
        delayed=lambda delayed: validate_flag(delayed, "delayed"),
    )
    clean_jobs = statement(
        f"SELECT {JOB_COLUMNS} FROM lane.clean_jobs($1, $2, $3, $4, $5) AS j",
        result=job_list,
        queue=validate_queue_name,
        state=validate_clean_state,
        grace=lambda grace: to_millis(grace, "grace"),
        limit=lambda limit: validate_count(limit, "limit"),
    )

    clear_queues = statement(
        "SELECT lane.clear_queues($1, $2)", result=value, queues=clear_queue_names
    )

    async def obliterate_queue(
        self, queue: str, *, force: bool = False, now: datetime | None = None
    ) -> int:
        validate_queue_name(queue)
        validate_flag(force, "force")
        # The pause commits on its own, so a refusal (active jobs, no force) leaves the
        # queue paused, as MGMT-21 asks; lane.obliterate_queue then deletes it, row too.
        await self._db.fetch("SELECT lane.pause_queue($1, $2)", queue, now)
        return cast(
            int,
            await self._db.fetchval("SELECT lane.obliterate_queue($1, $2, $3)", queue, force, now),
        )

    remove_orphaned = statement(
        "SELECT lane.remove_orphaned($1, $2, $3)",
        result=value,
        count=lambda count: validate_count(count, "count"),
        limit=lambda limit: validate_count(limit, "limit"),
    )
