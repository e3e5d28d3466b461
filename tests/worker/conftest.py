"""Fixtures for the real-process worker tests.

``workers`` spawns ``python -m lane_pg worker ...`` as separate OS processes (``LANE_PG_DSN``
set to the test database, the repository root on ``PYTHONPATH``), with stdout and stderr
captured to files, waits for the startup line with a deadline, and kills whatever is still
running at teardown. The processes are forked by a fork server that imported the library
once (tests/worker/forkserver.py; ``LANE_PG_TEST_FORKSERVER=0`` starts each with a fresh
interpreter instead). Every worker is started with explicit ``--queue`` options (or an app
whose lanes are per-test names), so it can never claim another test's jobs.

They run on a database of their own (``pg_dsn`` is overridden here, so ``fresh_schema``
and every fixture below follow): each worker process leads the global maintenance, whose
passes and log lines span every queue of the database, so other tests' leftovers (jobs a
CLI or conformance test left active, recovered and logged as stalled by whichever worker
leads next) must not be in it.

``public.worker_effects`` is created once per database: the test app's processors insert
one row per run there. Each test's queues (every queue whose name starts with the test's
``queue_name``) and their effect rows are deleted afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import asyncpg
import psycopg
import pytest
import pytest_asyncio

from lane_pg.backend.leader import MAINTENANCE_ROLE
from lane_pg.postgres.backend import PostgresBackend
from tests.conftest import database_of, migrate_lane, recreate, with_database
from tests.helpers import eventually
from tests.worker.forkserver import ForkedProcess, ForkServer

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
APP = "tests.worker.apps:app"
LANES_APP = "tests.worker.apps:lanes_app"
EFFECTS_TABLE = "public.worker_effects"
LANE_PREFIX_ENV = "LANE_PG_TEST_LANE_PREFIX"
STARTUP_TIMEOUT = 20.0  # seconds for a worker process to print its startup line
EXIT_TIMEOUT = 20.0

_EFFECTS_DDL = f"""
CREATE TABLE IF NOT EXISTS {EFFECTS_TABLE} (
    job_id  text NOT NULL,
    queue   text NOT NULL,
    pid     integer NOT NULL,
    attempt integer,
    note    text NOT NULL DEFAULT 'done',
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS worker_effects_queue_idx ON {EFFECTS_TABLE} (queue, job_id);
"""


@dataclass
class WorkerProcess:
    """One ``python -m lane_pg worker`` process and its captured output."""

    worker_id: str
    argv: list[str]
    proc: subprocess.Popen[bytes] | ForkedProcess
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def send(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait(timeout=10)

    def describe(self) -> str:
        return (
            f"worker {self.worker_id} (pid {self.pid}, rc {self.returncode})\n"
            f"argv: {' '.join(self.argv)}\n"
            f"--- stdout ---\n{self.stdout()[-3000:]}\n--- stderr ---\n{self.stderr()[-3000:]}"
        )

    async def wait_started(self, timeout: float = STARTUP_TIMEOUT) -> None:  # noqa: ASYNC109
        marker = f"worker {self.worker_id} started"

        def started() -> bool:
            if marker in self.stdout():
                return True
            if not self.alive():
                raise AssertionError(f"worker exited before its startup line:\n{self.describe()}")
            return False

        try:
            await eventually(started, timeout=timeout, interval=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from exc

    async def wait_refused(self, timeout: float = EXIT_TIMEOUT) -> int:  # noqa: ASYNC109
        """Wait for a worker that must not start to exit; fail at once if it started."""
        marker = f"worker {self.worker_id} started"

        def exited() -> bool:
            if marker in self.stdout():
                raise AssertionError(f"the worker started instead of refusing:\n{self.describe()}")
            return not self.alive()

        try:
            await eventually(exited, timeout=timeout, interval=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from exc
        code = self.proc.returncode
        assert code is not None
        return code

    async def wait_exit(self, timeout: float = EXIT_TIMEOUT) -> int:  # noqa: ASYNC109
        try:
            await eventually(lambda: not self.alive(), timeout=timeout, interval=0.02)
        except AssertionError as exc:
            raise AssertionError(f"worker still running: {exc}\n{self.describe()}") from exc
        code = self.proc.returncode
        assert code is not None
        return code


@dataclass
class Workers:
    """Spawns worker processes for one test; ``close`` kills the ones still running."""

    dsn: str
    directory: Path
    lane_prefix: str
    forks: ForkServer | None = None
    spawned: list[WorkerProcess] = field(default_factory=list)

    def _env(self, unbuffered: bool, extra: dict[str, str] | None) -> dict[str, str]:
        env = dict(os.environ)
        env["LANE_PG_DSN"] = self.dsn
        env.pop("LANE_PG_SCHEMA", None)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        env[LANE_PREFIX_ENV] = self.lane_prefix
        if unbuffered:
            env["PYTHONUNBUFFERED"] = "1"
        else:
            env.pop("PYTHONUNBUFFERED", None)
        env.update(extra or {})
        return env

    def spawn(
        self,
        *args: str,
        app: str | None = APP,
        worker_id: str | None = None,
        unbuffered: bool = True,
        env: dict[str, str] | None = None,
        with_worker_id: bool = True,
    ) -> WorkerProcess:
        """Start ``python -m lane_pg worker [--app APP] [--worker-id ID] ARGS...``."""
        wid = worker_id or f"tw-{uuid.uuid4().hex[:8]}"
        argv = [sys.executable, "-m", "lane_pg", "worker"]
        if app is not None:
            argv += ["--app", app]
        if with_worker_id:
            argv += ["--worker-id", wid]
        argv += list(args)
        n = len(self.spawned)
        out = self.directory / f"worker{n}-{wid}.out"
        err = self.directory / f"worker{n}-{wid}.err"
        proc: subprocess.Popen[bytes] | ForkedProcess
        if self.forks is not None and unbuffered:  # the fork server's output is unbuffered
            environment = self._env(unbuffered, env)
            proc = self.forks.spawn(argv[3:], environment, self.directory, out, err)
        else:
            with out.open("wb") as stdout, err.open("wb") as stderr:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    cwd=self.directory,
                    env=self._env(unbuffered, env),
                )
        worker = WorkerProcess(wid, argv, proc, out, err)
        self.spawned.append(worker)
        return worker

    async def start(self, *args: str, **kwargs: object) -> WorkerProcess:
        """``spawn`` and wait for the startup line."""
        worker = self.spawn(*args, **kwargs)  # type: ignore[arg-type]
        await worker.wait_started()
        return worker

    async def start_many(self, count: int, *args: str) -> list[WorkerProcess]:
        """Spawn ``count`` workers at once, then wait until every one has started."""
        started = [self.spawn(*args) for _ in range(count)]
        for worker in started:
            await worker.wait_started()
        return started

    async def run(
        self,
        *args: str,
        timeout: float = EXIT_TIMEOUT,  # noqa: ASYNC109
        **kwargs: object,
    ) -> WorkerProcess:
        """Spawn and wait for the process to exit on its own (burst mode, errors)."""
        worker = self.spawn(*args, **kwargs)  # type: ignore[arg-type]
        await worker.wait_exit(timeout)
        return worker

    async def refused(
        self,
        *args: str,
        timeout: float = EXIT_TIMEOUT,  # noqa: ASYNC109
        **kwargs: object,
    ) -> WorkerProcess:
        """Spawn a worker that must refuse to start; wait for its exit."""
        worker = self.spawn(*args, **kwargs)  # type: ignore[arg-type]
        await worker.wait_refused(timeout)
        return worker

    def close(self) -> None:
        for worker in self.spawned:
            if worker.alive():
                print(f"killing leftover {worker.describe()}")
            worker.kill()
        for worker in self.spawned:
            print(worker.describe())


def queue_args(*queues: str) -> list[str]:
    """``--queue Q`` for each queue."""
    args: list[str] = []
    for queue in queues:
        args += ["--queue", queue]
    return args


# ------------------------------------------------------------------ database fixtures


@pytest.fixture(scope="session")
def pg_dsn(pg_dsn: str) -> Iterator[str]:
    """The worker tests' own migrated database beside the test database (see the module
    docstring), dropped at the end: ``<database>_w`` under xdist, whose worker databases
    are already the run's own, else ``<database>_w<pid>``."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    name = f"{database_of(pg_dsn)}_w{'' if worker else os.getpid()}"
    recreate(pg_dsn, name, create=True)
    dsn = with_database(pg_dsn, name)
    try:
        migrate_lane(dsn)
        yield dsn
    finally:
        recreate(pg_dsn, name, create=False)


