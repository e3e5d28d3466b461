"""After-commit dispatch inside ``lane_pg.transaction(conn)`` (TX-3..10, -12..14, UNIQ-4),
PostgreSQL only: the transaction is a real asyncpg transaction on the test database.

Two set-ups. ``deferred``: the facade's default connection is a memory backend, so the
transaction is on another store and deferred pushes are written at commit (the case A24
does not cover). ``shared``: the default connection is the test database itself, so a
deferring push is written inside the caller's transaction and only its events wait for
the commit (A24).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import psycopg
import psycopg.errors
import pytest
import pytest_asyncio

import lane_pg
from lane_pg.backend import Dedup, JobQueueBackend
from lane_pg.errors import ConfigurationError
from lane_pg.facade import (
    BackendDriver,
    EnvelopeOverrides,
    Job,
    JobQueued,
    JobQueueing,
    QueueFacade,
    UniqueJobSkipped,
)
from lane_pg.facade.envelope import Envelope
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import ALL_STATES, JobRow
from tests.helpers import eventually


@dataclass
class Receipt(Job):
    job_name = "Receipt"
    order: int = 0


@dataclass
class DeferredReceipt(Job):
    job_name = "DeferredReceipt"
    after_commit = True
    order: int = 0


@dataclass
class Slow(Job):
    job_name = "Slow"
    after_commit = True
    delay = timedelta(seconds=60)
    n: int = 0


SCOPE = {"queue": ""}
"""The test's queue, in every unique id: a unique lock is one per connection (UNIQ-1), and
the ``shared`` set-up's database is every test's."""


@pytest.fixture(autouse=True)
def _scoped_unique_ids(queue_name: str) -> None:
    SCOPE["queue"] = queue_name


@dataclass
class Report(Job):
    job_name = "Report"
    after_commit = True
    account: str = "a"

    def unique_id(self) -> str | None:
        return f"{SCOPE['queue']}:{self.account}"


@dataclass
class ShortReport(Job):
    job_name = "ShortReport"
    after_commit = True
    unique_for = timedelta(milliseconds=200)
    account: str = "a"

    def unique_id(self) -> str | None:
        return f"{SCOPE['queue']}:{self.account}"


@dataclass
class Mail(Job):
    """A shared carrier type: each message decides (TX-13)."""

    job_name = "Mail"
    deferred: bool = False

    def dispatch_after_commit(self) -> bool:
        return self.deferred


@dataclass
class Notice(Job):
    """TX-13 as the spec words it: an instance-level ``after_commit`` property."""

    job_name = "Notice"
    deferred: bool = False

    @property  # type: ignore[misc]  # a property over the ClassVar default, as users write
    def after_commit(self) -> bool:  # type: ignore[override]
        return self.deferred


CLASSES = (Receipt, DeferredReceipt, Slow, Report, ShortReport, Mail, Notice)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Setup:
    facade: QueueFacade
    backend: JobQueueBackend
    conn: Any
    queue: str
    events: list[object]
    clock: Clock | None

    async def rows(self) -> list[JobRow]:
        return list((await self.backend.list_jobs(self.queue, ALL_STATES, limit=100)).items)


def _facade(backend: JobQueueBackend, kind: str, queue: str) -> tuple[QueueFacade, list[object]]:
    facade = QueueFacade(registry=lane_pg.facade.JobRegistry())
    facade.set_driver(BackendDriver(backend, kind))
    for cls in CLASSES:
        facade.route(cls, queue=queue)
    seen: list[object] = []
    for kind_ in (JobQueueing, JobQueued, UniqueJobSkipped):
        facade.events.listen(kind_, seen.append)
    return facade, seen


@pytest_asyncio.fixture(params=["asyncpg", "psycopg"])
async def conn(pg_dsn: str, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The caller's connection: asyncpg, or psycopg async in autocommit mode."""
    connection: Any
    if request.param == "asyncpg":
        connection = await asyncpg.connect(pg_dsn)
    else:
        connection = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        yield connection
    finally:
        await connection.close()


async def scalar(conn: Any, sql: str, *args: object) -> Any:
    """One value, with ``$n`` parameters, on either driver."""
    if isinstance(conn, asyncpg.Connection):
        return await conn.fetchval(sql, *args)
    for n in range(len(args), 0, -1):
        sql = sql.replace(f"${n}", "%s")
    cursor = await conn.execute(sql, args)
    row = await cursor.fetchone()
    return None if row is None else row[0]


