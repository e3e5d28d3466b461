"""Fixtures and helpers for the tests that call the stored functions as plain SQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio


@pytest_asyncio.fixture
async def conn(pg_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection inside a transaction rolled back at the end (the cheapest honest
    isolation: nothing the test writes survives)."""
    connection = await asyncpg.connect(pg_dsn)
    transaction = connection.transaction()
    await transaction.start()
    try:
        yield connection
    finally:
        await transaction.rollback()
        await connection.close()


async def refused(conn: asyncpg.Connection, sqlstate: str, sql: str, *args: object) -> str:
    """Run ``sql`` in a savepoint, expect ``sqlstate``, and return the error message."""
    with pytest.raises(asyncpg.PostgresError) as caught:
        async with conn.transaction():
            await conn.execute(sql, *args)
    assert caught.value.sqlstate == sqlstate, caught.value
    return str(caught.value)
