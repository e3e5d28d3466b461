"""PostgresBackend: the JobQueueBackend on an asyncpg pool.

Every method is one ``SELECT`` of a ``lane.*`` stored function (one transaction), so the
rules live in SQL once and a psql user gets the same semantics. This module only converts
values: Python options to the jsonb document, durations to milliseconds, rows to ``JobRow``,
and SQLSTATE class ``LN`` errors to the ``lane_pg.errors`` classes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import asyncpg

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.postgres import enqueue
from lane_pg.postgres import schema as schema_mod
from lane_pg.postgres.arguments import (
    SPLIT_DATAS,
    event_bound,
    optional_token_text,
    server_errors,
)
from lane_pg.postgres.cleanup import CleanupCalls
from lane_pg.postgres.database import Database
from lane_pg.postgres.flows import FlowCalls
from lane_pg.postgres.follow import FollowCalls
from lane_pg.postgres.leader import PostgresLeader
from lane_pg.postgres.limits import PostgresLimits
from lane_pg.postgres.logs import PostgresLogs
from lane_pg.postgres.metrics import MetricCalls
from lane_pg.postgres.notifier import Notifier
from lane_pg.postgres.owners import OwnerCalls
from lane_pg.postgres.rows import (
    EVENT_COLUMNS,
    JOB_COLUMNS,
    event_from_row,
    job_from_row,
    plain_job,
    with_extras,
)
from lane_pg.postgres.runs import PostgresRuns
from lane_pg.postgres.upkeep import SpaceUpkeep
from lane_pg.types import (
    ALL_STATES,
    DEFAULT_PRUNE_BATCH,
    JSON,
    Duration,
    JobOptions,
    JobPage,
    JobRow,
    JobSpec,
    JobState,
    PauseStatus,
    QueueEvent,
    QueueRetention,
    StalledOutcome,
    dumps_json,
    options_json,
    to_millis,
    validate_job_name,
    validate_prune_batch,
    validate_queue_name,
    validate_record_events,
    validate_stacktrace,
)

# One module-level reference: json.loads looked up per call costs an attribute read.
_loads = json.loads


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to undo.

    asyncpg's default reset sends ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release, one more round trip per call (~90 us of the ~300 us an
    autocommit ``add`` takes, W1). This pool's connections never take session locks,
    LISTEN or change settings: the worker's LISTEN and leader lock live on the notifier's
    own connection. asyncpg still rolls back a transaction left open before calling this.
    """


