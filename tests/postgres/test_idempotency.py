"""WORK-18: idempotency helpers (lane_pg.postgres.idempotency) against the real PostgreSQL.

Every test uses a namespace of its own (the queue name fixture), so concurrent runs on one
database never share a key. Waiting is by deadline only: the concurrency tests wait until
PostgreSQL reports the other takers blocked on the winner's lock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, Protocol, TypeAlias

import asyncpg
import psycopg
import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from lane_pg.errors import InvalidOptions, InvalidPayload, ValidationError, translate_error
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.idempotency import commit_on_success, once, read_key, remember
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from lane_pg.worker.maintenance import maintenance_tasks
from tests.helpers import eventually
from tests.test_imports import DRIVERS, _loaded_after_import

BOUND = 30.0  # seconds: no run here may take longer
T0 = datetime(2001, 1, 1, tzinfo=UTC)  # an explicit clock for the TTL tests


class Calls:
    """A block that counts its runs (and optionally returns a value or raises)."""

    def __init__(self, value: JSON = None, error: Exception | None = None) -> None:
        self.count = 0
        self.value = value
        self.error = error

    async def __call__(self) -> JSON:
        self.count += 1
        if self.error is not None:
            raise self.error
        return self.value


@pytest_asyncio.fixture
async def backend(pg_dsn: str, queue_name: str) -> AsyncIterator[PostgresBackend]:
    opened = await PostgresBackend.connect(pg_dsn, min_size=1, max_size=12)
    try:
        yield opened
    finally:
        async with opened.pool.acquire() as conn:
            await conn.execute("DELETE FROM lane.idempotency_keys WHERE namespace = $1", queue_name)
            await conn.execute("DELETE FROM lane.jobs WHERE queue = $1", queue_name)
            await conn.execute("DELETE FROM lane.events WHERE queue = $1", queue_name)
            await conn.execute("DELETE FROM lane.queues WHERE name = $1", queue_name)
        await opened.close()


async def keys_in(backend: PostgresBackend, namespace: str) -> list[str]:
    async with backend.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT key FROM lane.idempotency_keys WHERE namespace = $1 ORDER BY key", namespace
        )
    return [row["key"] for row in rows]


# ------------------------------------------------------------------ the seed's check


async def test_handler_run_twice_side_effect_once_and_remember_replays_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    """Two deliveries of one order: the receipt row is written once, in the handler's own
    transaction, and both runs return the receipt number the first one chose."""
    table = f"receipts_{uuid.uuid4().hex[:12]}"
    async with backend.pool.acquire() as conn:
        await conn.execute(f"CREATE TABLE {table} (order_id int, receipt text)")
    try:
        side_effects = Calls()

        async def send_receipt(job: JobRow, ctx: JobContext) -> JSON:
            order = job.payload["order"]
            async with backend.pool.acquire() as conn, conn.transaction():

                async def write_receipt() -> JSON:
                    await side_effects()
                    receipt = uuid.uuid4().hex
                    await conn.execute(f"INSERT INTO {table} VALUES ($1, $2)", order, receipt)
                    return {"receipt": receipt}

                return await remember(
                    f"receipt:{order}", write_receipt, conn=conn, namespace=queue_name
                )

        first = await backend.add_job(queue_name, "receipt", {"order": 42})
        again = await backend.add_job(queue_name, "receipt", {"order": 42})
        config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, concurrency=1)
        worker = Worker(backend, {"receipt": send_receipt}, config)
        assert await asyncio.wait_for(worker.run_until_idle(), BOUND) == 2

        async with backend.pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT order_id, receipt FROM {table}")
        assert side_effects.count == 1
        assert len(rows) == 1
        values = [(await backend.get_job(queue_name, job.id)) for job in (first, again)]
        assert [job.return_value for job in values if job is not None] == [
            {"receipt": rows[0]["receipt"]}
        ] * 2
    finally:
        async with backend.pool.acquire() as conn:
            await conn.execute(f"DROP TABLE {table}")


# ------------------------------------------------------------------ each helper


async def test_once_runs_a_block_at_most_once_per_key_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    block = Calls()
    assert await once("k", block, backend=backend, namespace=queue_name) is True
    assert await once("k", block, backend=backend, namespace=queue_name) is False
    assert block.count == 1
    # the namespace is part of the key
    assert await once("k", block, backend=backend, namespace=f"{queue_name}_b") is True
    assert block.count == 2
    await backend.prune_idempotency_keys()  # no TTL: nothing of ours goes
    assert await keys_in(backend, queue_name) == ["k"]
    async with backend.pool.acquire() as conn:
        await conn.execute(
            "DELETE FROM lane.idempotency_keys WHERE namespace = $1", f"{queue_name}_b"
        )


async def test_once_without_conn_keeps_the_key_when_the_block_fails_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    """backend= commits the key before the block: at most once, even when it fails."""
    failing = Calls(error=RuntimeError("mail server down"))
    with pytest.raises(RuntimeError, match="mail server down"):
        await once("mail", failing, backend=backend, namespace=queue_name)
    assert await once("mail", failing, backend=backend, namespace=queue_name) is False
    assert failing.count == 1


async def test_commit_on_success_keeps_no_key_after_an_exception_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    failing = Calls(error=RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        await commit_on_success("charge", failing, backend=backend, namespace=queue_name)
    assert await read_key("charge", backend=backend, namespace=queue_name) is None

    working = Calls()
    assert await commit_on_success("charge", working, backend=backend, namespace=queue_name)
    assert not await commit_on_success("charge", working, backend=backend, namespace=queue_name)
    assert working.count == 1
    stored = await read_key("charge", backend=backend, namespace=queue_name)
    assert stored is not None
    assert (stored.has_result, stored.expires_at) == (False, None)


async def test_remember_replays_the_first_result_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    first = Calls({"total": 7, "items": [1, 2]})
    assert await remember("sum", first, backend=backend, namespace=queue_name) == {
        "total": 7,
        "items": [1, 2],
    }
    second = Calls({"total": 99})
    assert await remember("sum", second, backend=backend, namespace=queue_name) == {
        "total": 7,
        "items": [1, 2],
    }
    assert (first.count, second.count) == (1, 0)
    # JSON null is a result like any other
    nothing = Calls(None)
    assert await remember("none", nothing, backend=backend, namespace=queue_name) is None
    assert await remember("none", nothing, backend=backend, namespace=queue_name) is None
    assert nothing.count == 1
    stored = await read_key("none", backend=backend, namespace=queue_name)
    assert stored is not None and stored.has_result and stored.result is None


async def test_remember_refuses_a_result_that_is_not_json_and_keeps_no_key_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    with pytest.raises(InvalidPayload):
        await remember("bad", Calls({"when": object()}), backend=backend, namespace=queue_name)
    assert await keys_in(backend, queue_name) == []


async def test_remember_on_a_key_without_result_is_refused_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    await once("plain", Calls(), backend=backend, namespace=queue_name)
    block = Calls(1)
    with pytest.raises(InvalidOptions, match="taken without a result"):
        await remember("plain", block, backend=backend, namespace=queue_name)
    assert block.count == 0


# ------------------------------------------------------------------ transactions


class CallerConnection(Protocol):
    """A caller's own connection of one driver, with the transaction block it begins."""

    conn: Any

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