@pytest.fixture(scope="session")
def effects_dsn(pg_dsn: str) -> str:
    """The test DSN, with ``public.worker_effects`` created (once, under a lock)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('lane_pg tests worker_effects'))")
        conn.execute(_EFFECTS_DDL)
    return pg_dsn


async def _delete_queues(conn: asyncpg.Connection, prefix: str) -> None:
    pattern = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
    tables = [
        row["table_name"]
        for row in await conn.fetch(
            "SELECT c.table_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = 'lane' AND c.column_name = 'queue'"
            " AND t.table_type = 'BASE TABLE' AND c.table_name <> 'jobs'"
        )
    ]
    async with conn.transaction():
        if await conn.fetchval("SELECT to_regclass('lane.job_logs') IS NOT NULL"):
            await conn.execute(
                "DELETE FROM lane.job_logs WHERE job_key IN"
                " (SELECT key FROM lane.jobs WHERE queue LIKE $1)",
                pattern,
            )
        await conn.execute("DELETE FROM lane.jobs WHERE queue LIKE $1", pattern)
        for table in tables:
            await conn.execute(f'DELETE FROM lane."{table}" WHERE queue LIKE $1', pattern)
        await conn.execute("DELETE FROM lane.queues WHERE name LIKE $1", pattern)
        await conn.execute(f"DELETE FROM {EFFECTS_TABLE} WHERE queue LIKE $1", pattern)


@pytest_asyncio.fixture
async def db(effects_dsn: str, queue_name: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection for the test; deletes the test's queues afterwards."""
    conn = await asyncpg.connect(effects_dsn)
    try:
        yield conn
    finally:
        await _delete_queues(conn, queue_name)
        await conn.close()


