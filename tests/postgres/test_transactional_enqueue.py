"""TX-1, TX-2, SCH-8, SQLR-7: enqueue on the caller's connection, inside its transaction.

Every driver adapter runs the same scenarios: a business row and a job written in one
transaction vanish together on rollback (and wake nobody), appear together on commit (and
wake the LISTENing connection with the queue name), and stay invisible to a claim from
another connection until the commit.

Waiting is by deadline only. "Nobody was woken" is proven with a sentinel: after the
rollback a separate connection commits its own NOTIFY on the same channel; PostgreSQL
delivers notifications in commit order, so once the sentinel arrived, a wake-up from the
rolled-back transaction can no longer come.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, cast

import asyncpg
import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from lane_pg.errors import InvalidJobId, InvalidPayload, InvalidPriority, LaneError
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.enqueue import (
    add_job,
    add_job_sync,
    add_jobs,
    add_jobs_sync,
    fetch_rows,
    translate_error,
)
from lane_pg.postgres.rows import job_from_row
from lane_pg.types import JobOptions, JobRow, JobSpec
from tests.conftest import NewDatabase

CHANNEL = "lane.jobs"
WAIT = 5.0  # deadline for anything that must happen

T = TypeVar("T")


def _no_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


async def in_plain_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run a sync call in a worker thread, where no event loop is running (SCH-9)."""

    def call() -> T:
        assert _no_running_loop(), "the sync path must not need an event loop"
        return fn(*args)

    return await asyncio.to_thread(call)


# ------------------------------------------------------------------ driver adapters


class TxDriver(Protocol):
    """One caller-owned connection with a transaction the test begins and ends."""

    async def open(self) -> None: ...
    async def begin(self) -> None: ...
    async def execute(self, statement: str) -> None: ...
    async def add(self, queue: str, name: str, data: Any = None, options: Any = None) -> JobRow: ...
    async def add_many(self, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]: ...
    async def commit(self) -> None: ...
    async def rollback(self) -> None: ...
    async def close(self) -> None: ...


class AsyncpgDriver:
    def __init__(self, dsn: str, *, pooled: bool) -> None:
        self.dsn = dsn
        self.pooled = pooled
        self.pool: Any = None
        self.conn: Any = None
        self.tx: Any = None

    async def open(self) -> None:
        if self.pooled:
            self.pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=1)
            self.conn = await self.pool.acquire()
            assert isinstance(self.conn, asyncpg.pool.PoolConnectionProxy)
        else:
            self.conn = await asyncpg.connect(self.dsn)

    async def begin(self) -> None:
        self.tx = self.conn.transaction()
        await self.tx.start()

    async def execute(self, statement: str) -> None:
        await self.conn.execute(statement)

    async def add(self, queue: str, name: str, data: Any = None, options: Any = None) -> JobRow:
        return await add_job(self.conn, queue, name, data, options)

    async def add_many(self, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]:
        return await add_jobs(self.conn, queue, specs)

    async def commit(self) -> None:
        await self.tx.commit()

    async def rollback(self) -> None:
        await self.tx.rollback()

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.release(self.conn)
            await self.pool.close()
        else:
            await self.conn.close()


