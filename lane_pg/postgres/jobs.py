"""Adding, reading and changing single jobs on PostgreSQL: ``lane.add_job``, ``add_jobs``,
``get_job``, ``promote_job``, ... (sql/functions/10_jobs_add.sql, 40_jobs_manage.sql, 65_reads.sql),
and adding them in the caller's transaction (``lane_pg.postgres.enqueue``)."""

from __future__ import annotations

import json
from datetime import datetime

from lane_pg.backend.capabilities import AddJobIn, AddJobsIn, SameDatabase, Transactions
from lane_pg.backend.jobs import AddChain, AddJob, AddJobs, Jobs, SaveJobStacktrace
from lane_pg.postgres import enqueue
from lane_pg.postgres.arguments import SPLIT_DATAS, optional_token_text, spec_arrays
from lane_pg.postgres.calls import Entity, Rows, job_statement, statement, value
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row, plain_job, with_extras
from lane_pg.types import (
    Completed,
    Failed,
    FinishedResult,
    JobRow,
    NotFinished,
    dumps_json,
    options_json,
    to_millis,
    validate_job_name,
    validate_queue_name,
    validate_stacktrace,
)

# One module-level reference: json.loads looked up per call costs an attribute read.
_loads = json.loads


def job_with_extras(rows: Rows) -> JobRow | None:
    return with_extras(job_from_row(rows[0]), rows[0]) if rows else None


def finished_result(rows: Rows) -> FinishedResult | None:
    if not rows:
        return None
    row = rows[0]
    if row["state"] == "completed":
        return Completed(_loads(row["return_value"]))
    if row["state"] == "failed":
        return Failed(row["failed_reason"])
    return NotFinished(row["state"])