UNIQUE_VIOLATION = (asyncpg.UniqueViolationError, psycopg.errors.UniqueViolation)


@pytest_asyncio.fixture
async def deferred(conn: Any, queue_name: str) -> AsyncIterator[Setup]:
    clock = Clock()
    memory = MemoryBackend(clock=clock)
    facade, seen = _facade(memory, "memory", queue_name)
    yield Setup(facade, memory, conn, queue_name, seen, clock)
    await memory.close()


@pytest_asyncio.fixture
async def shared(conn: Any, pg_backend: PostgresBackend, queue_name: str) -> AsyncIterator[Setup]:
    facade, seen = _facade(pg_backend, "postgres", queue_name)
    yield Setup(facade, pg_backend, conn, queue_name, seen, None)


@pytest.fixture(params=["deferred", "shared"])
def setup(request: pytest.FixtureRequest, conn: Any) -> Setup:
    """Each test once per set-up (a sync fixture: an async one cannot set up another)."""
    value: Setup = request.getfixturevalue(request.param)
    return value


class Rollback(Exception):
    pass


def names(events: list[object]) -> list[str]:
    return [type(event).__name__ for event in events]


# -- TX-3..5 -----------------------------------------------------------------------------


async def test_deferred_until_commit_then_both_events_and_the_row_TX_3(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        job_id = await setup.facade.push(DeferredReceipt(1))
        assert setup.events == []
        if setup.clock is not None:  # another store: nothing written yet
            assert await setup.rows() == []
        else:  # A24: written in the transaction, invisible to other connections
            assert await setup.backend.get_job(setup.queue, job_id) is None
            count = await scalar(
                setup.conn,
                "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND id = $2",
                setup.queue,
                job_id,
            )
            assert count == 1
    assert names(setup.events) == ["JobQueueing", "JobQueued"]
    [row] = await setup.rows()
    assert row.id == job_id and row.data == {"order": 1}


async def test_rollback_discards_the_push_and_its_lock_TX_4(setup: Setup) -> None:
    with pytest.raises(Rollback):
        async with lane_pg.transaction(setup.conn):
            await setup.facade.push_after_commit(Receipt(1))
            assert await setup.facade.push_unique(Report("a")) is True
            raise Rollback
    assert setup.events == [] and await setup.rows() == []
    assert await setup.facade.push_unique(Report("a")) is True  # outside: immediate
    assert len(await setup.rows()) == 1


async def test_outside_a_transaction_after_commit_pushes_at_once_TX_5(setup: Setup) -> None:
    await setup.facade.push(DeferredReceipt(1))
    assert names(setup.events) == ["JobQueueing", "JobQueued"]
    assert len(await setup.rows()) == 1


# -- TX-6 --------------------------------------------------------------------------------


async def test_savepoint_rollback_frees_the_lock_for_a_redispatch_TX_6(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        await setup.facade.push(DeferredReceipt(1))
        with pytest.raises(Rollback):
            async with lane_pg.transaction(setup.conn):
                assert await setup.facade.push_unique(Report("b")) is True
                raise Rollback
        assert await setup.facade.push_unique(Report("b")) is True
        assert await setup.facade.push_unique(Report("b")) is False
        async with lane_pg.transaction(setup.conn):  # released, never rolled back
            await setup.facade.push(DeferredReceipt(2))
    rows = await setup.rows()
    assert sorted((row.name, tuple(row.data.values())) for row in rows) == [
        ("DeferredReceipt", (1,)),
        ("DeferredReceipt", (2,)),
        ("Report", ("b",)),
    ]


# -- TX-7, -8, -13 -----------------------------------------------------------------------


async def test_per_push_override_both_ways_TX_7(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        await setup.facade.push_with(Receipt(1), EnvelopeOverrides(after_commit=True))
        await setup.facade.push_after_commit(Receipt(2))
        await setup.facade.push_with(DeferredReceipt(3), EnvelopeOverrides(after_commit=False))
        assert [row.data["order"] for row in await setup.rows()] == [3]
    assert sorted(row.data["order"] for row in await setup.rows()) == [1, 2, 3]


async def test_process_switch_defers_every_push_TX_8(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANE_PG_AFTER_COMMIT", "true")
    async with lane_pg.transaction(setup.conn):
        await setup.facade.push(Receipt(1))
        await setup.facade.push_with(Receipt(2), EnvelopeOverrides(after_commit=False))
        monkeypatch.setenv("LANE_PG_AFTER_COMMIT", "0")  # read at each push
        await setup.facade.push(Receipt(3))
        assert sorted(row.data["order"] for row in await setup.rows()) == [2, 3]
    assert sorted(row.data["order"] for row in await setup.rows()) == [1, 2, 3]


async def test_each_instance_decides_TX_13(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        await setup.facade.push(Mail(deferred=True))
        await setup.facade.push(Mail(deferred=False))
        assert [row.data for row in await setup.rows()] == [{"deferred": False}]
    assert len(await setup.rows()) == 2


async def test_an_after_commit_property_decides_per_instance_TX_13(setup: Setup) -> None:
    """Both spellings: a property (read on the instance: the property object itself is
    truthy) and the class attribute (``DeferredReceipt``, ``Receipt``)."""
    async with lane_pg.transaction(setup.conn):
        await setup.facade.push(Notice(deferred=True))
        await setup.facade.push(Notice(deferred=False))
        await setup.facade.push(DeferredReceipt(1))
        await setup.facade.push(Receipt(2))
        assert sorted(map(str, (row.data for row in await setup.rows()))) == [
            str({"deferred": False}),
            str({"order": 2}),
        ]
    assert len(await setup.rows()) == 4


def test_an_after_commit_that_is_not_a_bool_is_refused_TX_13() -> None:
    @dataclass
    class Muddled(Job):
        job_name = "Muddled"

        def after_commit(self) -> bool:  # type: ignore[override]  # a method, no @property
            return True

    with pytest.raises(ConfigurationError, match=r"Muddled\.after_commit must be a bool"):
        Muddled().dispatch_after_commit()


# -- TX-9 --------------------------------------------------------------------------------


async def test_declared_delay_counts_from_the_commit_TX_9(deferred: Setup) -> None:
    assert deferred.clock is not None
    pushed_at = deferred.clock.now
    async with lane_pg.transaction(deferred.conn):
        await deferred.facade.push(Slow(1))
        deferred.clock.now = pushed_at + timedelta(seconds=2)  # the commit, 2 s later
    [row] = await deferred.rows()
    assert row.available_at == pushed_at + timedelta(seconds=62)


async def test_declared_delay_counts_from_the_commit_on_the_same_database_TX_9_A24(
    shared: Setup,
) -> None:
    """A24 writes the row inside the transaction; right after the commit its declared delay
    is counted again from then. An explicit delay is left as pushed."""
    conn = shared.conn
    pushed_at = await scalar(conn, "SELECT clock_timestamp()")
    async with lane_pg.transaction(conn):
        declared = await shared.facade.push(Slow(1))
        [*bulk] = await shared.facade.bulk([Slow(2), Slow(3)])
        explicit = await shared.facade.later(timedelta(seconds=5), Slow(4))

        async def two_seconds_on() -> bool:  # the commit, about 2 s after the pushes
            late = pushed_at + timedelta(seconds=2)
            return bool(await scalar(conn, "SELECT clock_timestamp() >= $1", late))

        await eventually(two_seconds_on, timeout=10, interval=0.05)
    committed_by = await scalar(conn, "SELECT clock_timestamp()")
    due = {row.id: row.available_at for row in await shared.rows()}
    for job_id in (declared, *bulk):
        assert pushed_at + timedelta(seconds=62) <= due[job_id]
        assert due[job_id] <= committed_by + timedelta(seconds=60)
    assert due[explicit] < pushed_at + timedelta(seconds=6)  # from the push, not the commit
    assert names(shared.events) == ["JobQueueing", "JobQueued"] * 4


async def test_an_explicit_time_is_carried_through_TX_9(deferred: Setup) -> None:
    explicit = datetime.now(UTC) + timedelta(minutes=5)
    async with lane_pg.transaction(deferred.conn):
        await deferred.facade.push_later(Slow(2), explicit)
    [row] = await deferred.rows()
    # The store's clock is the test's fixed one (a little behind the real clock the
    # driver turns the time into a delay with): the time, not push time + Job.delay.
    assert explicit - timedelta(seconds=5) < row.available_at <= explicit


# -- TX-10, UNIQ-3, UNIQ-4 ---------------------------------------------------------------


async def test_deferred_push_unique_true_then_false_TX_10(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        assert await setup.facade.push_unique(Report("c")) is True
        assert await setup.facade.push_unique(Report("c")) is False
    assert names(setup.events) == ["UniqueJobSkipped", "JobQueueing", "JobQueued"]
    assert [row.data for row in await setup.rows()] == [{"account": "c"}]
    assert await setup.facade.push_unique(Report("c")) is False  # the lock stays (TTL)


async def test_a_refused_commit_frees_the_lock_TX_10(setup: Setup) -> None:
    await setup.conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS deferred_check"
        " (id int, CONSTRAINT once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(UNIQUE_VIOLATION):
        async with lane_pg.transaction(setup.conn):
            assert await setup.facade.push_unique(Report("d")) is True
            await setup.conn.execute("INSERT INTO deferred_check VALUES (1), (1)")
    assert setup.events == [] and await setup.rows() == []
    assert await setup.facade.push_unique(Report("d")) is True


class FailingAtCommit(BackendDriver):
    """A driver whose writes fail (the store went away between push and commit)."""

    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        raise ConnectionError("the store went away")


async def test_a_failed_write_at_commit_frees_the_lock_UNIQ_3(deferred: Setup) -> None:
    good = deferred.facade.driver()
    deferred.facade.set_driver(FailingAtCommit(deferred.backend, "memory"))
    with pytest.raises(ConnectionError):
        async with lane_pg.transaction(deferred.conn):
            assert await deferred.facade.push_unique(Report("e")) is True
    deferred.facade.set_driver(good)
    assert await deferred.facade.push_unique(Report("e")) is True


async def test_a_reservation_lost_before_commit_still_pushes_with_a_warning_UNIQ_4(
    pg_dsn: str, conn: Any, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock expires at unique_for even while the transaction is open (TX-10); another
    push takes it; the commit still writes the job (the call said True) and warns."""
    memory = MemoryBackend()  # the real clock: the 200 ms TTL runs out on its own
    facade, seen = _facade(memory, "memory", queue_name)
    assert isinstance(memory.dedup, Dedup)
    key = f"ShortReport:{queue_name}:a"
    with caplog.at_level(logging.WARNING, logger="lane_pg.facade"):
        async with lane_pg.transaction(conn):
            assert await facade.push_unique(ShortReport("a")) is True

            async def taken() -> bool:
                return await memory.reserve_deduplication_key(queue_name, key, "other", 60)

            await eventually(taken)
    rows = (await memory.list_jobs(queue_name, ALL_STATES, limit=10)).items
    assert [row.data for row in rows] == [{"account": "a"}]
    assert any(key in record.getMessage() for record in caplog.records)
    assert names(seen) == ["JobQueueing", "JobQueued"]
    await memory.close()


# -- TX-12, TX-14, the shared database ---------------------------------------------------


async def test_an_untracked_transaction_pushes_at_once_TX_12(deferred: Setup) -> None:
    async with deferred.conn.transaction():  # asyncpg's own: not lane_pg's
        await deferred.facade.push(DeferredReceipt(1))
        assert len(await deferred.rows()) == 1


async def test_unknown_connection_raises_inside_the_block_TX_14(setup: Setup) -> None:
    setup.facade.register_connection("reports", setup.facade.driver())
    setup.facade.route(DeferredReceipt, connection="archive", queue=setup.queue)
    with pytest.raises(ConfigurationError, match="archive"):
        async with lane_pg.transaction(setup.conn):
            try:
                await setup.facade.push(DeferredReceipt(1))
            except ConfigurationError:
                assert lane_pg.facade.current_transaction() is not None  # still inside
                raise
    assert await setup.rows() == []


async def test_shared_database_rollback_is_atomic_with_business_rows_A24(shared: Setup) -> None:
    table = f"orders_{uuid.uuid4().hex[:8]}"
    await shared.conn.execute(f"CREATE TEMP TABLE {table} (id int)")
    with pytest.raises(Rollback):
        async with lane_pg.transaction(shared.conn):
            await shared.conn.execute(f"INSERT INTO {table} VALUES (1)")
            await shared.facade.push(DeferredReceipt(1))
            raise Rollback
    assert await scalar(shared.conn, f"SELECT count(*) FROM {table}") == 0
    assert await shared.rows() == [] and shared.events == []
    async with lane_pg.transaction(shared.conn):
        await shared.conn.execute(f"INSERT INTO {table} VALUES (2)")
        await shared.facade.push(DeferredReceipt(2))
    assert await scalar(shared.conn, f"SELECT count(*) FROM {table}") == 1
    assert len(await shared.rows()) == 1


async def test_transaction_takes_an_asyncpg_like_connection() -> None:
    with pytest.raises(TypeError, match="asyncpg"):
        lane_pg.transaction(object())


async def test_outer_rollback_frees_a_lock_of_a_released_savepoint_TX_6(setup: Setup) -> None:
    """Laravel PR #60482: the inner savepoint committed, the outer transaction rolled back;
    the lock taken in the savepoint must not stay behind."""
    with pytest.raises(Rollback):
        async with lane_pg.transaction(setup.conn):
            async with lane_pg.transaction(setup.conn):
                assert await setup.facade.push_unique(Report("f")) is True
            raise Rollback
    assert await setup.rows() == []
    assert await setup.facade.push_unique(Report("f")) is True


async def test_bulk_defers_all_or_nothing_PUSH_6(setup: Setup) -> None:
    async with lane_pg.transaction(setup.conn):
        ids = await setup.facade.bulk([DeferredReceipt(1), DeferredReceipt(2)])
        assert len(ids) == 2 and await setup.rows() == []
    rows = await setup.rows()
    assert sorted(row.id for row in rows) == sorted(ids)
    if setup.clock is not None:  # written at commit in one bulk call, events around it
        assert names(setup.events) == ["JobQueueing"] * 2 + ["JobQueued"] * 2
    else:  # written in the transaction; each job's pair fired at commit
        assert names(setup.events) == ["JobQueueing", "JobQueued"] * 2
    with pytest.raises(Rollback):
        async with lane_pg.transaction(setup.conn):
            await setup.facade.bulk([DeferredReceipt(3), DeferredReceipt(4)])
            raise Rollback
    assert len(await setup.rows()) == 2


async def test_a_connection_already_in_an_untracked_transaction_is_refused_TX_12(
    conn: Any, deferred: Setup
) -> None:
    """Its end would only release a savepoint: deferred pushes would run before the data
    is committed. Refused, nothing pushed."""
    async with conn.transaction():
        with pytest.raises(ConfigurationError, match="already inside a transaction"):
            async with lane_pg.transaction(conn):
                await deferred.facade.push(DeferredReceipt(1))
    assert await deferred.rows() == []


async def test_an_immediate_push_to_a_new_queue_does_not_wait_for_the_transaction_A24(
    shared: Setup,
) -> None:
    """The in-transaction write creates no lane.queues row inside the transaction: an
    immediate push from the same task to the same (new) queue would wait on it for good."""
    async with lane_pg.transaction(shared.conn):
        await shared.facade.push(DeferredReceipt(1))  # in the transaction
        await asyncio.wait_for(shared.facade.push(Receipt(2)), 10)  # at once, elsewhere
        assert [row.data for row in await shared.rows()] == [{"order": 2}]
    assert len(await shared.rows()) == 2


# -- TX-11 -------------------------------------------------------------------------------


async def test_batches_and_chains_are_stored_at_once_inside_a_transaction_TX_11(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with every push deferred (the process switch) and jobs that ask for it, a
    batch and a chain are stored when dispatched: another connection sees them before the
    commit, and the rollback of the caller's transaction leaves them."""
    monkeypatch.setenv("LANE_PG_AFTER_COMMIT", "1")
    with pytest.raises(Rollback):
        async with lane_pg.transaction(setup.conn):
            batch_id = await setup.facade.batch([DeferredReceipt(1), DeferredReceipt(2)]).dispatch()
            head_id = await setup.facade.chain([DeferredReceipt(3), DeferredReceipt(4)]).dispatch()
            batch = await setup.backend.batches.find_batch(batch_id)  # the backend's own connection
            assert batch is not None and batch.total_jobs == 2
            assert await setup.backend.get_job(setup.queue, head_id) is not None
            raise Rollback
    assert len(await setup.rows()) == 3  # two batch jobs and the chain's head
    batch_events = ["JobQueueing", "JobQueueing", "JobQueued", "JobQueued"]
    assert names(setup.events) == [*batch_events, "JobQueueing", "JobQueued"]
