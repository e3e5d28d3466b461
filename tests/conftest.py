"""Session-wide test infrastructure: the migrated PostgreSQL DSN, one shared backend, and
per-test queue names.

Tests isolate by queue name, so one migrated schema on the test database serves every
test of a run (``migrate`` is idempotent and serialised by an advisory lock), and one
``PostgresBackend`` (one pool) serves every test that does not need a connection of its
own.

Under pytest-xdist each worker process (``gw0``, ``gw1``, ...) gets a database of its own
on the server of ``LANE_PG_TEST_DSN``, named ``<database>_<worker>``: queue names keep tests
apart, but global maintenance (pruning, stalled recovery, leadership, vacuum, repeat
ticks) and server-wide views do not look at queue names. ``pytest_configure`` points
``LANE_PG_TEST_DSN`` at it before any test module is imported, so every fixture, module
constant and spawned process (which inherit the environment or are handed ``pg_dsn``)
uses the worker's database; ``pytest_unconfigure`` drops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import pytest
import pytest_asyncio

from lane_pg.postgres.backend import PostgresBackend

DEFAULT_TEST_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_TEST_REDIS = "redis://127.0.0.1:6379/0"
_WORKER_DATABASE = "lane_pg_worker_database"  # config attribute: (server DSN, database)


def database_of(dsn: str) -> str:
    """The database a DSN names."""
    head = dsn.partition("?")[0]
    return head.rsplit("/", 1)[1] if head.count("/") > 2 else "postgres"


def recreate(server_dsn: str, name: str, *, create: bool) -> None:
    """Drop database ``name`` on the server of ``server_dsn`` (connections to it ended), and
    create it empty again when ``create``."""
    import psycopg

    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')
            conn.execute(f'ALTER DATABASE "{name}" {NO_COMMIT_FLUSH}')


NO_COMMIT_FLUSH = "SET synchronous_commit = off"
"""Set on every database the tests make: a commit returns before its WAL reaches the disk.
A test database need not survive a crash of the server, and the suite commits some
hundred thousand times; a commit took 310 us with the flush and 190 us without it on
this machine (500 one-row inserts). Nothing here changes what a commit means to other
sessions: they see it at once either way."""


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker runs on a database of its own (see the module docstring); a run
    without xdist (or with ``-n 0``) uses ``LANE_PG_TEST_DSN`` itself."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    server = os.environ.get("LANE_PG_TEST_DSN", DEFAULT_TEST_DSN)
    name = f"{database_of(server)}_{worker}"
    recreate(server, name, create=True)  # a crashed run's leftover goes first
    setattr(config, _WORKER_DATABASE, (server, name))
    os.environ["LANE_PG_TEST_DSN"] = with_database(server, name)


def pytest_unconfigure(config: pytest.Config) -> None:
    made: tuple[str, str] | None = getattr(config, _WORKER_DATABASE, None)
    if made is not None:
        server, name = made
        os.environ["LANE_PG_TEST_DSN"] = server
        recreate(server, name, create=False)
    drop_spare_databases(os.environ.get("LANE_PG_TEST_DSN", DEFAULT_TEST_DSN))


def _migrate(dsn: str) -> int:
    from lane_pg.postgres.schema import migrate

    return asyncio.run(migrate(dsn, schema="lane"))


def migrate_lane(dsn: str) -> int:
    """Migrate the ``lane`` schema of ``dsn`` from any thread or fixture (in a thread of its
    own with its own event loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_migrate, dsn).result()


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test database DSN with the ``lane`` schema migrated (once per session).

    The migration runs in a worker thread with its own event loop, so the fixture can be
    requested from sync and async fixtures alike.
    """
    dsn = os.environ.get("LANE_PG_TEST_DSN", DEFAULT_TEST_DSN)
    migrate_lane(dsn)
    return dsn


@pytest_asyncio.fixture(scope="session")
async def pg_backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    """One ``PostgresBackend`` for the whole session: opening a pool (and checking the
    schema version) per test cost ~2.1 s of the conformance suite's ~8.7 s. Tests that use
    it must not close it or change its pool's sessions; they isolate by queue name."""
    backend = await PostgresBackend.connect(pg_dsn, schema="lane")
    try:
        yield backend
    finally:
        closing = asyncio.ensure_future(backend.close())
        done, _ = await asyncio.wait({closing}, timeout=30)
        if not done:
            # A connection some test took from this pool and never gave back kept close()
            # waiting (seen in full runs on a loaded machine): say so, and end it.
            logging.getLogger("tests").error(
                "the session's PostgresBackend did not close within 30 s: a connection of"
                " its pool was never released; terminated"
            )
            backend.pool.terminate()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(closing, 10)


@pytest.fixture(scope="session")
def redis_url() -> str:
    return os.environ.get("LANE_PG_TEST_REDIS", DEFAULT_TEST_REDIS)