@pytest_asyncio.fixture
async def backend(effects_dsn: str, db: asyncpg.Connection) -> AsyncIterator[PostgresBackend]:
    pg = await PostgresBackend.connect(effects_dsn, min_size=1, max_size=4)
    try:
        yield pg
    finally:
        await pg.close()


@pytest.fixture(scope="session")
def fork_server() -> Iterator[ForkServer | None]:
    """The session's fork server (None with ``LANE_PG_TEST_FORKSERVER=0``)."""
    if os.environ.get("LANE_PG_TEST_FORKSERVER", "1") == "0":
        yield None
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    server = ForkServer(env)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def workers(
    effects_dsn: str,
    db: asyncpg.Connection,
    queue_name: str,
    tmp_path: Path,
    fork_server: ForkServer | None,
) -> Iterator[Workers]:
    """Worker-process spawner; torn down (leftovers killed) before the queues are deleted."""
    spawner = Workers(effects_dsn, tmp_path, lane_prefix=f"{queue_name}.", forks=fork_server)
    try:
        yield spawner
    finally:
        spawner.close()


@pytest_asyncio.fixture
async def maintenance_held(backend: PostgresBackend, queue_name: str) -> AsyncIterator[str]:
    """The test holds the workers' maintenance leadership (a 2-minute lease, given up
    afterwards), so no worker it starts runs maintenance passes: a promotion pass would
    wake the worker as well, and then a test could not tell what woke it."""
    holder = f"test:{queue_name}"
    leader = backend.leader()

    async def held() -> bool:
        return await leader.acquire_leadership(MAINTENANCE_ROLE, holder, 120)

    await until(held, timeout=10)  # a killed worker's lease lapses within a second
    try:
        yield holder
    finally:
        await leader.resign_leadership(MAINTENANCE_ROLE, holder)


# ------------------------------------------------------------------ small queries


async def until(
    predicate: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - a polling deadline
    interval: float = 0.02,
) -> T:
    """``tests.helpers.eventually`` for an async predicate, typed: polls until the predicate
    returns a truthy value and returns it, or fails after ``timeout`` seconds."""
    result: T = await eventually(cast(Callable[[], Any], predicate), timeout, interval)
    return result


async def effects(conn: asyncpg.Connection, queue: str) -> list[asyncpg.Record]:
    """Every effect row of ``queue`` in insertion time order."""
    return list(
        await conn.fetch(
            f"SELECT job_id, pid, attempt, note, at FROM {EFFECTS_TABLE}"
            " WHERE queue = $1 ORDER BY at",
            queue,
        )
    )


async def job_row(conn: asyncpg.Connection, queue: str, job_id: str) -> asyncpg.Record | None:
    row: asyncpg.Record | None = await conn.fetchrow(
        "SELECT * FROM lane.jobs WHERE queue = $1 AND id = $2", queue, job_id
    )
    return row


async def state_of(conn: asyncpg.Connection, queue: str, job_id: str) -> str | None:
    state: str | None = await conn.fetchval(
        "SELECT state FROM lane.jobs WHERE queue = $1 AND id = $2", queue, job_id
    )
    return state


async def wait_for_state(
    conn: asyncpg.Connection,
    queue: str,
    job_id: str,
    *states: str,
    timeout: float = 15.0,  # noqa: ASYNC109 - a polling deadline
) -> str:
    """Poll until the job is in one of ``states``; return that state."""

    async def reached() -> str | None:
        state = await state_of(conn, queue, job_id)
        return state if state in states else None

    return await until(reached, timeout=timeout, interval=0.05)


async def counts(conn: asyncpg.Connection, queues: Sequence[str]) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT state, count(*) AS n FROM lane.jobs WHERE queue = ANY($1::text[]) GROUP BY 1",
        list(queues),
    )
    return {row["state"]: row["n"] for row in rows}


def stop(worker: WorkerProcess, signum: int = signal.SIGTERM) -> None:
    worker.send(signum)