class PostgresBackend(
    SpaceUpkeep,
    OwnerCalls,
    CleanupCalls,
    FlowCalls,
    MetricCalls,
    FollowCalls,
    JobQueueBackend,
):
    """Job queue backend over PostgreSQL (schema ``lane`` unless configured)."""

    kind = "postgres"

    def __init__(self, pool: asyncpg.Pool, schema: str = "lane", dsn: str | None = None) -> None:
        self._pool = pool
        self._db = Database(pool, schema)
        self.schema = self._db.schema
        self.dsn = dsn
        """The DSN the pool was opened with: the worker's LISTEN connection uses it."""
        runs = PostgresRuns(self._db)
        self._serve(
            self,
            {
                # The maintenance leader's lease in lane.leaders, called on this pool.
                "leader": PostgresLeader(pool, self.schema),
                "logs": PostgresLogs(self._db),
                "runs": runs,
                "limits": PostgresLimits(self._db),
                "space": self,
                "idempotency": self,
                "transactions": self,
                "failed_records": runs,
            },
        )

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        schema: str = "lane",
        min_size: int = 1,
        max_size: int = 10,
        check_schema: bool = True,
    ) -> PostgresBackend:
        """Open a pool and refuse to start against an old or newer-breaking schema."""
        schema_mod.validate_schema_name(schema)
        pool = await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, reset=_keep_session
        )
        try:
            if check_schema:
                async with pool.acquire() as conn:
                    await schema_mod.check_version(conn, schema)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, schema, dsn)

    async def add_job_in(
        self,
        conn: object,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
    ) -> JobRow:
        """``add_job`` inside the caller's transaction (``lane_pg.postgres.enqueue``)."""
        return await enqueue.add_job(conn, queue, name, data, options, schema=self.schema)

    async def add_jobs_in(self, conn: object, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]:
        return await enqueue.add_jobs(conn, queue, specs, schema=self.schema)

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    async def dedicated(self) -> PostgresBackend | None:
        """This backend over one connection of its own (an asyncpg pool of one, which
        reconnects by itself), for a caller that makes one call at a time: the worker's
        claim loop. The caller closes it. None when the DSN is unknown (a backend built
        on a pool of the caller's)."""
        if self.dsn is None:
            return None
        return await PostgresBackend.connect(
            self.dsn, schema=self.schema, min_size=1, max_size=1, check_schema=False
        )

    def wakeups(
        self, queues: Sequence[str] | None, *, name: str, health_interval: float
    ) -> Notifier:
        """A LISTEN ``Notifier`` on a connection of its own for ``queues`` (all when None);
        the caller starts and closes it. Needs the DSN (``dsn`` given or ``connect``)."""
        if self.dsn is None:
            raise ConfigurationError(
                "this PostgresBackend was built on a pool without a DSN: it cannot open the"
                " LISTEN connection a worker's wake-ups need; build it with PostgresBackend."
                "connect(dsn) or pass dsn="
            )
        return Notifier(
            self.dsn,
            schema=self.schema,
            queues=queues,
            application_name=name,
            health_interval=health_interval,
        )

    async def close(self) -> None:
        await self._db.close()

    # ----------------------------------------------------------------- plumbing
    def _sql(self, text: str) -> str:
        return self._db.sql(text)

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        return await self._db.fetch(sql, *args)

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        return await self._db.fetchval(sql, *args)

    async def _job(self, function_call: str, *args: Any) -> JobRow:
        return await self._db.job(function_call, *args)

    # ----------------------------------------------------------------- adding
    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        validate_queue_name(queue)
        validate_job_name(name)
        # W1 (benchmarks/README.md), medians of 300 on this VM: 569 us per autocommit call
        # through asyncpg's pool against 398 us for a plain `SELECT lane.add_job(...)` on a
        # connection; on the held connection (_call) the gap is ~100 us (row decoding,
        # snapshot, checks and JSON), and the raw baseline's INSERT takes ~60 % of the SQL.
        data_text = dumps_json(data, "job data")
        options_text = options_json(options)
        if options_text == "{}":
            # Default options: only what the database chose comes back (see rows.plain_job).
            rows = await self._fetch(
                "SELECT j.id, j.enqueued_seq, j.order_key, j.created_at"
                " FROM lane.add_job($1, $2, $3::jsonb, '{}'::jsonb, $4) AS j",
                queue,
                name,
                data_text,
                now,
            )
            row = rows[0]
            return plain_job(
                queue, row["id"], name, _loads(data_text), row["enqueued_seq"],
                row["order_key"], row["created_at"],
            )  # fmt: skip
        return await self._job(
            "lane.add_job($1, $2, $3::jsonb, $4::jsonb, $5)",
            queue,
            name,
            data_text,
            options_text,
            now,
        )

    async def add_jobs(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[JobRow]:
        validate_queue_name(queue)
        names = [validate_job_name(spec.name) for spec in specs]
        # One JSON array for every spec's data, split by the database: 1,000 payloads cost
        # 0.77 ms encoded, sent and split against 1.82 ms as 1,000 texts cast to jsonb[],
        # and the snapshots decode them with one json.loads (0.18 against 1.06 ms).
        datas = dumps_json([spec.data for spec in specs], "job data")
        options = [options_json(spec.options) for spec in specs]
        if specs and all(text == "{}" for text in options):
            return await self._add_plain_jobs(queue, names, datas, now)
        rows = await self._fetch(
            f"SELECT {JOB_COLUMNS} FROM lane.add_jobs($1, $2::text[], {SPLIT_DATAS},"
            " $4::text[]::jsonb[], $5) AS j",
            queue,
            names,
            datas,
            options,
            now,
        )
        return [job_from_row(row) for row in rows]

    async def _add_plain_jobs(
        self, queue: str, names: list[str], datas: str, now: datetime | None
    ) -> list[JobRow]:
        """``add_jobs`` of specs without options (the common bulk add), through
        ``lane.add_jobs_brief``: only the ids, sequences and order keys come back, and the
        snapshots are built here (``rows.plain_job``). NULL options mean every spec's are
        the defaults (no array of ``{}`` to send and cast)."""
        rows = await self._fetch(
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

    # ----------------------------------------------------------------- maintenance
    async def recover_stalled(
        self,
        queues: Sequence[str] | None = None,
        *,
        max_stalled_count: int = 1,
        now: datetime | None = None,
    ) -> list[StalledOutcome]:
        rows = await self._fetch(
            "SELECT queue, id, state FROM lane.recover_stalled($1::text[], $2, $3)",
            None if queues is None else list(queues),
            max_stalled_count,
            now,
        )
        return [StalledOutcome(row["queue"], row["id"], row["state"]) for row in rows]

    async def promote_due_jobs(
        self, queues: Sequence[str] | None = None, *, now: datetime | None = None
    ) -> int:
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.promote_due_jobs($1::text[], $2)",
                None if queues is None else list(queues),
                now,
            ),
        )

    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        millis = await self._fetchval(
            "SELECT lane.next_due_in_ms($1::text[])", None if queues is None else list(queues)
        )
        return None if millis is None else timedelta(milliseconds=millis)

    async def trim_events(self, queues: Sequence[str] | None = None) -> int:
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.trim_events($1::text[])", None if queues is None else list(queues)
            ),
        )

    async def list_queues(self) -> list[str]:
        return [row[0] for row in await self._fetch("SELECT lane.list_queues()")]

    # ----------------------------------------------------------------- queue retention
    async def set_queue_retention(
        self, queue: str, *, keep_completed: int | None, keep_failed: int | None
    ) -> None:
        validate_queue_name(queue)
        retention = QueueRetention(keep_completed, keep_failed)
        await self._fetch(
            "SELECT lane.set_queue_retention($1, $2, $3)",
            queue,
            retention.keep_completed,
            retention.keep_failed,
        )

    async def get_queue_retention(self, queue: str) -> QueueRetention:
        validate_queue_name(queue)
        rows = await self._fetch(
            "SELECT keep_completed, keep_failed FROM lane.get_queue_retention($1)", queue
        )
        return QueueRetention(rows[0]["keep_completed"], rows[0]["keep_failed"])

    async def prune_finished(
        self, queues: Sequence[str] | None = None, *, batch: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        names = None if queues is None else [validate_queue_name(name) for name in queues]
        return cast(
            int,
            await self._fetchval(
                "SELECT lane.prune_finished($1::text[], $2)", names, validate_prune_batch(batch)
            ),
        )

    # ----------------------------------------------------------------- queue events
    async def set_queue_events(self, queue: str, *, record: bool) -> None:
        validate_queue_name(queue)
        await self._fetch(
            "SELECT lane.set_queue_events($1, $2)", queue, validate_record_events(record)
        )

    async def get_queue_events(self, queue: str) -> bool:
        validate_queue_name(queue)
        return cast(bool, await self._fetchval("SELECT lane.get_queue_events($1)", queue))

    # ----------------------------------------------------------------- management
    async def promote_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        return await self._job("lane.promote_job($1, $2, $3)", queue, job_id, now)

    async def reschedule_job(
        self, queue: str, job_id: str, delay: Duration, *, now: datetime | None = None
    ) -> JobRow:
        return await self._job(
            "lane.reschedule_job($1, $2, $3, $4)", queue, job_id, to_millis(delay, "delay"), now
        )

    async def retry_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        return await self._job("lane.retry_job($1, $2, $3)", queue, job_id, now)

    async def remove_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> bool:
        return cast(
            bool, await self._fetchval("SELECT lane.remove_job($1, $2, $3)", queue, job_id, now)
        )

    async def update_job_data(
        self, queue: str, job_id: str, data: JSON, *, token: str | None = None
    ) -> JobRow:
        return await self._job(
            "lane.update_job_data($1, $2, $3::jsonb, $4::uuid)",
            queue,
            job_id,
            dumps_json(data, "job data"),
            optional_token_text(token),
        )

    async def update_job_progress(
        self,
        queue: str,
        job_id: str,
        progress: JSON,
        *,
        now: datetime | None = None,
        token: str | None = None,
    ) -> JobRow:
        return await self._job(
            "lane.update_job_progress($1, $2, $3::jsonb, $4, $5::uuid)",
            queue,
            job_id,
            dumps_json(progress, "progress"),
            now,
            optional_token_text(token),
        )

    async def save_job_stacktrace(
        self, queue: str, job_id: str, stacktrace: Sequence[str], failed_reason: str | None
    ) -> JobRow:
        entries, reason = validate_stacktrace(stacktrace, failed_reason)
        return await self._job(
            "lane.save_job_stacktrace($1, $2, $3::text[], $4)", queue, job_id, entries, reason
        )

    async def update_job_priority(
        self,
        queue: str,
        job_id: str,
        priority: int,
        *,
        lifo: bool | None = None,
        now: datetime | None = None,
    ) -> JobRow:
        return await self._job(
            "lane.update_job_priority($1, $2, $3, $4, $5)", queue, job_id, priority, lifo, now
        )

    async def pause_queue(self, queue: str) -> None:
        validate_queue_name(queue)
        await self._fetch("SELECT lane.pause_queue($1)", queue)

    async def resume_queue(self, queue: str) -> None:
        validate_queue_name(queue)
        await self._fetch("SELECT lane.resume_queue($1)", queue)

    async def is_queue_paused(self, queue: str) -> bool:
        return cast(bool, await self._fetchval("SELECT lane.is_queue_paused($1)", queue))

    async def pause_all(self) -> None:
        await self._fetch("SELECT lane.pause_all()")

    async def resume_all(self) -> None:
        await self._fetch("SELECT lane.resume_all()")

    async def signal_restart(self) -> int:
        return cast(int, await self._fetchval("SELECT lane.signal_restart()"))

    async def get_pause_status(self, queues: Sequence[str] | None = ()) -> PauseStatus:
        names = None if queues is None else list(queues)
        for name in names or ():
            validate_queue_name(name)
        [row] = await self._fetch(
            "SELECT all_paused, paused, restart_at FROM lane.pause_status($1::text[])", names
        )
        return PauseStatus(row["all_paused"], frozenset(row["paused"]), row["restart_at"])

    # ----------------------------------------------------------------- reading
    async def get_job(self, queue: str, job_id: str) -> JobRow | None:
        rows = await self._fetch(
            f"SELECT {JOB_COLUMNS}, x.logs_count, x.dedup_expires_at, x.child_queues,"
            " x.child_ids FROM lane.get_job($1, $2) AS j, lane.get_job_extras($1, $2) AS x",
            queue,
            job_id,
        )
        return with_extras(job_from_row(rows[0]), rows[0]) if rows else None

    async def get_job_state(self, queue: str, job_id: str) -> JobState | None:
        return cast(
            JobState | None,
            await self._fetchval("SELECT lane.get_job_state($1, $2)", queue, job_id),
        )

    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        rows = await self._fetch(
            "SELECT state, count FROM lane.get_job_counts($1, $2::text[])",
            queue,
            None if states is None else list(states),
        )
        return {cast(JobState, row["state"]): row["count"] for row in rows}

    async def list_jobs(
        self,
        queue: str,
        states: Sequence[JobState],
        *,
        descending: bool = False,
        offset: int = 0,
        limit: int = 20,
    ) -> JobPage:
        wanted = list(states) or list(ALL_STATES)
        async with (
            server_errors(),
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            # One snapshot, so the page and its total agree.
            rows = await conn.fetch(
                self._sql(
                    f"SELECT {JOB_COLUMNS} FROM lane.list_jobs($1, $2::text[], $3, $4, $5) AS j"
                ),
                queue,
                wanted,
                descending,
                offset,
                limit,
            )
            total = await conn.fetchval(
                self._sql("SELECT lane.count_jobs($1, $2::text[])"), queue, wanted
            )
        return JobPage([job_from_row(row) for row in rows], total, offset, limit)

    async def read_events(
        self, queue: str, start: str | int = "-", end: str | int = "+", limit: int = 100
    ) -> list[QueueEvent]:
        rows = await self._fetch(
            f"SELECT {EVENT_COLUMNS} FROM lane.read_events($1, $2, $3, $4) AS e",
            queue,
            event_bound(start, "-"),
            event_bound(end, "+"),
            limit,
        )
        return [event_from_row(row) for row in rows]
