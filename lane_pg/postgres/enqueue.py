"""Enqueue on the caller's own connection, inside the caller's transaction (TX-1, TX-2, SCH-8).

``add_job`` / ``add_jobs`` take whatever connection the application already holds:

* async: an ``asyncpg.Connection`` (or a pool's connection proxy), a
  ``psycopg.AsyncConnection``, a SQLAlchemy ``AsyncConnection`` or ``AsyncSession``;
* sync (``add_job_sync`` / ``add_jobs_sync``, no event loop needed): a ``psycopg.Connection``,
  a SQLAlchemy ``Connection`` or ``Session``.

Nothing here begins, commits or rolls back. The call runs as one statement in whatever
transaction is open on the connection (or in autocommit when none is), so the job row, its
events and its ``pg_notify`` wake-up become visible at the caller's commit and vanish on
rollback. (psycopg in non-autocommit mode and SQLAlchemy open a transaction implicitly on the
first statement, as they do for any statement: the caller still has to commit.)

Inputs are validated in Python before any SQL is sent, so an invalid call raises a
``ValidationError`` and leaves the caller's transaction usable. Errors raised by the stored
functions themselves (SQLSTATE class ``LN``) are translated into the same exceptions; such an
error aborts the caller's transaction, as any failed statement does in PostgreSQL.

Drivers are never imported eagerly: a connection can only be an instance of a driver class if
that driver is already imported, so the dispatch looks at ``sys.modules``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard

from lane_pg import tracing
from lane_pg.errors import LaneError, translate_error
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.postgres.schema import validate_schema_name
from lane_pg.types import (
    JSON,
    JobOptions,
    JobRow,
    JobSpec,
    dumps_json,
    options_json,
    validate_job_name,
    validate_queue_name,
)

if TYPE_CHECKING:
    import asyncpg
    import asyncpg.pool
    import psycopg
    from sqlalchemy.engine import Connection as SAConnection
    from sqlalchemy.ext.asyncio import AsyncConnection as SAAsyncConnection
    from sqlalchemy.ext.asyncio import AsyncSession
    from sqlalchemy.orm import Session

__all__ = [
    "DATABASE_IDENTITY",
    "AsyncConnectionLike",
    "SyncConnectionLike",
    "add_job",
    "add_job_sync",
    "add_jobs",
    "add_jobs_sync",
    "database_identity",
    "fetch_rows",
    "fetch_rows_sync",
    "is_row_of_nulls",
    "render_sql",
    "translate_error",
]

AsyncConnectionLike: TypeAlias = (
    "asyncpg.Connection | asyncpg.pool.PoolConnectionProxy | psycopg.AsyncConnection[Any]"
    " | SAAsyncConnection | AsyncSession"
)
"""A connection an async application already holds (see the module docstring)."""

SyncConnectionLike: TypeAlias = "psycopg.Connection[Any] | SAConnection | Session"
"""A connection a synchronous application already holds (see the module docstring)."""

Options: TypeAlias = JobOptions | dict[str, JSON] | None
_Style: TypeAlias = Literal["numeric", "format", "named"]

# Templates are written with asyncpg's $n placeholders and rendered per driver. JSON travels
# as text and is cast in SQL: `CAST($n AS text)` pins the parameter type to text, so a jsonb
# codec the application installed on its connection (SQLAlchemy's asyncpg dialect does) can
# never re-encode it.
_ADD_JOB = (
    "SELECT {cols} FROM {schema}.add_job("
    "CAST($1 AS text), CAST($2 AS text), CAST($3 AS text)::jsonb, CAST($4 AS text)::jsonb,"
    " CAST($5 AS timestamptz)) AS j"
)
_ADD_JOBS = (
    "SELECT {cols} FROM {schema}.add_jobs("
    "CAST($1 AS text), CAST($2 AS text[]), CAST($3 AS text[])::jsonb[],"
    " CAST($4 AS text[])::jsonb[], CAST($5 AS timestamptz)) WITH ORDINALITY AS j"
    " ORDER BY j.ordinality"
)

# The database a connection is open on: two connections share the value exactly when they
# reach one database of one running server (a restart changes it). Plain SQL, not a lane
# function: the caller's connection may be on a database without the schema (A24).
DATABASE_IDENTITY = (
    "SELECT current_database() || '/' || current_setting('port') || '/'"
    " || pg_postmaster_start_time()::text AS identity"
)

_PLACEHOLDER = re.compile(r"\$(\d+)")


@lru_cache(maxsize=256)
def render_sql(template: str, schema: str, style: _Style) -> str:
    """The SQL text of ``template`` for one driver's placeholder style.

    ``{schema}`` becomes the validated schema name and ``{cols}`` the job select-list; these
    are the only things ever formatted into SQL text. ``$n`` becomes ``%s`` (psycopg) or
    ``:pn`` (SQLAlchemy ``text()``).
    """
    name = validate_schema_name(schema)
    if style == "format":
        body = _PLACEHOLDER.sub("%s", template)
    elif style == "named":
        body = _PLACEHOLDER.sub(lambda m: f":p{m.group(1)}", template)
    else:
        body = template
    return body.format(schema=name, cols=JOB_COLUMNS)


def _job_params(
    queue: str, name: str, data: JSON, options: Options, now: datetime | None
) -> list[Any]:
    validate_queue_name(queue)
    validate_job_name(name)
    return [
        queue,
        name,
        dumps_json(data, "job data"),
        options_json(options, "job options"),
        now,
    ]


def _bulk_params(queue: str, specs: Sequence[JobSpec], now: datetime | None) -> list[Any]:
    validate_queue_name(queue)
    names: list[str] = []
    datas: list[str] = []
    opts: list[str] = []
    for spec in specs:
        if not isinstance(spec, JobSpec):
            raise TypeError(f"add_jobs takes JobSpec items, got {type(spec).__name__}")
        names.append(validate_job_name(spec.name))
        datas.append(dumps_json(spec.data, "job data"))
        opts.append(options_json(spec.options, "job options"))
    return [queue, names, datas, opts, now]


# ---------------------------------------------------------------- error translation


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except LaneError:
        raise
    except Exception as exc:
        lane = translate_error(exc)
        if lane is None:
            raise
        raise lane from exc


@asynccontextmanager
async def _translated_async() -> AsyncIterator[None]:
    with _translated():
        yield


# ---------------------------------------------------------------- driver dispatch

_AsyncKind: TypeAlias = Literal["asyncpg", "psycopg", "sqlalchemy"]


def _loaded(module: str) -> Any:
    return sys.modules.get(module)


def _async_kind(conn: object) -> _AsyncKind:
    asyncpg_mod = _loaded("asyncpg")
    if asyncpg_mod is not None:
        pool_mod = _loaded("asyncpg.pool")
        kinds: tuple[type, ...] = (asyncpg_mod.Connection,)
        if pool_mod is not None:
            kinds += (pool_mod.PoolConnectionProxy,)
        if isinstance(conn, kinds):
            return "asyncpg"
    psycopg_mod = _loaded("psycopg")
    if psycopg_mod is not None and isinstance(conn, psycopg_mod.AsyncConnection):
        return "psycopg"
    sa_async = _loaded("sqlalchemy.ext.asyncio")
    if sa_async is not None and isinstance(conn, sa_async.AsyncConnection | sa_async.AsyncSession):
        return "sqlalchemy"
    hint = " (use add_job_sync for a synchronous connection)" if is_sync_connection(conn) else ""
    raise TypeError(
        "expected an asyncpg Connection, a psycopg AsyncConnection or a SQLAlchemy"
        f" AsyncConnection/AsyncSession, got {type(conn).__module__}.{type(conn).__qualname__}"
        + hint
    )


def _sync_kind(conn: object) -> Literal["psycopg", "sqlalchemy"]:
    psycopg_mod = _loaded("psycopg")
    if psycopg_mod is not None and isinstance(conn, psycopg_mod.Connection):
        return "psycopg"
    sa_engine = _loaded("sqlalchemy.engine")
    if sa_engine is not None and isinstance(conn, sa_engine.Connection):
        return "sqlalchemy"
    sa_orm = _loaded("sqlalchemy.orm")
    if sa_orm is not None and isinstance(conn, sa_orm.Session):
        return "sqlalchemy"
    raise TypeError(
        "expected a psycopg Connection or a SQLAlchemy Connection/Session, got"
        f" {type(conn).__module__}.{type(conn).__qualname__}"
        " (use add_job for an asynchronous connection)"
    )


def is_sync_connection(conn: object) -> TypeGuard[SyncConnectionLike]:
    """Whether ``conn`` is a synchronous connection (psycopg ``Connection``, SQLAlchemy
    ``Connection``/``Session``) rather than an async one."""
    try:
        _sync_kind(conn)
    except TypeError:
        return False
    return True


async def fetch_rows(
    conn: AsyncConnectionLike, template: str, params: Sequence[Any], *, schema: str = "lane"
) -> list[dict[str, Any]]:
    """Run one templated statement (see ``render_sql``) on an async connection.

    Internal helper shared by the enqueue functions; lane errors are translated.
    """
    kind = _async_kind(conn)
    async with _translated_async():
        if kind == "asyncpg":
            records = await conn.fetch(render_sql(template, schema, "numeric"), *params)  # type: ignore[union-attr]
            return [dict(record) for record in records]
        if kind == "psycopg":
            from psycopg.rows import dict_row

            pconn: psycopg.AsyncConnection[Any] = conn  # type: ignore[assignment]
            async with pconn.cursor(row_factory=dict_row) as cur:
                await cur.execute(render_sql(template, schema, "format"), list(params))
                return await cur.fetchall()
        from sqlalchemy import text

        saconn: SAAsyncConnection | AsyncSession = conn  # type: ignore[assignment]
        result = await saconn.execute(text(render_sql(template, schema, "named")), _named(params))
        return [dict(row) for row in result.mappings().all()]


def fetch_rows_sync(
    conn: SyncConnectionLike, template: str, params: Sequence[Any], *, schema: str = "lane"
) -> list[dict[str, Any]]:
    """Run one templated statement on a sync connection (internal helper, errors translated)."""
    kind = _sync_kind(conn)
    with _translated():
        if kind == "psycopg":
            from psycopg.rows import dict_row

            pconn: psycopg.Connection[Any] = conn  # type: ignore[assignment]
            with pconn.cursor(row_factory=dict_row) as cur:
                cur.execute(render_sql(template, schema, "format"), list(params))
                return cur.fetchall()
        from sqlalchemy import text

        saconn: SAConnection | Session = conn  # type: ignore[assignment]
        result = saconn.execute(text(render_sql(template, schema, "named")), _named(params))
        return [dict(row) for row in result.mappings().all()]


def _named(params: Sequence[Any]) -> dict[str, Any]:
    return {f"p{index}": value for index, value in enumerate(params, start=1)}


def _one_job(rows: list[dict[str, Any]]) -> JobRow:
    if len(rows) != 1:
        raise RuntimeError(f"lane.add_job returned {len(rows)} rows, expected 1")
    return job_from_row(rows[0])


def _jobs(rows: list[dict[str, Any]], expected: int) -> list[JobRow]:
    if len(rows) != expected:
        raise RuntimeError(f"lane.add_jobs returned {len(rows)} rows for {expected} jobs")
    return [job_from_row(row) for row in rows]


# ---------------------------------------------------------------- tracing


def _traced(options: Options, carrier: dict[str, str]) -> Options:
    """``options`` with the push's trace context in ``meta.trace`` (``lane_pg.tracing``):
    a copy, the caller's object untouched."""
    if isinstance(options, JobOptions):
        return dataclasses.replace(
            options, meta={**(options.meta or {}), tracing.META_KEY: carrier}
        )
    document: dict[str, JSON] = dict(options or {})
    given = document.get("meta")
    document["meta"] = {**(given if isinstance(given, dict) else {}), tracing.META_KEY: carrier}
    return document


