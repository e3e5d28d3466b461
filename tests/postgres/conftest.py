"""Fixtures and helpers for the tests that call the stored functions as plain SQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.schema import migrate
from tests.conftest import NewDatabase


async def _rolled_back(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(dsn)
    transaction = connection.transaction()
    await transaction.start()
    try:
        yield connection
    finally:
        await transaction.rollback()
        await connection.close()


@pytest_asyncio.fixture
async def conn(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection inside a transaction rolled back at the end (the cheapest honest
    isolation: nothing the test writes survives)."""
    async for connection in _rolled_back(pg_dsn):
        yield connection


@pytest_asyncio.fixture
async def fresh_conn(new_db: NewDatabase) -> AsyncIterator[asyncpg.Connection]:
    """Like ``conn``, on a database of its own: for plan checks, whose outcome would
    otherwise depend on whatever earlier runs left in the shared test database."""
    dsn = await new_db()
    await migrate(dsn)
    async for connection in _rolled_back(dsn):
        yield connection


@pytest.fixture
async def fresh(new_db: NewDatabase) -> AsyncIterator[tuple[str, PostgresBackend]]:
    """A migrated database of its own and a small backend pool on it: for tests whose
    figures (dead rows, table and index sizes) must be their own."""
    dsn = await new_db()
    await migrate(dsn)
    backend = await PostgresBackend.connect(dsn, min_size=1, max_size=4)
    try:
        yield dsn, backend
    finally:
        await backend.close()


@pytest_asyncio.fixture
async def committed(pg_dsn: str, queue_name: str) -> AsyncIterator[PostgresBackend]:
    """A backend whose writes commit (other sessions must see them); the test's queue is
    deleted afterwards."""
    backend = await PostgresBackend.connect(pg_dsn, min_size=1, max_size=4)
    try:
        yield backend
    finally:
        async with backend.pool.acquire() as c:
            await c.execute(
                "DELETE FROM lane.job_logs WHERE job_key IN"
                " (SELECT key FROM lane.jobs WHERE queue = $1)",
                queue_name,
            )
            await c.execute("DELETE FROM lane.jobs WHERE queue = $1", queue_name)
            await c.execute("DELETE FROM lane.events WHERE queue = $1", queue_name)
            await c.execute("DELETE FROM lane.queues WHERE name = $1", queue_name)
        await backend.close()


async def refused(conn: asyncpg.Connection, sqlstate: str, sql: str, *args: object) -> str:
    """Run ``sql`` in a savepoint, expect ``sqlstate``, and return the error message."""
    with pytest.raises(asyncpg.PostgresError) as caught:
        async with conn.transaction():
            await conn.execute(sql, *args)
    assert caught.value.sqlstate == sqlstate, caught.value
    return str(caught.value)
