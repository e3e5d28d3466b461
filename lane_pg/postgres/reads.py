"""Counting and listing a queue's jobs on PostgreSQL (MGMT-2, MGMT-23..27, INSP): one call
of a ``lane.*`` function of sql/functions/65_reads.sql each (``next_due_in``:
60_maintenance.sql), two in one snapshot for ``list_jobs``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import cast

from lane_pg.backend.reads import (
    ListJobs,
    ListReadyJobs,
    ListScheduledJobs,
    Reads,
    SearchJobs,
    search_path,
)
from lane_pg.postgres.arguments import optional_list, server_errors
from lane_pg.postgres.calls import Entity, Rows, statement, value
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    ALL_STATES,
    JobPage,
    JobRow,
    JobSearchPage,
    JobState,
    QueueStats,
    dumps_json,
    validate_priority,
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


def state_counts(rows: Rows) -> dict[JobState, int]:
    return {cast(JobState, row["state"]): row["count"] for row in rows}


def priority_counts(rows: Rows) -> dict[int, int]:
    return {row["priority"]: row["count"] for row in rows}


def priorities(wanted: Sequence[int]) -> list[int]:
    return [validate_priority(priority) for priority in wanted]


def queue_stats(rows: Rows) -> QueueStats:
    return QueueStats(**dict(rows[0]))


def millis_delta(rows: Rows) -> timedelta | None:
    millis = rows[0][0]
    return None if millis is None else timedelta(milliseconds=millis)


class PostgresReads(Entity, serves=Reads):
    get_job_counts = statement(
        "SELECT state, count FROM lane.get_job_counts($1, $2::text[])",
        result=state_counts,
        states=optional_list,
    )
    get_job_count = statement(
        "SELECT lane.count_jobs($1, $2::text[])", result=value, states=optional_list
    )
    count_pending_jobs = statement("SELECT lane.count_pending_jobs($1)", result=value)
    count_ready_jobs = statement("SELECT lane.count_ready_jobs($1, $2)", result=value)
    count_scheduled_jobs = statement("SELECT lane.count_scheduled_jobs($1, $2)", result=value)

    async def list_ready_jobs(self, args: ListReadyJobs) -> JobPage:
        return await self._readiness_page(args.queue, True, args.offset, args.limit, args.now)

    async def list_scheduled_jobs(self, args: ListScheduledJobs) -> JobPage:
        return await self._readiness_page(args.queue, False, args.offset, args.limit, args.now)

    async def _readiness_page(
        self, queue: str, ready: bool, offset: int, limit: int, now: datetime | None
    ) -> JobPage:
        rows = await self._db.fetch(_READINESS_PAGE_SQL, queue, ready, offset, limit, now)
        items: list[JobRow] = [job_from_row(row) for row in rows if row["id"] is not None]
        return JobPage(items, rows[0]["readiness_total"], offset, limit)

    get_counts_per_priority = statement(
        "SELECT priority, count FROM lane.get_counts_per_priority($1, $2::int[])",
        result=priority_counts,
        priorities=priorities,
    )
    get_queue_stats = statement(
        "SELECT paused, waiting, delayed, active, waiting_children, completed, failed"
        " FROM lane.get_queue_stats($1)",
        result=queue_stats,
    )

    async def list_jobs(self, args: ListJobs) -> JobPage:
        wanted = list(args.states) or list(ALL_STATES)
        db = self._db
        async with (
            server_errors(),
            db.pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            # One snapshot, so the page and its total agree.
            rows = await conn.fetch(
                db.sql(
                    f"SELECT {JOB_COLUMNS} FROM lane.list_jobs($1, $2::text[], $3, $4, $5) AS j"
                ),
                args.queue,
                wanted,
                args.descending,
                args.offset,
                args.limit,
            )
            total = await conn.fetchval(
                db.sql("SELECT lane.count_jobs($1, $2::text[])"), args.queue, wanted
            )
        return JobPage([job_from_row(row) for row in rows], total, args.offset, args.limit)

    async def search_jobs(self, args: SearchJobs) -> JobSearchPage:
        path = search_path(args.data_path)
        # JSON text cast to jsonb, as every JSON argument; SQL NULL when there is nothing to
        # compare (the function refuses a value without a path).
        value = (
            None
            if path is None and args.data_value is None
            else dumps_json(args.data_value, "data_value")
        )
        rows = await self._db.fetch(
            f"SELECT {JOB_COLUMNS} FROM"
            " lane.search_jobs($1, $2, $3, $4::text[], $5::jsonb, $6, $7) AS j",
            args.queue,
            args.state,
            args.name,
            path,
            value,
            args.offset,
            args.limit,
        )
        # The function returns one row more than the page: it says a match follows.
        items: list[JobRow] = [job_from_row(row) for row in rows[: args.limit]]
        return JobSearchPage(items, args.offset, args.limit, len(rows) > args.limit)

    next_due_in = statement(
        "SELECT lane.next_due_in_ms($1::text[])", result=millis_delta, queues=optional_list
    )