class PostgresJobs(Entity, serves=Jobs):
    # ----------------------------------------------------------------- adding
    async def add_job(self, args: AddJob) -> JobRow:
        validate_queue_name(args.queue)
        validate_job_name(args.name)
        # W1 (benchmarks/README.md), medians of 300 on this VM: 569 us per autocommit call
        # through asyncpg's pool against 398 us for a plain `SELECT lane.add_job(...)` on a
        # connection; on the held connection (_call) the gap is ~100 us (row decoding,
        # snapshot, checks and JSON), and the raw baseline's INSERT takes ~60 % of the SQL.
        data_text = dumps_json(args.data, "job data")
        options_text = options_json(args.options)
        if options_text == "{}":
            # Default options: only what the database chose comes back (see rows.plain_job).
            rows = await self._db.fetch(
                "SELECT j.id, j.enqueued_seq, j.order_key, j.created_at"
                " FROM lane.add_job($1, $2, $3::jsonb, '{}'::jsonb, $4) AS j",
                args.queue,
                args.name,
                data_text,
                args.now,
            )
            row = rows[0]
            return plain_job(
                args.queue, row["id"], args.name, _loads(data_text), row["enqueued_seq"],
                row["order_key"], row["created_at"],
            )  # fmt: skip
        return await self._db.job(
            "lane.add_job($1, $2, $3::jsonb, $4::jsonb, $5)",
            args.queue,
            args.name,
            data_text,
            options_text,
            args.now,
        )

    async def add_chain(self, args: AddChain) -> JobRow:
        queues, names, datas, options = spec_arrays(args.links)
        return await self._db.job(
            f"lane.add_chain($1, $6::text[], $2::text[], {SPLIT_DATAS}, $4::text[]::jsonb[],"
            " $7, $8, $5)",
            args.chain_id,
            names,
            datas,
            options,
            args.now,
            queues,
            args.catch,
            args.catch_queue,
        )

    async def add_jobs(self, args: AddJobs) -> list[JobRow]:
        validate_queue_name(args.queue)
        names = [validate_job_name(spec.name) for spec in args.specs]
        # One JSON array for every spec's data, split by the database: 1,000 payloads cost
        # 0.77 ms encoded, sent and split against 1.82 ms as 1,000 texts cast to jsonb[],
        # and the snapshots decode them with one json.loads (0.18 against 1.06 ms).
        datas = dumps_json([spec.data for spec in args.specs], "job data")
        options = [options_json(spec.options) for spec in args.specs]
        if args.specs and all(text == "{}" for text in options):
            return await self._add_plain_jobs(args.queue, names, datas, args.now)
        rows = await self._db.fetch(
            f"SELECT {JOB_COLUMNS} FROM lane.add_jobs($1, $2::text[], {SPLIT_DATAS},"
            " $4::text[]::jsonb[], $5) AS j",
            args.queue,
            names,
            datas,
            options,
            args.now,
        )
        return [job_from_row(row) for row in rows]

    async def _add_plain_jobs(
        self, queue: str, names: list[str], datas: str, now: datetime | None
    ) -> list[JobRow]:
        """``add_jobs`` of specs without options (the common bulk add), through
        ``lane.add_jobs_brief``: only the ids, sequences and order keys come back, and the
        snapshots are built here (``rows.plain_job``). NULL options mean every spec's are
        the defaults (no array of ``{}`` to send and cast)."""
        rows = await self._db.fetch(
            "SELECT created_at, ids, enqueued_seqs, order_keys FROM lane.add_jobs_brief($1,"
            f" $2::text[], {SPLIT_DATAS}, NULL, $4)",
            queue,
            names,
            datas,
            now,
        )
        row = rows[0]
        created_at = row["created_at"]
        return [
            plain_job(queue, job_id, name, data, seq, order_key, created_at)
            for job_id, name, data, seq, order_key in zip(
                row["ids"],
                names,
                _loads(datas),
                row["enqueued_seqs"],
                row["order_keys"],
                strict=True,
            )
        ]

    # ----------------------------------------------------------------- reading
    get_job = statement(
        f"SELECT {JOB_COLUMNS}, x.logs_count, x.dedup_expires_at, x.child_queues,"
        " x.child_ids FROM lane.get_job($1, $2) AS j, lane.get_job_extras($1, $2) AS x",
        result=job_with_extras,
    )
    get_job_state = statement("SELECT lane.get_job_state($1, $2)", result=value)
    get_job_finished_result = statement(
        "SELECT state, return_value::text AS return_value, failed_reason"
        " FROM lane.get_job_finished_result($1, $2)",
        result=finished_result,
    )

    # ----------------------------------------------------------------- management
    promote_job = job_statement("lane.promote_job($1, $2, $3)")
    reschedule_job = job_statement(
        "lane.reschedule_job($1, $2, $3, $4)", delay=lambda d: to_millis(d, "delay")
    )
    retry_job = job_statement("lane.retry_job($1, $2, $3)")
    remove_job = statement("SELECT lane.remove_job($1, $2, $3)", result=value)
    update_job_data = job_statement(
        "lane.update_job_data($1, $2, $3::jsonb, $4::uuid)",
        data=lambda d: dumps_json(d, "job data"),
        token=optional_token_text,
    )
    update_job_progress = job_statement(
        "lane.update_job_progress($1, $2, $3::jsonb, $4, $5::uuid)",
        progress=lambda p: dumps_json(p, "progress"),
        token=optional_token_text,
    )
    update_job_priority = job_statement("lane.update_job_priority($1, $2, $3, $4, $5)")

    async def save_job_stacktrace(self, args: SaveJobStacktrace) -> JobRow:
        entries, reason = validate_stacktrace(args.stacktrace, args.failed_reason)
        return await self._db.job(
            "lane.save_job_stacktrace($1, $2, $3::text[], $4)",
            args.queue,
            args.job_id,
            entries,
            reason,
        )


class PostgresTransactions(Entity, serves=Transactions):
    """``add_job`` / ``add_jobs`` on the caller's connection (``lane_pg.postgres.enqueue``).

    A synchronous connection (psycopg ``Connection``, SQLAlchemy ``Connection``/``Session``)
    comes from the facade's sync pushes (``lane_pg.facade.blocking``): its owner's thread
    waits for this call, so the statement runs here, blocking, and nobody else uses the
    connection meanwhile."""

    async def add_job_in(self, args: AddJobIn) -> JobRow:
        """``add_job`` inside the caller's transaction (``lane_pg.postgres.enqueue``)."""
        schema = self._db.schema
        if enqueue.is_sync_connection(args.conn):
            return enqueue.add_job_sync(
                args.conn, args.queue, args.name, args.data, args.options, schema=schema
            )
        return await enqueue.add_job(
            args.conn, args.queue, args.name, args.data, args.options, schema=schema
        )

    async def add_jobs_in(self, args: AddJobsIn) -> list[JobRow]:
        if enqueue.is_sync_connection(args.conn):
            return enqueue.add_jobs_sync(args.conn, args.queue, args.specs, schema=self._db.schema)
        return await enqueue.add_jobs(args.conn, args.queue, args.specs, schema=self._db.schema)

    async def same_database(self, args: SameDatabase) -> bool:
        mine = await self._db.fetchval(enqueue.DATABASE_IDENTITY)
        if enqueue.is_sync_connection(args.conn):
            return bool(mine == enqueue.database_identity_sync(args.conn))
        return bool(mine == await enqueue.database_identity(args.conn))
