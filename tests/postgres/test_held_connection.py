"""PostgresBackend keeps one pooled connection between autocommit statements (the held
connection of backend._call): sequential calls reuse it, concurrent calls still run side
by side, and a cancelled or closed call never leaves a connection stuck out of the pool."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.helpers import eventually

PID = "SELECT pg_backend_pid()"


async def test_sequential_calls_reuse_one_connection(pg_dsn: str, queue_name: str) -> None:
    backend = await PostgresBackend.connect(pg_dsn, max_size=4)
    try:
        await backend.add_job(queue_name, "warm")
        pids = {await backend.database.fetchval(PID) for _ in range(5)}
        assert len(pids) == 1
        job = await backend.add_job(queue_name, "send", {"n": 1})
        assert (await backend.get_job(queue_name, job.id)).data == {"n": 1}
        assert await backend.database.fetchval(PID) in pids
    finally:
        await backend.close()


async def test_concurrent_calls_do_not_wait_for_each_other(pg_dsn: str) -> None:
    backend = await PostgresBackend.connect(pg_dsn, max_size=4)
    blocker = await asyncpg.connect(pg_dsn)
    try:
        await backend.database.fetchval(PID)  # a connection is now held
        await blocker.execute("SELECT pg_advisory_lock(424242)")
        waiting = asyncio.create_task(
            backend.database.fetchval("SELECT pg_backend_pid() FROM pg_advisory_lock(424242)")
        )
        await eventually(lambda: _waiting_on_lock(blocker))
        # The held connection is busy inside `waiting`: this call gets another one and
        # answers while the first is still blocked.
        async with asyncio.timeout(10):
            other = await backend.database.fetchval(PID)
        assert not waiting.done()
        await blocker.execute("SELECT pg_advisory_unlock(424242)")
        async with asyncio.timeout(10):
            first = await waiting
        assert other != first
    finally:
        await blocker.close()
        await backend.close()


async def test_a_cancelled_call_gives_its_connection_back(pg_dsn: str) -> None:
    backend = await PostgresBackend.connect(pg_dsn, max_size=2)
    watcher = await asyncpg.connect(pg_dsn)
    try:
        pid = await backend.database.fetchval(PID)
        sleeping = asyncio.create_task(backend.database.fetchval("SELECT pg_sleep(30)"))
        await eventually(lambda: _sleeping(watcher, pid))
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        # The server-side statement was cancelled, and both pool connections serve calls
        # again: two at once, each on its own connection.
        await eventually(lambda: _not_sleeping(watcher, pid))
        async with asyncio.timeout(10):
            pids = await asyncio.gather(
                backend.database.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.2)"),
                backend.database.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.2)"),
            )
        assert len(set(pids)) == 2
    finally:
        await watcher.close()
        await backend.close()


async def test_a_held_connection_the_server_ended_is_replaced_unsent(
    pg_dsn: str, queue_name: str
) -> None:
    """A held connection the server terminated while it waited (a restart, an operator's
    pg_terminate_backend) is dropped before the next statement, which runs once on a new
    connection instead of failing with "released back to the pool" (found by the soak)."""
    backend = await PostgresBackend.connect(pg_dsn, max_size=3)
    admin = await asyncpg.connect(pg_dsn)
    try:
        await backend.add_job(queue_name, "first")
        pid = await backend.database.fetchval(PID)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        await eventually(lambda: _gone(admin, pid))
        await asyncio.sleep(0)  # asyncpg sees the closed socket on a loop turn
        job = await backend.add_job(queue_name, "second")
        assert job.name == "second"
        assert await backend.database.fetchval(PID) != pid
        counts = await backend.reads.get_job_counts(queue_name, ["waiting"])
        assert counts == {"waiting": 2}
    finally:
        await admin.close()
        await backend.close()


async def _gone(conn: asyncpg.Connection, pid: int) -> bool:
    return not await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)


async def test_close_returns_the_held_connection(pg_dsn: str) -> None:
    backend = await PostgresBackend.connect(pg_dsn, max_size=3)
    await backend.database.fetchval(PID)
    async with asyncio.timeout(10):
        await backend.close()


async def test_a_pool_of_one_never_holds_its_connection(pg_dsn: str) -> None:
    backend = await PostgresBackend.connect(pg_dsn, min_size=1, max_size=1)
    try:
        await backend.database.fetchval(PID)
        async with asyncio.timeout(10), backend.pool.acquire() as conn:
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await backend.close()


async def _waiting_on_lock(conn: asyncpg.Connection) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        )
    )


async def _sleeping(conn: asyncpg.Connection, pid: int) -> bool:
    query = await conn.fetchval("SELECT query FROM pg_stat_activity WHERE pid = $1", pid)
    state = await conn.fetchval("SELECT state FROM pg_stat_activity WHERE pid = $1", pid)
    return state == "active" and "pg_sleep(30)" in (query or "")


async def _not_sleeping(conn: asyncpg.Connection, pid: int) -> bool:
    return not await _sleeping(conn, pid)
