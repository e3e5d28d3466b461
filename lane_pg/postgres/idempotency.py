"""Idempotent handlers under at-least-once delivery (WORK-18). PostgreSQL only.

A job may run again after a crash or a lost lease, so a handler guards each side effect
with a key (``f"receipt:{order_id}"``, or the job id) stored in ``lane.idempotency_keys``:

* ``once(key, block)`` runs ``block`` only if the key was not taken before, and takes it
  *before* running it. With ``conn=`` the key is written in the caller's transaction, so it
  commits or rolls back with the handler's own writes on that connection (exactly once for
  writes in the same database). With ``backend=`` the key commits at once: a block that
  then fails or dies is never run again for that key (at most once, for effects outside the
  database that must never happen twice).
* ``commit_on_success(key, block)`` takes the key and runs ``block`` inside one transaction
  (a savepoint on ``conn=``, a pool connection's transaction with ``backend=``) that commits
  only if ``block`` returns: an exception leaves no key, so the retry runs it again.
* ``remember(key, block)`` is ``commit_on_success`` that also stores ``block``'s JSON result
  with the key and returns it to every later call with that key, which skips ``block``.

Concurrent calls with one key: the first take's transaction holds the key's uncommitted
row; the others wait for it, then see the key taken (or take it, if it rolled back). Keys
live in a ``namespace`` ("" by default; a queue name, say) and may expire (``ttl``): an
expired key counts as absent, and the workers' maintenance leader deletes such rows every
``prune_interval`` (``PostgresBackend.prune_idempotency_keys``, ``lane.prune_idempotency_keys``).

The rules (key 1-255 characters, namespace at most 255, ttl at least 1 ms) are checked by
the stored functions of ``sql/functions/85_idempotency.sql``; a refused call writes nothing,
and, like any failed statement, aborts the transaction open on ``conn``. The connections
accepted are those of transactional enqueue (``lane_pg.postgres.enqueue``): asyncpg,
psycopg ``AsyncConnection``, SQLAlchemy ``AsyncConnection`` / ``AsyncSession``. The memory
backend has no key store: tests of such handlers need PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from lane_pg.errors import InvalidOptions
from lane_pg.options import to_millis
from lane_pg.postgres.enqueue import AsyncConnectionLike, _async_kind, fetch_rows
from lane_pg.types import JSON, Duration, dumps_json

if TYPE_CHECKING:
    from lane_pg.postgres.backend import PostgresBackend

__all__ = [
    "Block",
    "IdempotencyKey",
    "commit_on_success",
    "once",
    "read_key",
    "remember",
]

Block: TypeAlias = Callable[[], Awaitable[Any]]
"""What a helper runs: a no-argument async callable (``lambda: send_receipt(order)``)."""

_TAKE = (
    "SELECT taken, CAST(result AS text) AS result FROM {schema}.take_idempotency_key("
    "CAST($1 AS text), CAST($2 AS text), CAST($3 AS bigint), CAST($4 AS timestamptz))"
)
_RECORD = (
    "SELECT 1 AS recorded FROM {schema}.record_idempotency_result("
    "CAST($1 AS text), CAST($2 AS text), CAST($3 AS text)::jsonb, CAST($4 AS timestamptz))"
)
_READ = (
    "SELECT CAST(result AS text) AS result, created_at, expires_at"
    " FROM {schema}.read_idempotency_key(CAST($1 AS text), CAST($2 AS text),"
    " CAST($3 AS timestamptz))"
)


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """A live key: when it was taken, when it expires (None: never) and its recorded result
    (``has_result`` False when the key was taken by ``once`` or ``commit_on_success``)."""

    created_at: datetime
    expires_at: datetime | None
    has_result: bool
    result: JSON


@dataclass(frozen=True, slots=True)
class _Taken:
    taken: bool
    result_text: str | None  # the holder's recorded result as JSON text, None when none


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a call's statements go: the caller's connection, or a backend's pool."""

    conn: AsyncConnectionLike | None
    backend: PostgresBackend | None
    schema: str


def _target(
    conn: AsyncConnectionLike | None, backend: PostgresBackend | None, schema: str | None
) -> _Target:
    if (conn is None) == (backend is None):
        raise InvalidOptions("pass exactly one of conn= (your connection) or backend=")
    if conn is not None:
        _async_kind(conn)  # a clear TypeError for anything but a supported connection
        return _Target(conn, None, schema or "lane")
    assert backend is not None  # exactly one of the two was given
    if not hasattr(backend, "pool"):  # the memory backend has no key store
        raise TypeError(
            "idempotency keys live in PostgreSQL: backend= takes a PostgresBackend, got "
            f"{type(backend).__qualname__}"
        )
    return _Target(None, backend, schema or backend.schema)


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidOptions(f"idempotency {what} must be a string, got {value!r}")
    return value


def _ttl_ms(ttl: Duration | None) -> int | None:
    return None if ttl is None else to_millis(ttl, "idempotency ttl")