@asynccontextmanager
async def asyncpg_caller(dsn: str) -> AsyncIterator[CallerConnection]:
    conn = await asyncpg.connect(dsn)
    try:
        yield SimpleNamespace(conn=conn, transaction=conn.transaction)
    finally:
        await conn.close()


@asynccontextmanager
async def psycopg_caller(dsn: str) -> AsyncIterator[CallerConnection]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        yield SimpleNamespace(conn=conn, transaction=conn.transaction)


@asynccontextmanager
async def sqlalchemy_caller(dsn: str) -> AsyncIterator[CallerConnection]:
    engine = create_async_engine(make_url(dsn).set(drivername="postgresql+asyncpg"))
    try:
        async with engine.connect() as conn:
            yield SimpleNamespace(conn=conn, transaction=conn.begin)
    finally:
        await engine.dispose()


CALLERS = pytest.mark.parametrize(
    "caller",
    [asyncpg_caller, psycopg_caller, sqlalchemy_caller],
    ids=["asyncpg", "psycopg", "sqlalchemy"],
)
Caller: TypeAlias = Callable[[str], AbstractAsyncContextManager[CallerConnection]]


@CALLERS
async def test_rollback_releases_the_key_WORK_18(
    backend: PostgresBackend, pg_dsn: str, queue_name: str, caller: Caller
) -> None:
    block = Calls()
    async with caller(pg_dsn) as own:
        with pytest.raises(RuntimeError, match="business write failed"):
            async with own.transaction():
                assert await once("order:1", block, conn=own.conn, namespace=queue_name)
                assert not await once("order:1", block, conn=own.conn, namespace=queue_name)
                raise RuntimeError("business write failed")
        assert await keys_in(backend, queue_name) == []
        async with own.transaction():
            assert await once("order:1", block, conn=own.conn, namespace=queue_name)
    assert await keys_in(backend, queue_name) == ["order:1"]
    assert block.count == 2


