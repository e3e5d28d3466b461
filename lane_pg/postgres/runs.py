"""Claims, leases and outcomes on PostgreSQL (CLAIM, FIN, RETRY): the worker's hot path.

``lane.claim_jobs``, ``renew_leases``, ``complete_job(s)`` and ``fail_job(s)`` of
sql/functions/30_runs_finish.sql, and the calls that hand a claimed job back unfinished
(``release_job``, ``delay_job``, ``give_back_job``; MGMT-6, MGMT-7, A2, A14), one statement
each. The ``failed_records`` capability is ``fail_jobs`` with its last parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lane_pg.backend.runs import Runs
from lane_pg.errors import ConfigurationError
from lane_pg.postgres.arguments import outcome, token_text
from lane_pg.postgres.calls import Entity
from lane_pg.postgres.limits import rate_limit_arguments
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    JSON,
    ClaimedJob,
    Completion,
    Duration,
    Failure,
    FinalizeOutcome,
    JobRateLimit,
    JobRow,
    LeaseRef,
    QueueDemand,
    dumps_json,
    new_claimed_job,
    to_millis,
)


class PostgresRuns(Entity, serves=Runs):
    """The ``runs`` handle, and the ``failed_records`` capability (``fail_jobs_recording``)."""

    # ----------------------------------------------------------------- claiming
    async def claim_jobs(
        self,
        worker_id: str,
        demands: Sequence[QueueDemand],
        lease: Duration,
        *,
        total: int | None = None,
        now: datetime | None = None,
        rate_limit: JobRateLimit | None = None,
        ignore_pause: bool = False,
    ) -> list[ClaimedJob]:
        pause_as = [demand.pause_as for demand in demands]
        arguments: list[Any] = [
            worker_id,
            [demand.queue for demand in demands],
            [demand.limit for demand in demands],
            to_millis(lease, "lease"),
            total,
            now,
        ]
        # The plain claim keeps its six-argument statement (and its warm prepared plan); the
        # optional arguments are sent only when one of them is used.
        optional = ""
        if rate_limit is not None or ignore_pause or any(name is not None for name in pause_as):
            arguments += [*rate_limit_arguments(rate_limit), ignore_pause]
            optional = ", $7, $8, $9"
            if any(name is not None for name in pause_as):
                arguments.append(pause_as)
                optional += ", $10::text[]"
        rows = await self._db.fetch(
            f"SELECT {JOB_COLUMNS} FROM lane.claim_jobs($1, $2::text[], $3::int[], $4, $5,"
            f" $6{optional}) AS j",
            *arguments,
        )
        # Every claimed row is active under its fresh token (ClaimedJob's lock_token: str).
        return [job_from_row(row, new_claimed_job) for row in rows]

    async def renew_leases(
        self, leases: Sequence[LeaseRef], lease: Duration, *, now: datetime | None = None
    ) -> list[LeaseRef]:
        if not leases:
            return []
        rows = await self._db.fetch(
            "SELECT ord FROM lane.renew_leases($1::text[], $2::text[], $3::uuid[], $4, $5)",
            [ref.queue for ref in leases],
            [ref.id for ref in leases],
            [ref.token for ref in leases],
            to_millis(lease, "lease"),
            now,
        )
        return [leases[row["ord"] - 1] for row in rows]

    # ----------------------------------------------------------------- finishing
    async def complete_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        result: JSON = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._db.job(
            "lane.complete_job($1, $2, $3::uuid, $4::jsonb, $5)",
            queue,
            job_id,
            token_text(token),
            dumps_json(result, "job result"),
            now,
        )

    async def complete_jobs(
        self, items: Sequence[Completion], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        if not items:
            return []
        results = [dumps_json(item.result, "job result") for item in items]
        rows = await self._db.fetch(
            "SELECT queue, id, status, state FROM lane.complete_jobs($1::text[], $2::text[],"
            " $3::uuid[], $4::text[]::jsonb[], $5)",
            [item.queue for item in items],
            [item.id for item in items],
            [token_text(item.token) for item in items],
            results,
            now,
        )
        return [outcome(row) for row in rows]

    async def fail_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        reason: str,
        *,
        stacktrace: str | None = None,
        discard_retry: bool = False,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._db.job(
            "lane.fail_job($1, $2, $3::uuid, $4, $5, $6, $7)",
            queue,
            job_id,
            token_text(token),
            reason,
            stacktrace,
            discard_retry,
            now,
        )

    async def fail_jobs(
        self, items: Sequence[Failure], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        return await self._fail_jobs(items, now, None)

    async def fail_jobs_recording(
        self, items: Sequence[Failure], connection: str, *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        """``fail_jobs``, recording each item that fails for good in ``failed_jobs`` in the
        same transaction (FAIL-2, A4), under its stored connection label, else
        ``connection`` (the ``failed_records`` handle)."""
        if not connection:
            raise ConfigurationError("a failed-job record needs a connection name")
        return await self._fail_jobs(items, now, connection)

    async def _fail_jobs(
        self, items: Sequence[Failure], now: datetime | None, connection: str | None
    ) -> list[FinalizeOutcome]:
        if not items:
            return []
        # Without a store the plain eight-argument statement (its own prepared plan).
        recording = "" if connection is None else ", $9"
        rows = await self._db.fetch(
            "SELECT queue, id, status, state FROM lane.fail_jobs($1::text[], $2::text[],"
            f" $3::uuid[], $4::text[], $5::text[], $6::bool[], $7, $8::int[]{recording})",
            [item.queue for item in items],
            [item.id for item in items],
            [token_text(item.token) for item in items],
            [item.reason for item in items],
            [item.stacktrace for item in items],
            [item.discard_retry for item in items],
            now,
            [item.stacktrace_limit for item in items],
            *(() if connection is None else (connection,)),
        )
        return [outcome(row) for row in rows]

    # ----------------------------------------------------------------- handing back
    async def release_job(
        self, queue: str, job_id: str, token: str, *, now: datetime | None = None
    ) -> JobRow:
        return await self._db.job(
            "lane.release_job($1, $2, $3::uuid, $4)", queue, job_id, token_text(token), now
        )

    async def delay_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._db.job(
            "lane.delay_job($1, $2, $3::uuid, $4, $5)",
            queue,
            job_id,
            token_text(token),
            to_millis(delay, "delay"),
            now,
        )

    async def give_back_job(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration = 0,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._db.job(
            "lane.give_back_job($1, $2, $3::uuid, $4, $5)",
            queue,
            job_id,
            token_text(token),
            to_millis(delay, "delay"),
            now,
        )