def _bulk_name(specs: Sequence[JobSpec]) -> str:
    """The job name of a bulk push's span: the jobs' one name, else ``"(mixed)"``."""
    names = {spec.name for spec in specs}
    return names.pop() if len(names) == 1 else "(mixed)"


def _traced_specs(specs: Sequence[JobSpec], span: tracing.SendSpan) -> list[JobSpec]:
    return [
        dataclasses.replace(spec, options=_traced(spec.options, span.create()))
        if isinstance(spec, JobSpec)
        else spec
        for spec in specs
    ]


# ---------------------------------------------------------------- public API


async def add_job(
    conn: AsyncConnectionLike,
    queue: str,
    name: str,
    data: JSON = None,
    options: Options = None,
    *,
    schema: str = "lane",
    now: datetime | None = None,
) -> JobRow:
    """Add one job through ``conn``, inside whatever transaction it has open.

    The job (and its wake-up) is visible to others only once the caller commits; a rollback
    discards it. Raises a ``ValidationError`` subclass for bad input (nothing written).
    With ``lane_pg.tracing`` on, a ``send`` span covers it and the job carries its context.
    """
    if tracing.enabled():  # off: one global read per add
        with tracing.sending(queue, name) as span:
            assert span is not None
            params = _job_params(queue, name, data, _traced(options, span.carrier()), now)
            job = _one_job(await fetch_rows(conn, _ADD_JOB, params, schema=schema))
            span.sent([job.id])
            return job
    params = _job_params(queue, name, data, options, now)
    return _one_job(await fetch_rows(conn, _ADD_JOB, params, schema=schema))