@CALLERS
async def test_commit_on_success_rolls_back_its_savepoint_only_WORK_18(
    backend: PostgresBackend, pg_dsn: str, queue_name: str, caller: Caller
) -> None:
    """On conn= inside the caller's transaction, a failed block takes its key and its own
    writes back; the caller's earlier writes and its commit go on."""
    async with caller(pg_dsn) as own, own.transaction():
        await once("before", Calls(), conn=own.conn, namespace=queue_name)

        async def write_then_fail() -> None:
            await once("inside", Calls(), conn=own.conn, namespace=queue_name)
            raise RuntimeError("declined")

        with pytest.raises(RuntimeError, match="declined"):
            await commit_on_success("pay", write_then_fail, conn=own.conn, namespace=queue_name)
        assert await remember("after", Calls(5), conn=own.conn, namespace=queue_name) == 5
    assert await keys_in(backend, queue_name) == ["after", "before"]


async def _blocked_on_locks(backend: PostgresBackend, pids: list[int]) -> int:
    async with backend.pool.acquire() as conn:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])"
            " AND wait_event_type = 'Lock'",
            pids,
        )
    return count


@pytest.mark.parametrize("helper", ["once", "remember"])
async def test_eight_concurrent_duplicates_one_wins_WORK_18(
    backend: PostgresBackend, pg_dsn: str, queue_name: str, helper: str
) -> None:
    """Eight connections take one key in open transactions; the winner's block ends only
    once the seven others are waiting on its lock, so they really race. One block runs;
    the others see the key taken (remember: they return the winner's value)."""
    conns = [await asyncpg.connect(pg_dsn) for _ in range(8)]
    pids = [conn.get_server_pid() for conn in conns]
    runs: list[int] = []
    try:

        async def contender(index: int, conn: asyncpg.Connection) -> JSON:
            async def block() -> JSON:
                runs.append(index)
                await eventually(lambda: _seven_wait_on_a_lock(backend, pids), timeout=BOUND)
                return {"winner": index}

            async with conn.transaction():
                if helper == "once":
                    return await once("race", block, conn=conn, namespace=queue_name)
                return await remember("race", block, conn=conn, namespace=queue_name)

        results = await asyncio.wait_for(
            asyncio.gather(*(contender(i, c) for i, c in enumerate(conns))), BOUND
        )
    finally:
        for conn in conns:
            await conn.close()
    assert len(runs) == 1
    if helper == "once":
        assert sorted(results) == [False] * 7 + [True]
    else:
        assert results == [{"winner": runs[0]}] * 8
    assert await keys_in(backend, queue_name) == ["race"]


async def _seven_wait_on_a_lock(backend: PostgresBackend, pids: list[int]) -> bool:
    return await _blocked_on_locks(backend, pids) == 7


# ------------------------------------------------------------------ expiry


