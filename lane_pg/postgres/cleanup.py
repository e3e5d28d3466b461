"""Removing many jobs (``PostgresCleanup``, MGMT-17..22): one call of a ``lane.*`` function
of sql/functions/42_cleanup.sql each (obliterate: two, see there)."""

from __future__ import annotations

from typing import cast

from lane_pg.backend.cleanup import Cleanup, ObliterateQueue, clear_queue_names
from lane_pg.postgres.calls import Entity, job_list, statement, value
from lane_pg.postgres.rows import JOB_COLUMNS
from lane_pg.types import (
    to_millis,
    validate_clean_state,
    validate_count,
    validate_flag,
    validate_queue_name,
)


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

    async def obliterate_queue(self, args: ObliterateQueue) -> int:
        validate_queue_name(args.queue)
        validate_flag(args.force, "force")
        # The pause commits on its own, so a refusal (active jobs, no force) leaves the
        # queue paused, as MGMT-21 asks; lane.obliterate_queue then deletes it, row too.
        await self._db.fetch("SELECT lane.pause_queue($1, $2)", args.queue, args.now)
        return cast(
            int,
            await self._db.fetchval(
                "SELECT lane.obliterate_queue($1, $2, $3)", args.queue, args.force, args.now
            ),
        )

    remove_orphaned = statement(
        "SELECT lane.remove_orphaned($1, $2, $3)",
        result=value,
        count=lambda count: validate_count(count, "count"),
        limit=lambda limit: validate_count(limit, "limit"),
    )