def add_job_sync(
    conn: SyncConnectionLike,
    queue: str,
    name: str,
    data: JSON = None,
    options: Options = None,
    *,
    schema: str = "lane",
    now: datetime | None = None,
) -> JobRow:
    """Synchronous ``add_job``: a psycopg ``Connection``, SQLAlchemy ``Connection``/``Session``."""
    if tracing.enabled():
        with tracing.sending(queue, name) as span:
            assert span is not None
            params = _job_params(queue, name, data, _traced(options, span.carrier()), now)
            job = _one_job(fetch_rows_sync(conn, _ADD_JOB, params, schema=schema))
            span.sent([job.id])
            return job
    params = _job_params(queue, name, data, options, now)
    return _one_job(fetch_rows_sync(conn, _ADD_JOB, params, schema=schema))


async def add_jobs(
    conn: AsyncConnectionLike,
    queue: str,
    specs: Sequence[JobSpec],
    *,
    schema: str = "lane",
    now: datetime | None = None,
) -> list[JobRow]:
    """Add several jobs in one statement; the snapshots come back in input order.

    Every spec is validated before anything is sent: one bad spec adds none of them. With
    ``lane_pg.tracing`` on, a ``send`` span covers them and each job a ``create`` span.
    """
    if specs and tracing.enabled():
        _bulk_params(queue, specs, now)  # refused before any span
        with tracing.sending(queue, _bulk_name(specs), len(specs)) as span:
            assert span is not None
            params = _bulk_params(queue, _traced_specs(specs, span), now)
            jobs = _jobs(await fetch_rows(conn, _ADD_JOBS, params, schema=schema), len(specs))
            span.sent([job.id for job in jobs])
            return jobs
    params = _bulk_params(queue, specs, now)
    if not specs:
        return []
    return _jobs(await fetch_rows(conn, _ADD_JOBS, params, schema=schema), len(specs))


