"""Workers through PgBouncer in transaction mode (``?pooler=transaction``), started by the
test on a port of its own in front of the test server: two worker processes drain a queue
through it exactly once, waking on a direct LISTEN connection; a worker given no direct
connection polls; migrate and the sync producer go through it too. Skipped with the reason
when Debian's ``pgbouncer`` is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.sync import Queue
from lane_pg.types import JobSpec
from tests.helpers import stop_process
from tests.worker.conftest import EFFECTS_TABLE, Workers, counts, queue_args, until

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
INSTALLED = os.path.exists(PGBOUNCER) and shutil.which("psql") is not None
JOBS = 400
DRAIN_TIMEOUT = 60.0  # a deadline for correctness, not a performance bound


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _pgbouncer_stats(port: int, user: str) -> dict[str, int]:
    """``SHOW STATS`` of the admin console (simple query protocol: psql), per database."""
    done = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "pgbouncer", "-AtF",
         "\t", "-c", "SHOW STATS"],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    stats = {}
    for line in done.stdout.splitlines():
        database, total_xact_count = line.split("\t")[:2]
        stats[database] = int(total_xact_count)
    return stats


class Bouncer:
    def __init__(self, pg_dsn: str) -> None:
        parts = urlsplit(pg_dsn)
        self.user = parts.username or "postgres"
        self.database = parts.path.lstrip("/")
        self.port = _free_port()
        self.direct = pg_dsn
        pooled = parts._replace(netloc=f"{self.user}@127.0.0.1:{self.port}")
        query = "&".join(filter(None, [parts.query, "pooler=transaction"]))
        self.pooled = urlunsplit(pooled._replace(query=query))
        # Readable by the user pgbouncer drops to when started as root (-u postgres).
        self.directory = Path(tempfile.mkdtemp(prefix="lane_pgbouncer_"))
        self.directory.chmod(0o777)
        (self.directory / "users.txt").write_text(f'"{self.user}" ""\n')
        ini = self.directory / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{self.database} = host={parts.hostname} port={parts.port or 5432}"
            f" dbname={self.database}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.directory / 'users.txt'}\n"
            f"admin_users = {self.user}\n"
            "pool_mode = transaction\n"
            # Fewer server connections than the workers' pools: transactions of different
            # clients share server connections, which is what breaks session state.
            "default_pool_size = 3\nmax_client_conn = 200\n"
            f"logfile = {self.directory / 'pgbouncer.log'}\n"
        )
        for path in self.directory.iterdir():
            path.chmod(0o666)
        argv = [PGBOUNCER, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(ini)]
        with (self.directory / "stderr").open("wb") as stderr:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
            )

    def log(self) -> str:
        return " ".join(
            (self.directory / name).read_text()
            for name in ("stderr", "pgbouncer.log")
            if (self.directory / name).exists()
        )

    async def wait_ready(self) -> None:
        for _ in range(100):
            if self.process.poll() is not None:
                raise AssertionError(f"pgbouncer exited: {self.log()}")
            try:
                conn = await asyncpg.connect(
                    urlunsplit(urlsplit(self.pooled)._replace(query="")), statement_cache_size=0
                )
            except (OSError, asyncpg.PostgresError):
                await asyncio.sleep(0.1)
                continue
            await conn.close()
            return
        raise AssertionError(f"pgbouncer did not accept connections: {self.log()}")

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest_asyncio.fixture
async def bouncer(effects_dsn: str) -> AsyncIterator[Bouncer]:
    """A PgBouncer in transaction mode in front of the test database, accepting clients."""
    if not INSTALLED:
        pytest.skip("pgbouncer or psql is not installed (Debian: apt-get install pgbouncer)")
    started = Bouncer(effects_dsn)
    try:
        await started.wait_ready()
        yield started
    finally:
        started.stop()


def _through(bouncer: Bouncer, listen_dsn: str) -> dict[str, str]:
    """A worker's environment: its backend through the pooler, LISTEN on ``listen_dsn``
    (empty: none), the test's effects written directly."""
    return {
        "LANE_PG_DSN": bouncer.pooled,
        "LANE_PG_LISTEN_DSN": listen_dsn,
        "LANE_PG_TEST_EFFECTS_DSN": bouncer.direct,
    }


async def test_two_workers_drain_through_pgbouncer_in_transaction_mode_exactly_once(
    bouncer: Bouncer,
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
) -> None:
    through = _through(bouncer, bouncer.direct)  # LISTEN cannot go through the pooler
    started = [
        workers.spawn(*queue_args(queue_name), "--concurrency", "8", env=through) for _ in range(2)
    ]
    for worker in started:
        await worker.wait_started()
    before = _pgbouncer_stats(bouncer.port, bouncer.user).get(bouncer.database, 0)
    # Added after both workers idle on LISTEN: the NOTIFYs wake them.
    added = await backend.add_jobs(queue_name, [JobSpec("record", {"n": n}) for n in range(JOBS)])

    async def drained() -> bool:
        return (await counts(db, [queue_name])).get("completed", 0) == JOBS

    await until(drained, timeout=DRAIN_TIMEOUT, interval=0.1)
    ran = await db.fetch(
        f"SELECT job_id, count(*) AS n, count(DISTINCT pid) AS pids FROM {EFFECTS_TABLE}"
        " WHERE queue = $1 GROUP BY job_id",
        queue_name,
    )
    assert sorted(row["job_id"] for row in ran) == sorted(job.id for job in added)
    assert all(row["n"] == 1 for row in ran)  # exactly once
    # Every claim and completion went through the pooler: far more transactions than jobs
    # (claims, completions, heartbeats), from both processes.
    after = _pgbouncer_stats(bouncer.port, bouncer.user)[bouncer.database]
    assert after - before >= 2 * JOBS / 16
    for worker in started:
        assert worker.alive(), worker.describe()
        assert "prepared statement" not in worker.stderr(), worker.describe()


async def test_a_worker_without_a_direct_listen_dsn_polls_through_the_pooler(
    bouncer: Bouncer,
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
) -> None:
    through = _through(bouncer, "")  # none: the worker must not LISTEN through the pooler
    worker = workers.spawn(*queue_args(queue_name), "--poll-interval", "200ms", env=through)
    await worker.wait_started()
    await backend.add_jobs(queue_name, [JobSpec("record", {"n": n}) for n in range(20)])

    async def drained() -> bool:
        return (await counts(db, [queue_name])).get("completed", 0) == 20

    await until(drained, timeout=DRAIN_TIMEOUT, interval=0.1)
    assert "polls for jobs" in worker.stderr()
    assert "LANE_PG_LISTEN_DSN" in worker.stderr()


async def test_migrate_and_the_sync_producer_go_through_the_pooler(
    bouncer: Bouncer, db: asyncpg.Connection, queue_name: str
) -> None:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "lane_pg", "migrate", "--dsn", bouncer.pooled],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "already at version" in done.stdout

    def produce() -> dict[str, int]:
        queue = Queue(bouncer.pooled, queue_name)
        try:  # more calls than psycopg's prepare threshold (5)
            for n in range(12):
                queue.add_job("record", {"n": n})
            return queue.get_job_counts()
        finally:
            queue.close()

    assert (await asyncio.to_thread(produce))["waiting"] == 12
    assert (await counts(db, [queue_name])) == {"waiting": 12}