async def test_an_expired_key_is_taken_again_and_pruned_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    block = Calls()
    ttl = timedelta(seconds=10)
    common: dict[str, Any] = {"backend": backend, "namespace": queue_name, "ttl": ttl}
    assert await once("k", block, now=T0, **common)
    assert not await once("k", block, now=T0 + timedelta(seconds=9.999), **common)
    live = await read_key("k", backend=backend, namespace=queue_name, now=T0)
    assert live is not None and live.expires_at == T0 + ttl
    # at its expiry the key counts as absent: read sees nothing, a take takes it again
    assert await read_key("k", backend=backend, namespace=queue_name, now=T0 + ttl) is None
    assert await once("k", block, now=T0 + ttl, **common)
    assert block.count == 2
    assert await remember("r", Calls(1), now=T0, **common) == 1
    assert await remember("r", Calls(2), now=T0 + ttl, **common) == 2  # expired: runs again

    await once("forever", block, backend=backend, namespace=queue_name, now=T0)
    pruned = await backend.prune_idempotency_keys(limit=1000, now=T0 + timedelta(days=1))
    assert pruned >= 2  # ours (and any expired key of an earlier run at this fake time)
    assert await keys_in(backend, queue_name) == ["forever"]


async def test_the_maintenance_leader_deletes_expired_keys_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    """The worker's periodic task (not lane_pg.postgres.idempotency, which the worker never
    imports) deletes a key whose TTL ran out and keeps a live one."""
    await once("old", Calls(), backend=backend, namespace=queue_name, ttl=1, now=T0)
    await once("live", Calls(), backend=backend, namespace=queue_name, ttl=timedelta(days=1))
    config = WorkerConfig(lanes=(Lane(queue_name),))
    [expiry] = [t for t in maintenance_tasks(backend, config) if t.name == "idempotency key expiry"]
    await expiry.run()  # its count may include expired keys of other runs: not asserted
    assert await keys_in(backend, queue_name) == ["live"]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("key", "settings", "message"),
    [
        ("", {}, "invalid idempotency key"),
        ("k" * 256, {}, "invalid idempotency key"),
        (7, {}, "key must be a string"),
        ("k", {"namespace": "n" * 256}, "invalid idempotency namespace"),
        ("k", {"namespace": None}, "namespace must be a string"),
        ("k", {"ttl": 0}, "ttl_ms must be between 1"),
        ("k", {"ttl": -1}, "must not be negative"),
        ("k", {"ttl": "1h"}, "timedelta or a number of seconds"),
    ],
)
@pytest.mark.parametrize("helper", [once, commit_on_success, remember])
async def test_bad_input_is_refused_and_writes_nothing_WORK_18(
    backend: PostgresBackend,
    queue_name: str,
    helper: Callable[..., Awaitable[Any]],
    key: Any,
    settings: dict[str, Any],
    message: str,
) -> None:
    block = Calls()
    options = {"namespace": queue_name, **settings}
    with pytest.raises(InvalidOptions, match=message):
        await helper(key, block, backend=backend, **options)
    assert block.count == 0
    assert await keys_in(backend, queue_name) == []


async def test_a_helper_needs_exactly_one_postgres_connection_source_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    block = Calls()
    with pytest.raises(InvalidOptions, match="exactly one of conn"):
        await once("k", block, namespace=queue_name)
    async with backend.pool.acquire() as conn:
        with pytest.raises(InvalidOptions, match="exactly one of conn"):
            await once("k", block, conn=conn, backend=backend, namespace=queue_name)
    memory = MemoryBackend()
    with pytest.raises(TypeError, match="PostgresBackend"):
        await once("k", block, backend=memory, namespace=queue_name)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="asyncpg Connection"):
        await once("k", block, conn=object(), namespace=queue_name)
    assert block.count == 0
    assert await keys_in(backend, queue_name) == []


async def test_recording_a_result_without_taking_the_key_is_refused_WORK_18(
    backend: PostgresBackend, queue_name: str
) -> None:
    async with backend.pool.acquire() as conn:
        with pytest.raises(asyncpg.PostgresError, match="is not taken") as refused:
            await conn.execute("SELECT lane.record_idempotency_result($1, 'k', '1')", queue_name)
    assert isinstance(translate_error(refused.value), ValidationError)
    assert await keys_in(backend, queue_name) == []


def test_importing_the_helpers_loads_no_driver_WORK_18() -> None:
    """lane_pg.postgres.idempotency is PostgreSQL-only, yet importing it loads no driver (the
    driver comes with the connection the caller passes)."""
    loaded = _loaded_after_import("lane_pg.postgres.idempotency")
    assert [name for name in loaded if name.split(".")[0] in DRIVERS] == []