class PsycopgAsyncDriver:
    """psycopg's DBAPI transactions: the first statement opens one, commit/rollback end it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: psycopg.AsyncConnection[Any] | None = None

    @property
    def c(self) -> psycopg.AsyncConnection[Any]:
        assert self.conn is not None
        return self.conn

    async def open(self) -> None:
        self.conn = await psycopg.AsyncConnection.connect(self.dsn)

    async def begin(self) -> None:
        assert not self.c.autocommit

    async def execute(self, statement: str) -> None:
        await self.c.execute(statement)

    async def add(self, queue: str, name: str, data: Any = None, options: Any = None) -> JobRow:
        return await add_job(self.c, queue, name, data, options)

    async def add_many(self, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]:
        return await add_jobs(self.c, queue, specs)

    async def commit(self) -> None:
        await self.c.commit()

    async def rollback(self) -> None:
        await self.c.rollback()

    async def close(self) -> None:
        await self.c.close()


class SaAsyncDriver:
    def __init__(self, dsn: str, dbapi: str, *, session: bool) -> None:
        self.url = make_url(dsn).set(drivername=f"postgresql+{dbapi}")
        self.session = session
        self.engine: AsyncEngine | None = None
        self.conn: AsyncConnection | AsyncSession | None = None

    @property
    def c(self) -> AsyncConnection | AsyncSession:
        assert self.conn is not None
        return self.conn

    async def open(self) -> None:
        self.engine = create_async_engine(self.url)
        self.conn = AsyncSession(self.engine) if self.session else await self.engine.connect()

    async def begin(self) -> None:
        await self.c.begin()

    async def execute(self, statement: str) -> None:
        await self.c.execute(text(statement))

    async def add(self, queue: str, name: str, data: Any = None, options: Any = None) -> JobRow:
        return await add_job(self.c, queue, name, data, options)

    async def add_many(self, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]:
        return await add_jobs(self.c, queue, specs)

    async def commit(self) -> None:
        await self.c.commit()

    async def rollback(self) -> None:
        await self.c.rollback()

    async def close(self) -> None:
        await self.c.close()
        assert self.engine is not None
        await self.engine.dispose()


class SyncDriver:
    """A sync connection driven from worker threads: every call runs with no event loop."""

    def __init__(self, dsn: str, kind: str) -> None:
        self.dsn = dsn
        self.kind = kind
        self.engine: Engine | None = None
        self.conn: Any = None

    def _open(self) -> None:
        if self.kind == "psycopg":
            self.conn = psycopg.connect(self.dsn)
            return
        self.engine = create_engine(make_url(self.dsn).set(drivername="postgresql+psycopg"))
        self.conn = Session(self.engine) if self.kind == "session" else self.engine.connect()

    def _begin(self) -> None:
        if isinstance(self.conn, Connection | Session):
            self.conn.begin()

    def _execute(self, statement: str) -> None:
        if isinstance(self.conn, psycopg.Connection):
            self.conn.execute(statement)
        else:
            self.conn.execute(text(statement))

    def _close(self) -> None:
        self.conn.close()
        if self.engine is not None:
            self.engine.dispose()

    async def open(self) -> None:
        await in_plain_thread(self._open)

    async def begin(self) -> None:
        await in_plain_thread(self._begin)

    async def execute(self, statement: str) -> None:
        await in_plain_thread(self._execute, statement)

    async def add(self, queue: str, name: str, data: Any = None, options: Any = None) -> JobRow:
        return await in_plain_thread(add_job_sync, self.conn, queue, name, data, options)

    async def add_many(self, queue: str, specs: Sequence[JobSpec]) -> list[JobRow]:
        return await in_plain_thread(add_jobs_sync, self.conn, queue, specs)

    async def commit(self) -> None:
        await in_plain_thread(self.conn.commit)

    async def rollback(self) -> None:
        await in_plain_thread(self.conn.rollback)

    async def close(self) -> None:
        await in_plain_thread(self._close)


DRIVERS: dict[str, Callable[[str], TxDriver]] = {
    "asyncpg": lambda dsn: AsyncpgDriver(dsn, pooled=False),
    "asyncpg-pool": lambda dsn: AsyncpgDriver(dsn, pooled=True),
    "psycopg-async": PsycopgAsyncDriver,
    "psycopg-sync": lambda dsn: SyncDriver(dsn, "psycopg"),
    "sqlalchemy-sync": lambda dsn: SyncDriver(dsn, "connection"),
    "sqlalchemy-session": lambda dsn: SyncDriver(dsn, "session"),
    "sqlalchemy-async-asyncpg": lambda dsn: SaAsyncDriver(dsn, "asyncpg", session=False),
    "sqlalchemy-async-psycopg": lambda dsn: SaAsyncDriver(dsn, "psycopg", session=False),
    "sqlalchemy-async-session": lambda dsn: SaAsyncDriver(dsn, "asyncpg", session=True),
}


# ------------------------------------------------------------------ fixtures


class Listener:
    """A LISTEN connection on the lane channel that records every payload it receives."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.payloads: list[str] = []
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.payloads.append(payload)
        for future in self._waiters.pop(payload, []):
            if not future.done():
                future.set_result(None)

    async def wait_for(self, payload: str, deadline: float = WAIT) -> None:
        if payload in self.payloads:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(payload, []).append(future)
        await asyncio.wait_for(future, deadline)

    async def assert_not_woken(self, payload: str, other: Any) -> None:
        """No notification ``payload`` was delivered, nor can it still arrive."""
        sentinel = f"sentinel-{uuid.uuid4().hex}"
        await other.execute("SELECT pg_notify($1, $2)", CHANNEL, sentinel)
        await self.wait_for(sentinel)
        assert payload not in self.payloads


