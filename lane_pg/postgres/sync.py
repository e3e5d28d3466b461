"""A small synchronous producer for non-async applications (SCH-9).

::

    from lane_pg.postgres.sync import Queue

    with Queue("postgresql://app@db/app", "emails") as q:
        job = q.add_job("send", {"to": "a@example.com"}, priority=3)
        q.get_job(job.id)

Given a DSN, ``Queue`` opens and owns one psycopg connection in autocommit mode (every call
is its own transaction). Given a connection (psycopg ``Connection``, SQLAlchemy
``Connection`` or ``Session``), it uses that one as it is and never commits: the calls join
whatever transaction the caller has open (TX-1). No event loop is involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.postgres.enqueue import (
    SyncConnectionLike,
    add_job_sync,
    add_jobs_sync,
    fetch_rows_sync,
    is_row_of_nulls,
)
from lane_pg.postgres.pooler import target_of
from lane_pg.postgres.rows import job_from_row
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types import (
    ALL_STATES,
    JSON,
    JobOptions,
    JobRow,
    JobSpec,
    options_document,
    validate_queue_name,
)

__all__ = ["Queue"]

_GET_JOB = "SELECT {cols} FROM {schema}.get_job(CAST($1 AS text), CAST($2 AS text)) AS j"
_GET_COUNTS = "SELECT state, count FROM {schema}.get_job_counts(CAST($1 AS text), NULL)"

# JobOptions field -> the key it becomes in the options document.
_DOC_KEYS = {
    "job_id": "job_id",
    "priority": "priority",
    "lifo": "lifo",
    "delay": "delay_ms",
    "attempts": "attempts",
    "backoff": "backoff",
    "timeout": "timeout_ms",
    "remove_on_complete": "remove_on_complete",
    "remove_on_fail": "remove_on_fail",
}


def _merge_options(
    options: JobOptions | dict[str, JSON] | None, overrides: dict[str, Any]
) -> JobOptions | dict[str, JSON] | None:
    """``options`` with the keyword options (``JobOptions`` field names) applied on top."""
    if not overrides:
        return options
    unknown = set(overrides) - set(_DOC_KEYS)
    if unknown:
        raise InvalidOptions(f"unknown job options {sorted(unknown)}; use {sorted(_DOC_KEYS)}")
    if options is None:
        return JobOptions(**overrides)
    if isinstance(options, JobOptions):
        return replace(options, **overrides)
    doc = dict(options_document(options))
    for field, value in overrides.items():
        # Each keyword is rendered on its own: a default value (priority=0) removes the key.
        rendered = JobOptions(**{field: value}).to_json()
        key = _DOC_KEYS[field]
        if key in rendered:
            doc[key] = rendered[key]
        else:
            doc.pop(key, None)
    return doc


def _psycopg() -> Any:
    """The psycopg module, or a ConfigurationError that says what to install."""
    try:
        import psycopg
    except ModuleNotFoundError as exc:
        if exc.name != "psycopg":
            raise
        raise ConfigurationError(
            "lane_pg.postgres.sync.Queue(dsn, ...) opens its connection with psycopg 3:"
            " pip install 'psycopg[binary]' (a dependency of lane_pg: reinstall lane_pg),"
            " or pass a connection you already hold"
        ) from exc
    return psycopg


class Queue:
    """Synchronous producer and reader for one queue."""

    def __init__(
        self,
        conninfo_or_connection: str | SyncConnectionLike,
        queue: str,
        *,
        schema: str = "lane",
    ) -> None:
        self.name = validate_queue_name(queue)
        self.schema = validate_schema_name(schema)
        self._owns_connection = isinstance(conninfo_or_connection, str)
        self._conn: SyncConnectionLike
        if isinstance(conninfo_or_connection, str):
            target = target_of(conninfo_or_connection)
            self._conn = _psycopg().connect(target.dsn, autocommit=True, **target.psycopg_options())
        else:
            self._conn = conninfo_or_connection

    @property
    def connection(self) -> SyncConnectionLike:
        return self._conn

    # ------------------------------------------------------------ producing

    def add_job(
        self,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        **option_kwargs: Any,
    ) -> JobRow:
        """Add one job; keyword options are ``JobOptions`` fields (``priority=3``,
        ``delay=timedelta(seconds=5)``, ``job_id="order-7"``, ...) applied over ``options``."""
        merged = _merge_options(options, option_kwargs)
        return add_job_sync(self._conn, self.name, name, data, merged, schema=self.schema)

    def add_jobs(self, specs: Sequence[JobSpec]) -> list[JobRow]:
        """Add several jobs in one statement; snapshots in input order."""
        return add_jobs_sync(self._conn, self.name, specs, schema=self.schema)

    # ------------------------------------------------------------ reading

    def get_job(self, job_id: str) -> JobRow | None:
        """The job's snapshot, or None when it does not exist (or was removed)."""
        rows = fetch_rows_sync(self._conn, _GET_JOB, [self.name, job_id], schema=self.schema)
        if not rows or is_row_of_nulls(rows[0]):
            return None
        return job_from_row(rows[0])

    def get_job_counts(self) -> dict[str, int]:
        """Number of jobs per state; every state is present (0 when empty)."""
        rows = fetch_rows_sync(self._conn, _GET_COUNTS, [self.name], schema=self.schema)
        counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
        for row in rows:
            counts[str(row["state"])] = int(row["count"])
        return counts

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection if this Queue opened it (a given one is left open)."""
        if self._owns_connection:
            self._conn.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, schema={self.schema!r})"
