"""``DatabaseFailedJobStore``: the failed-job store in ``<schema>.failed_jobs`` (FAIL-1).

Every read and write is one call of a ``lane.*`` function of sql/functions/32_failed.sql,
so a psql user gets the same rules. A worker settling on the same database (same DSN and
schema) does not log records itself: ``lane.fail_jobs`` writes them in the transaction
that fails the jobs for good (FAIL-2, A4), so a crash can neither lose a record nor write
one twice (``records_in``).

The table is the schema's ``failed_jobs`` (migration 0014); the schema name is validated
as an identifier by the backend before any SQL is composed (SCH-3). A custom table name is
not offered: the stored functions, which the terminal transition calls, name the table.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol, cast

from lane_pg.backend import JobQueueBackend
from lane_pg.backend.failed import (
    ANY_RECORD,
    FailedJobFilter,
    FailedJobRecord,
    PagedStore,
    PageKey,
    check_record_id,
)
from lane_pg.errors import ConfigurationError
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import dumps_json

_COLUMNS = (
    "f.id::text AS id, f.connection, f.queue, f.job_name, f.envelope_json::text AS envelope,"
    " f.exception, f.failed_at"
)


def _record(row: Any) -> FailedJobRecord:
    envelope = json.loads(row["envelope"])
    return FailedJobRecord(
        id=row["id"],
        connection=row["connection"],
        queue=row["queue"],
        job_name=row["job_name"],
        envelope=envelope if isinstance(envelope, dict) else {"unparseable": envelope},
        exception=row["exception"],
        failed_at=row["failed_at"],
    )


class BackendSource(Protocol):
    """What opens a backend on first use: a lazy ``BackendDriver`` (``bootstrap_from_env``
    binds the store at boot, before any I/O)."""

    async def backend(self) -> JobQueueBackend: ...


class DatabaseFailedJobStore(PagedStore):
    """Failed-job records in a PostgreSQL schema, over a ``PostgresBackend``'s pool (or
    the one a driver opens on first use)."""

    def __init__(self, backend: PostgresBackend | BackendSource) -> None:
        if not isinstance(backend, PostgresBackend) and not callable(
            getattr(backend, "backend", None)
        ):
            raise TypeError(
                f"DatabaseFailedJobStore takes a PostgresBackend or a driver, got {backend!r}"
            )
        self._source = backend

    def __repr__(self) -> str:
        return f"DatabaseFailedJobStore({self._source!r})"

    async def _pg(self) -> PostgresBackend:
        source = self._source
        if isinstance(source, PostgresBackend):
            return source
        opened = await source.backend()
        if not isinstance(opened, PostgresBackend):
            raise ConfigurationError(
                f"DatabaseFailedJobStore needs a PostgreSQL connection, {source!r} opened"
                f" {opened!r}"
            )
        return opened

    async def records_in(self, backend: object) -> bool:
        """Settling through ``backend`` records into this store: the same backend, or one
        on the same DSN and schema."""
        mine = await self._pg()
        if backend is mine:
            return True
        return (
            isinstance(backend, PostgresBackend)
            and backend.schema == mine.schema
            and backend.dsn is not None
            and backend.dsn == mine.dsn
        )

    async def log(self, record: FailedJobRecord) -> None:
        if not isinstance(record, FailedJobRecord):
            raise TypeError(f"log takes a FailedJobRecord, got {record!r}")
        await (await self._pg()).database.fetchval(
            "SELECT lane.log_failed_job($1::uuid, $2, $3, $4, $5::jsonb, $6, $7)",
            check_record_id(record.id),
            record.connection,
            record.queue,
            record.job_name,
            dumps_json(record.envelope, "failed-job envelope"),
            record.exception,
            record.failed_at,
        )

    async def find(self, record_id: str) -> FailedJobRecord | None:
        rows = await (await self._pg()).database.fetch(
            f"SELECT {_COLUMNS} FROM lane.find_failed_job($1::uuid) AS f",
            check_record_id(record_id),
        )
        return _record(rows[0]) if rows else None

    async def forget(self, record_id: str) -> bool:
        return cast(
            bool,
            await (await self._pg()).database.fetchval(
                "SELECT lane.forget_failed_job($1::uuid)", check_record_id(record_id)
            ),
        )

    async def flush(self, before: datetime | None = None) -> int:
        return cast(
            int,
            await (await self._pg()).database.fetchval("SELECT lane.flush_failed_jobs($1)", before),
        )

    async def count(self, where: FailedJobFilter = ANY_RECORD) -> int:
        return cast(
            int,
            await (await self._pg()).database.fetchval(
                "SELECT lane.count_failed_jobs($1, $2, $3)",
                where.queue,
                where.job_name,
                where.before,
            ),
        )

    async def _page(
        self, where: FailedJobFilter, after: PageKey | None, limit: int
    ) -> list[FailedJobRecord]:
        rows = await (await self._pg()).database.fetch(
            f"SELECT {_COLUMNS} FROM lane.failed_jobs_page($1, $2::uuid, $3, $4, $5, $6) AS f",
            None if after is None else after[0],
            None if after is None else check_record_id(after[1]),
            limit,
            where.queue,
            where.job_name,
            where.before,
        )
        return [_record(row) for row in rows]