async def _take(
    conn: AsyncConnectionLike,
    schema: str,
    namespace: str,
    key: str,
    ttl: Duration | None,
    now: datetime | None,
) -> _Taken:
    params = [_check_text(namespace, "namespace"), _check_text(key, "key"), _ttl_ms(ttl), now]
    rows = await fetch_rows(conn, _TAKE, params, schema=schema)
    return _Taken(bool(rows[0]["taken"]), rows[0]["result"])


@asynccontextmanager
async def _connection(target: _Target) -> AsyncIterator[AsyncConnectionLike]:
    """The caller's connection, or one of the backend's pool for the call's duration."""
    if target.conn is not None:
        yield target.conn
        return
    assert target.backend is not None
    async with target.backend.pool.acquire() as conn:
        yield conn


def _nested_transaction(conn: AsyncConnectionLike) -> AbstractAsyncContextManager[Any]:
    """A transaction on ``conn`` that commits when the block returns and rolls back when it
    raises: a savepoint inside the caller's open transaction, else a transaction of its own."""
    kind = _async_kind(conn)
    if kind in ("asyncpg", "psycopg"):
        return conn.transaction()  # type: ignore[union-attr]
    in_transaction = conn.in_transaction()  # type: ignore[union-attr]
    return conn.begin_nested() if in_transaction else conn.begin()  # type: ignore[union-attr]


async def once(
    key: str,
    block: Block,
    *,
    conn: AsyncConnectionLike | None = None,
    backend: PostgresBackend | None = None,
    namespace: str = "",
    ttl: Duration | None = None,
    now: datetime | None = None,
    schema: str | None = None,
) -> bool:
    """Run ``block`` unless ``key`` was taken before; True when it ran.

    The key is taken before the block runs: on ``conn`` in whatever transaction is open
    there (it commits or rolls back with it), with ``backend`` in a statement of its own,
    committed at once (a failing block keeps the key: never run twice).
    """
    target = _target(conn, backend, schema)
    async with _connection(target) as taker:
        taken = await _take(taker, target.schema, namespace, key, ttl, now)
    if not taken.taken:
        return False
    await block()
    return True


async def _run_committed(
    target: _Target,
    namespace: str,
    key: str,
    block: Block,
    ttl: Duration | None,
    now: datetime | None,
    *,
    record: bool,
) -> _Taken | JSON:
    """Take the key, run the block and (``record``) store its result in one transaction;
    the holder's ``_Taken`` when the key was taken already, else the block's value."""

    async with _connection(target) as tx_conn, _nested_transaction(tx_conn):
        taken = await _take(tx_conn, target.schema, namespace, key, ttl, now)
        if not taken.taken:
            return taken
        value = await block()
        if record:
            params = [namespace, key, dumps_json(value, "idempotency result"), now]
            await fetch_rows(tx_conn, _RECORD, params, schema=target.schema)
        return value


async def commit_on_success(
    key: str,
    block: Block,
    *,
    conn: AsyncConnectionLike | None = None,
    backend: PostgresBackend | None = None,
    namespace: str = "",
    ttl: Duration | None = None,
    now: datetime | None = None,
    schema: str | None = None,
) -> bool:
    """Run ``block`` unless ``key`` was taken before, keeping the key only if it returns;
    True when it ran. An exception propagates and leaves no key (nor, on ``conn``, the
    block's writes there: they share the savepoint), so a retry runs the block again."""
    target = _target(conn, backend, schema)
    outcome = await _run_committed(target, namespace, key, block, ttl, now, record=False)
    return not isinstance(outcome, _Taken)


async def remember(
    key: str,
    block: Block,
    *,
    conn: AsyncConnectionLike | None = None,
    backend: PostgresBackend | None = None,
    namespace: str = "",
    ttl: Duration | None = None,
    now: datetime | None = None,
    schema: str | None = None,
) -> JSON:
    """``block``'s JSON result, run and stored with ``key`` the first time (as
    ``commit_on_success``), replayed without running it on every later call.

    A block whose result is not JSON raises ``InvalidPayload`` and leaves no key. A key taken
    by ``once`` or ``commit_on_success`` has no result to replay: ``InvalidOptions``.
    """
    target = _target(conn, backend, schema)
    outcome = await _run_committed(target, namespace, key, block, ttl, now, record=True)
    if not isinstance(outcome, _Taken):
        return outcome
    if outcome.result_text is None:
        raise InvalidOptions(
            f"idempotency key {key!r} of namespace {namespace!r} was taken without a result "
            "(by once or commit_on_success): remember needs a key of its own"
        )
    return json.loads(outcome.result_text)


async def read_key(
    key: str,
    *,
    conn: AsyncConnectionLike | None = None,
    backend: PostgresBackend | None = None,
    namespace: str = "",
    now: datetime | None = None,
    schema: str | None = None,
) -> IdempotencyKey | None:
    """The live key (None when absent or expired), without taking it."""
    target = _target(conn, backend, schema)
    params = [_check_text(namespace, "namespace"), _check_text(key, "key"), now]
    async with _connection(target) as reader:
        rows = await fetch_rows(reader, _READ, params, schema=target.schema)
    if not rows:
        return None
    text = rows[0]["result"]
    return IdempotencyKey(
        created_at=rows[0]["created_at"],
        expires_at=rows[0]["expires_at"],
        has_result=text is not None,
        result=None if text is None else json.loads(text),
    )