@pytest.fixture
async def listener(pg_dsn: str) -> AsyncIterator[Listener]:
    conn = await asyncpg.connect(pg_dsn)
    listening = Listener(conn)
    await conn.add_listener(CHANNEL, listening.on_notify)
    try:
        yield listening
    finally:
        await conn.close()


@pytest.fixture
async def observer(pg_dsn: str) -> AsyncIterator[Any]:
    """Another connection (autocommit): what the rest of the world sees."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
def business_table(pg_dsn: str) -> Iterator[str]:
    name = f"tx_orders_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id serial PRIMARY KEY, note text NOT NULL)").format(
                sql.Identifier(name)
            )
        )
    try:
        yield name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(params=sorted(DRIVERS))
async def driver(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[TxDriver]:
    adapter = DRIVERS[request.param](pg_dsn)
    await adapter.open()
    try:
        yield adapter
    finally:
        await adapter.close()


async def business_rows(observer: Any, table: str) -> int:
    return int(await observer.fetchval(f'SELECT count(*) FROM "{table}"'))


async def job_rows(observer: Any, queue: str) -> int:
    return int(await observer.fetchval("SELECT count(*) FROM lane.jobs WHERE queue = $1", queue))


async def claim_ids(observer: Any, queue: str) -> list[str]:
    rows = await observer.fetch(
        "SELECT j.id FROM lane.claim_jobs('w', ARRAY[$1::text], ARRAY[10], 30000) AS j", queue
    )
    return [row["id"] for row in rows]


def insert_order(table: str, note: str = "order-1") -> str:
    return f"INSERT INTO \"{table}\" (note) VALUES ('{note}')"


# ------------------------------------------------------------------ per-driver scenarios


async def test_rollback_discards_row_job_and_wakeup(
    driver: TxDriver, business_table: str, listener: Listener, observer: Any, queue_name: str
) -> None:
    await driver.begin()
    await driver.execute(insert_order(business_table))
    job = await driver.add(queue_name, "send", {"order": 1})
    assert (job.queue, job.name, job.data, job.state) == (
        queue_name,
        "send",
        {"order": 1},
        "waiting",
    )
    assert await job_rows(observer, queue_name) == 0

    await driver.rollback()

    assert await business_rows(observer, business_table) == 0
    assert await job_rows(observer, queue_name) == 0
    await listener.assert_not_woken(queue_name, observer)


async def test_commit_publishes_row_job_and_wakeup(
    driver: TxDriver, business_table: str, listener: Listener, observer: Any, queue_name: str
) -> None:
    await driver.begin()
    await driver.execute(insert_order(business_table))
    job = await driver.add(queue_name, "send", {"order": 1}, {"priority": 3})
    assert job.priority == 3

    await driver.commit()

    assert await business_rows(observer, business_table) == 1
    assert await job_rows(observer, queue_name) == 1
    await listener.wait_for(queue_name)


async def test_open_transaction_job_is_not_claimable(
    driver: TxDriver, observer: Any, queue_name: str
) -> None:
    await driver.begin()
    job = await driver.add(queue_name, "send")
    assert await claim_ids(observer, queue_name) == []

    await driver.commit()

    assert await claim_ids(observer, queue_name) == [job.id]


async def test_open_transaction_does_not_block_other_producers(
    driver: TxDriver, observer: Any, queue_name: str
) -> None:
    # The queue exists (committed) before; an open enqueue transaction holds no lock that
    # another producer of the same queue needs.
    await add_job(observer, queue_name, "first")
    await driver.begin()
    await driver.add(queue_name, "in-tx")
    other = await asyncio.wait_for(add_job(observer, queue_name, "other"), WAIT)
    assert other.state == "waiting"
    await driver.rollback()
    assert await job_rows(observer, queue_name) == 2


async def test_sql_error_aborts_the_callers_transaction(
    driver: TxDriver, business_table: str, observer: Any, queue_name: str
) -> None:
    # A dict is passed to SQL as written: lane.add_job refuses the id (SQLSTATE LN001).
    await driver.begin()
    await driver.execute(insert_order(business_table))
    with pytest.raises(InvalidJobId) as caught:
        await driver.add(queue_name, "send", {"order": 1}, {"job_id": "42"})
    assert caught.value.__cause__ is not None
    assert "42" in str(caught.value)

    # COMMIT of an aborted transaction rolls it back: neither the row nor a partial job.
    await driver.commit()
    assert await business_rows(observer, business_table) == 0
    assert await job_rows(observer, queue_name) == 0


async def test_python_validation_keeps_the_transaction_usable(
    driver: TxDriver, business_table: str, observer: Any, queue_name: str
) -> None:
    await driver.begin()
    await driver.execute(insert_order(business_table))
    with pytest.raises(InvalidJobId):
        await driver.add(queue_name, "send", None, JobOptions(job_id="42"))
    with pytest.raises(InvalidPayload):
        await driver.add(queue_name, "send", {"amount": float("nan")})
    with pytest.raises(InvalidPayload):
        await driver.add(queue_name, "send", {"text": "nul\x00byte"})
    with pytest.raises(InvalidPriority):
        await driver.add(queue_name, "send", None, JobOptions(priority=2**21 + 1))
    job = await driver.add(queue_name, "send", {"order": 1}, JobOptions(job_id="order-1"))

    await driver.commit()

    assert job.id == "order-1"
    assert await business_rows(observer, business_table) == 1
    assert await job_rows(observer, queue_name) == 1


async def test_bulk_add_joins_the_transaction(
    driver: TxDriver, observer: Any, queue_name: str
) -> None:
    specs = [JobSpec(f"job-{i}", {"i": i}) for i in range(3)]
    await driver.begin()
    assert len(await driver.add_many(queue_name, specs)) == 3
    await driver.rollback()
    assert await job_rows(observer, queue_name) == 0

    await driver.begin()
    jobs = await driver.add_many(queue_name, [*specs, JobSpec("custom", None, {"job_id": "c-1"})])
    await driver.commit()
    assert [(job.name, job.data) for job in jobs] == [
        *((spec.name, spec.data) for spec in specs),
        ("custom", None),
    ]
    assert jobs[-1].id == "c-1"
    assert await job_rows(observer, queue_name) == 4
    assert await driver.add_many(queue_name, []) == []


# ------------------------------------------------------------------ driver details


async def test_custom_jsonb_codec_does_not_double_encode(pg_dsn: str, queue_name: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
        job = await add_job(conn, queue_name, "send", {"to": "a@example.com"})
        stored = await conn.fetchval(
            "SELECT data FROM lane.jobs WHERE queue = $1 AND id = $2", queue_name, job.id
        )
    finally:
        await conn.close()
    assert job.data == {"to": "a@example.com"}
    assert stored == {"to": "a@example.com"}


async def test_wrong_connection_kind_is_refused(pg_dsn: str, queue_name: str) -> None:
    with (
        psycopg.connect(pg_dsn, autocommit=True) as sync_conn,
        pytest.raises(TypeError, match="add_job_sync"),
    ):
        await add_job(cast(Any, sync_conn), queue_name, "send")
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as async_conn:
        with pytest.raises(TypeError, match="add_job for an asynchronous"):
            add_job_sync(async_conn, queue_name, "send")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await add_job(cast(Any, object()), queue_name, "send")
    assert not await asyncio.to_thread(_jobs_exist, pg_dsn, queue_name)


async def test_same_database_tells_the_callers_database_A24(
    pg_backend: PostgresBackend, pg_dsn: str, new_db: NewDatabase
) -> None:
    """``transactions.same_database``: True for a connection to the backend's database
    (asyncpg or psycopg), False for one to another database, which has no lane schema;
    either way the caller's transaction stays usable."""
    transactions = pg_backend.transactions
    assert transactions is not None
    other = await asyncpg.connect(await new_db())
    same = await asyncpg.connect(pg_dsn)
    try:
        for conn, expected in ((same, True), (other, False)):
            async with conn.transaction():
                assert await transactions.same_database(conn) is expected
                assert await conn.fetchval("SELECT 1") == 1
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as async_conn:
            assert await transactions.same_database(async_conn) is True
    finally:
        await other.close()
        await same.close()


