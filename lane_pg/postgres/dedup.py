"""Deduplication owners on PostgreSQL: one stored function of sql/functions/15_dedup.sql
per operation."""

from __future__ import annotations

from lane_pg.backend.dedup import AddDebouncedJob, DebouncedAdd, Dedup
from lane_pg.postgres.calls import Entity, statement, value
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    dumps_json,
    options_json,
    to_millis,
    validate_job_name,
    validate_queue_name,
)


class PostgresDedup(Entity, serves=Dedup):
    get_deduplication_job_id = statement(
        "SELECT lane.get_deduplication_job_id($1, $2, $3)", result=value
    )
    remove_deduplication_key = statement(
        "SELECT lane.remove_deduplication_key($1, $2)", result=value
    )
    expire_dedup_owners = statement("SELECT lane.expire_dedup_owners($1, $2)", result=value)
    reserve_deduplication_key = statement(
        "SELECT lane.reserve_deduplication_key($1, $2, $3, $4, $5)",
        result=value,
        ttl=lambda ttl: to_millis(ttl, "reservation ttl"),
    )
    release_deduplication_key = statement(
        "SELECT lane.release_deduplication_key($1, $2, $3, $4)", result=value
    )

    async def add_debounced_job(self, args: AddDebouncedJob) -> DebouncedAdd:
        validate_queue_name(args.queue)
        validate_job_name(args.name)
        # Not a statement: max_wait is converted before the data and the options.
        max_wait_ms = None if args.max_wait is None else to_millis(args.max_wait, "max_wait")
        rows = await self._db.fetch(
            f"SELECT {JOB_COLUMNS}, r.replaced_id FROM lane.add_debounced_job($1, $2,"
            " $3::jsonb, $4::jsonb, $5, $6) AS r, LATERAL (SELECT (r.job).*) AS j",
            args.queue,
            args.name,
            dumps_json(args.data, "job data"),
            options_json(args.options),
            max_wait_ms,
            args.now,
        )
        return DebouncedAdd(job_from_row(rows[0]), rows[0]["replaced_id"])