def add_jobs_sync(
    conn: SyncConnectionLike,
    queue: str,
    specs: Sequence[JobSpec],
    *,
    schema: str = "lane",
    now: datetime | None = None,
) -> list[JobRow]:
    """Synchronous ``add_jobs``."""
    if specs and tracing.enabled():
        _bulk_params(queue, specs, now)  # refused before any span
        with tracing.sending(queue, _bulk_name(specs), len(specs)) as span:
            assert span is not None
            params = _bulk_params(queue, _traced_specs(specs, span), now)
            jobs = _jobs(fetch_rows_sync(conn, _ADD_JOBS, params, schema=schema), len(specs))
            span.sent([job.id for job in jobs])
            return jobs
    params = _bulk_params(queue, specs, now)
    if not specs:
        return []
    return _jobs(fetch_rows_sync(conn, _ADD_JOBS, params, schema=schema), len(specs))


async def database_identity(conn: AsyncConnectionLike) -> str:
    """``DATABASE_IDENTITY`` of the caller's async connection."""
    rows = await fetch_rows(conn, DATABASE_IDENTITY, [])
    return str(rows[0]["identity"])


def database_identity_sync(conn: SyncConnectionLike) -> str:
    """``DATABASE_IDENTITY`` of the caller's sync connection."""
    rows = fetch_rows_sync(conn, DATABASE_IDENTITY, [])
    return str(rows[0]["identity"])


def is_row_of_nulls(row: Mapping[str, Any] | None) -> bool:
    """True for a missing row or a composite of NULLs (how a ``RETURNS lane.jobs`` function
    reports "no such job" when it returns NULL)."""
    return row is None or all(value is None for value in row.values())