@pytest.fixture
def queue_name() -> str:
    """A fresh queue name, unique per test (and per concurrent run)."""
    return f"t_{uuid.uuid4().hex[:12]}"


NewDatabase = Callable[[], Awaitable[str]]


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database (keeps host, user and query options)."""
    head, sep, query = dsn.partition("?")
    base = head.rsplit("/", 1)[0] if head.count("/") > 2 else head
    return f"{base}/{database}{sep}{query}"


def admin_dsn() -> str:
    return os.environ.get("LANE_PG_TEST_DSN", DEFAULT_TEST_DSN)


_SPARE_DATABASES: list[str] = []
"""Databases a test of this process is done with, emptied again before the next one gets
them: ``DROP DATABASE`` forces a checkpoint of the whole server (``checkpoints_req`` + 1
each), 0.4 s under the suite's load for every database a test made, and it stalls the
other xdist workers' writes while it flushes. Dropped at the end of the session."""

_EMPTY_DATABASE = r"""
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN SELECT nspname FROM pg_namespace
        WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
          AND nspname NOT LIKE 'pg\_temp\_%' AND nspname NOT LIKE 'pg\_toast\_temp\_%'
    LOOP
        EXECUTE format('DROP SCHEMA %I CASCADE', name);
    END LOOP;
END $$;
CREATE SCHEMA public AUTHORIZATION pg_database_owner;
GRANT USAGE ON SCHEMA public TO PUBLIC;
"""
"""What ``CREATE DATABASE`` gives (PostgreSQL 15: ``public`` owned by the database owner,
usable by everyone), from a database a test used."""


async def create_database(created: list[str]) -> str:
    """A fresh empty database on the test server; its name is appended to ``created``."""
    admin = await asyncpg.connect(admin_dsn())
    try:
        if _SPARE_DATABASES:
            name = _SPARE_DATABASES.pop()
            await admin.execute(f"ALTER DATABASE {name} RESET ALL")
            await admin.execute(f"ALTER DATABASE {name} {NO_COMMIT_FLUSH}")
            conn = await asyncpg.connect(with_database(admin_dsn(), name))
            try:
                await conn.execute(_EMPTY_DATABASE)
            finally:
                await conn.close()
        else:
            name = f"lane_db_{uuid.uuid4().hex[:12]}"
            await admin.execute(f"CREATE DATABASE {name}")
            await admin.execute(f"ALTER DATABASE {name} {NO_COMMIT_FLUSH}")
    finally:
        await admin.close()
    created.append(name)
    return with_database(admin_dsn(), name)


async def release_databases(created: list[str]) -> None:
    """Done with ``created``: their sessions end now (a worker process a test left behind
    cannot write into the next test's database), and they are emptied for reuse."""
    admin = await asyncpg.connect(admin_dsn())
    try:
        for name in created:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = $1 AND pid <> pg_backend_pid()",
                name,
            )
            await _wait_for_no_sessions(admin, name)
            _SPARE_DATABASES.append(name)
        created.clear()
    finally:
        await admin.close()


async def _wait_for_no_sessions(admin: asyncpg.Connection, name: str) -> None:
    """``pg_terminate_backend`` only signals; ``ALTER DATABASE`` and a reuse want them gone
    (what ``DROP DATABASE ... WITH (FORCE)`` waited for)."""
    for _ in range(500):
        sessions = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name
        )
        if sessions == 0:
            return
        await asyncio.sleep(0.01)
    raise RuntimeError(f"database {name}: sessions outlived pg_terminate_backend for 5 s")


def drop_spare_databases(server_dsn: str) -> None:
    for name in _SPARE_DATABASES:
        recreate(server_dsn, name, create=False)
    _SPARE_DATABASES.clear()


FreshSchema = Callable[[], Awaitable[str]]


@pytest.fixture
def fresh_schema(pg_dsn: str) -> Iterator[FreshSchema]:
    """Factory of fresh migrated schemas on the test database, all dropped after the test:
    for a worker of every queue (on the shared ``lane`` schema it would claim other tests'
    jobs) or a second PostgreSQL store (failover). A sync fixture, so an async fixture can
    ask for it on demand (``request.getfixturevalue``)."""
    from lane_pg.postgres.schema import migrate

    created: list[str] = []

    async def make() -> str:
        name = f"lane_t_{uuid.uuid4().hex[:12]}"
        created.append(name)
        await migrate(pg_dsn, schema=name)
        return name

    yield make

    async def drop() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            for name in created:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await conn.close()

    if created:
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(asyncio.run, drop()).result()


@pytest.fixture
async def new_db() -> AsyncIterator[NewDatabase]:
    """Factory of fresh empty databases, emptied for reuse after the test (for tests that
    need their own schema state: migrations, CLI, examples)."""
    created: list[str] = []
    yield lambda: create_database(created)
    await release_databases(created)