def _jobs_exist(dsn: str, queue: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM lane.jobs WHERE queue = %s", [queue]).fetchone()
    return row is not None and row[0] > 0


def test_sync_add_without_any_event_loop(pg_dsn: str, queue_name: str) -> None:
    assert _no_running_loop()
    with psycopg.connect(pg_dsn) as conn:
        job = add_job_sync(conn, queue_name, "send", {"n": 1})
        conn.rollback()
        assert not _jobs_exist(pg_dsn, queue_name)
        job = add_job_sync(conn, queue_name, "send", {"n": 2})
        conn.commit()
    assert job.data == {"n": 2}
    assert _jobs_exist(pg_dsn, queue_name)


# ------------------------------------------------------------------ plain SQL (SQLR-7)


async def test_plain_sql_add_job(pg_dsn: str, queue_name: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            "SELECT lane.add_job(%s, 'send', '{\"to\": \"a@example.com\"}'::jsonb)", [queue_name]
        )
        cur = await conn.execute(
            "SELECT state, name, data::text FROM lane.jobs WHERE queue = %s", [queue_name]
        )
        rows = await cur.fetchall()
        assert len(rows) == 1
        state, name, data = rows[0]
        assert (state, name, json.loads(data)) == ("waiting", "send", {"to": "a@example.com"})

        for options, code, error in (
            ('{"job_id": "0"}', "LN001", InvalidJobId),
            ('{"priority": 2097153}', "LN002", InvalidPriority),
        ):
            with pytest.raises(psycopg.Error) as caught:
                await conn.execute(
                    "SELECT lane.add_job(%s, 'send', 'null'::jsonb, %s::jsonb)",
                    [queue_name, options],
                )
            assert caught.value.sqlstate == code
            assert isinstance(translate_error(caught.value), error)

        cur = await conn.execute("SELECT count(*) FROM lane.jobs WHERE queue = %s", [queue_name])
        assert await cur.fetchone() == (1,)


async def test_trigger_enqueues_on_insert(
    pg_dsn: str, business_table: str, listener: Listener, observer: Any, queue_name: str
) -> None:
    function = f"{business_table}_enqueue"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                """
                CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    PERFORM lane.add_job(TG_ARGV[0], 'order-created',
                                         jsonb_build_object('order_id', NEW.id));
                    RETURN NEW;
                END $$
                """
            ).format(function=sql.Identifier(function))
        )
        await conn.execute(
            sql.SQL(
                "CREATE TRIGGER enqueue AFTER INSERT ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION {function}({queue})"
            ).format(
                table=sql.Identifier(business_table),
                function=sql.Identifier(function),
                queue=sql.Literal(queue_name),
            )
        )
        try:
            # Rolled back: the trigger's job goes with the row.
            async with conn.transaction(force_rollback=True):
                await conn.execute(insert_order(business_table))
            assert await job_rows(observer, queue_name) == 0
            await listener.assert_not_woken(queue_name, observer)

            cur = await conn.execute(
                sql.SQL("INSERT INTO {} (note) VALUES ('order-2') RETURNING id").format(
                    sql.Identifier(business_table)
                )
            )
            row = await cur.fetchone()
            assert row is not None
            order_id = row[0]
        finally:
            await conn.execute(sql.SQL("DROP FUNCTION {} CASCADE").format(sql.Identifier(function)))

    await listener.wait_for(queue_name)
    rows = await fetch_rows(
        observer, "SELECT {cols} FROM {schema}.jobs AS j WHERE j.queue = $1", [queue_name]
    )
    assert len(rows) == 1
    job = job_from_row(rows[0])
    assert (job.name, job.state, job.data) == ("order-created", "waiting", {"order_id": order_id})
    assert await claim_ids(observer, queue_name) == [job.id]


def test_translate_error_ignores_other_errors() -> None:
    assert translate_error(ValueError("x")) is None
    err = LaneError("x")
    assert translate_error(err) is err
