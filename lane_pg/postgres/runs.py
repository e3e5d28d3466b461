"""Claims, leases and outcomes on PostgreSQL (CLAIM, FIN, RETRY): the worker's hot path.

``lane.claim_jobs``, ``renew_leases``, ``complete_job(s)`` and ``fail_job(s)`` of
sql/functions/30_runs_finish.sql, and the calls that hand a claimed job back unfinished
(``release_job``, ``delay_job``, ``give_back_job``, ``discard_job``; MGMT-6, MGMT-7, A2,
A14, MW-2), one statement
each. The ``failed_records`` capability is ``fail_jobs`` with its last parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lane_pg.backend.capabilities import FailJobsRecording
from lane_pg.backend.runs import (
    ClaimJobs,
    CompleteJob,
    CompleteJobs,
    DelayJob,
    FailJob,
    FailJobs,
    GiveBackJob,
    ReleaseJob,
    RenewLeases,
    Runs,
)
from lane_pg.errors import ConfigurationError
from lane_pg.postgres.arguments import outcome, token_text
from lane_pg.postgres.calls import Entity, nothing, statement
from lane_pg.postgres.limits import rate_limit_arguments
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import (
    ClaimedJob,
    Failure,
    FinalizeOutcome,
    JobRow,
    LeaseRef,
    dumps_json,
    new_claimed_job,
    to_millis,
)


class PostgresRuns(Entity, serves=Runs):
    """The ``runs`` handle, and the ``failed_records`` capability (``fail_jobs_recording``)."""

    # ----------------------------------------------------------------- claiming
    async def claim_jobs(self, args: ClaimJobs) -> list[ClaimedJob]:
        pause_as = [demand.pause_as for demand in args.demands]
        arguments: list[Any] = [
            args.worker_id,
            [demand.queue for demand in args.demands],
            [demand.limit for demand in args.demands],
            to_millis(args.lease, "lease"),
            args.total,
            args.now,
        ]
        # The plain claim keeps its six-argument statement (and its warm prepared plan); the
        # optional arguments are sent only when one of them is used.
        optional = ""
        if (
            args.rate_limit is not None
            or args.ignore_pause
            or any(name is not None for name in pause_as)
        ):
            arguments += [*rate_limit_arguments(args.rate_limit), args.ignore_pause]
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

    async def renew_leases(self, args: RenewLeases) -> list[LeaseRef]:
        if not args.leases:
            return []
        rows = await self._db.fetch(
            "SELECT ord FROM lane.renew_leases($1::text[], $2::text[], $3::uuid[], $4, $5)",
            [ref.queue for ref in args.leases],
            [ref.id for ref in args.leases],
            [ref.token for ref in args.leases],
            to_millis(args.lease, "lease"),
            args.now,
        )
        return [args.leases[row["ord"] - 1] for row in rows]

    # ----------------------------------------------------------------- finishing
    async def complete_job(self, args: CompleteJob) -> JobRow:
        return await self._db.job(
            "lane.complete_job($1, $2, $3::uuid, $4::jsonb, $5)",
            args.queue,
            args.job_id,
            token_text(args.token),
            dumps_json(args.result, "job result"),
            args.now,
        )

    async def complete_jobs(self, args: CompleteJobs) -> list[FinalizeOutcome]:
        if not args.items:
            return []
        results = [dumps_json(item.result, "job result") for item in args.items]
        rows = await self._db.fetch(
            "SELECT queue, id, status, state FROM lane.complete_jobs($1::text[], $2::text[],"
            " $3::uuid[], $4::text[]::jsonb[], $5)",
            [item.queue for item in args.items],
            [item.id for item in args.items],
            [token_text(item.token) for item in args.items],
            results,
            args.now,
        )
        return [outcome(row) for row in rows]

    async def fail_job(self, args: FailJob) -> JobRow:
        return await self._db.job(
            "lane.fail_job($1, $2, $3::uuid, $4, $5, $6, $7)",
            args.queue,
            args.job_id,
            token_text(args.token),
            args.reason,
            args.stacktrace,
            args.discard_retry,
            args.now,
        )

    async def fail_jobs(self, args: FailJobs) -> list[FinalizeOutcome]:
        return await self._fail_jobs(args.items, args.now, None)

    async def fail_jobs_recording(self, args: FailJobsRecording) -> list[FinalizeOutcome]:
        """``fail_jobs``, recording each item that fails for good in ``failed_jobs`` in the
        same transaction (FAIL-2, A4), under its stored connection label, else
        ``connection`` (the ``failed_records`` handle)."""
        if not args.connection:
            raise ConfigurationError("a failed-job record needs a connection name")
        return await self._fail_jobs(args.items, args.now, args.connection)

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
    async def release_job(self, args: ReleaseJob) -> JobRow:
        return await self._db.job(
            "lane.release_job($1, $2, $3::uuid, $4)",
            args.queue,
            args.job_id,
            token_text(args.token),
            args.now,
        )

    async def delay_job(self, args: DelayJob) -> JobRow:
        return await self._db.job(
            "lane.delay_job($1, $2, $3::uuid, $4, $5)",
            args.queue,
            args.job_id,
            token_text(args.token),
            to_millis(args.delay, "delay"),
            args.now,
        )

    async def give_back_job(self, args: GiveBackJob) -> JobRow:
        return await self._db.job(
            "lane.give_back_job($1, $2, $3::uuid, $4, $5)",
            args.queue,
            args.job_id,
            token_text(args.token),
            to_millis(args.delay, "delay"),
            args.now,
        )

    discard_job = statement(
        "SELECT lane.discard_job($1, $2, $3::uuid, $4)", result=nothing, token=token_text
    )
