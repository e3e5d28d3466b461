"""Worker processes on Redis (``python -m lane_pg worker --dsn redis://...``) under
faults: a worker SIGKILLed mid-job (its lease runs out and another worker runs the job), a
drain by two workers (every job exactly once), and the Redis server restarted mid-drain
with its append-only file on (nothing acknowledged is lost, the workers reconnect and
finish). Effects are recorded in PostgreSQL (``tests/worker/apps.py``), outside the
server under test."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from redis.asyncio import Redis

from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JobOptions, JobSpec
from tests.helpers import eventually
from tests.worker.conftest import EFFECTS_TABLE, Workers, effects_dsn, queue_args

__all__ = ["effects_dsn"]  # the fixture, imported for this module

LEASE = "1"


@pytest.fixture
def queue() -> str:
    return f"rq_{uuid.uuid4().hex[:10]}"


@pytest_asyncio.fixture
async def effects(effects_dsn: str, queue: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(effects_dsn)
    try:
        yield conn
    finally:
        await conn.execute(f"DELETE FROM {EFFECTS_TABLE} WHERE queue = $1", queue)
        await conn.close()


def _spawner(url: str, effects_dsn: str, tmp_path: Path, queue: str) -> Workers:
    workers = Workers(url, tmp_path, lane_prefix=f"{queue}.")
    base_env = workers._env

    def env(unbuffered: bool, extra: dict[str, str] | None) -> dict[str, str]:
        return base_env(unbuffered, {"LANE_PG_TEST_EFFECTS_DSN": effects_dsn, **(extra or {})})

    workers._env = env  # type: ignore[method-assign]
    return workers


@pytest_asyncio.fixture
async def on_test_server(
    redis_client: Redis, prefix: str, redis_url: str
) -> AsyncIterator[tuple[RedisBackend, str]]:
    separator = "&" if "?" in redis_url else "?"
    yield (
        RedisBackend(redis_client, prefix=prefix, owns_client=False),
        (f"{redis_url}{separator}prefix={prefix}"),
    )


async def _done(conn: asyncpg.Connection, queue: str) -> dict[str, int]:
    rows = await conn.fetch(
        f"SELECT job_id, count(*) AS n FROM {EFFECTS_TABLE}"
        " WHERE queue = $1 AND note = 'done' GROUP BY job_id",
        queue,
    )
    return {row["job_id"]: row["n"] for row in rows}


async def test_the_job_of_a_killed_worker_completes_on_another(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    backend, url = on_test_server
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        pool = await workers.start_many(
            2, *queue_args(queue), "--lease", LEASE, "--concurrency", "1"
        )
        job = await backend.add_job(queue, "sleep", {"seconds": 1.5}, JobOptions(attempts=2))

        async def holder() -> str | None:
            row = await backend.get_job(queue, job.id)
            return row.worker_id if row is not None and row.state == "active" else None

        victim_id = await eventually(holder, timeout=10)
        [victim] = [w for w in pool if w.worker_id == victim_id]
        victim.kill()  # SIGKILL in the middle of the 1.5 s sleep

        async def completed() -> bool:
            row = await backend.get_job(queue, job.id)
            return row is not None and row.state == "completed"

        await eventually(completed, timeout=20)
        row = await backend.get_job(queue, job.id)
        assert row is not None
        assert (row.attempts_started, row.stalled_count) == (2, 1)
        assert row.worker_id != victim_id
        assert await _done(effects, queue) == {job.id: 1}
    finally:
        workers.close()


async def test_two_workers_drain_every_job_exactly_once(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    backend, url = on_test_server
    jobs = await backend.add_jobs(queue, [JobSpec("record", {"n": n}) for n in range(300)])
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        runs = [workers.spawn(*queue_args(queue), "--burst") for _ in range(2)]
        for worker in runs:
            assert await worker.wait_exit(timeout=60) == 0, worker.describe()
    finally:
        workers.close()
    assert await _done(effects, queue) == {job.id: 1 for job in jobs}
    counts = await backend.get_job_counts(queue)
    assert counts["completed"] == 300 and counts["waiting"] == counts["active"] == 0


# ---------------------------------------------------------------- a restarted server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class OwnServer:
    """A redis-server of the test's own, on a free port, with AOF (fsync always)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--maxmemory-policy",
                "noeviction",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[OwnServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the restart test starts its own")
    server = OwnServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def test_a_redis_restart_mid_drain_loses_no_job(
    own_server: OwnServer,
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    url = f"redis://127.0.0.1:{own_server.port}/0"
    client = Redis.from_url(url)
    backend = RedisBackend(client, prefix="lane")
    total = 400
    jobs = await backend.add_jobs(
        queue, [JobSpec("sleep", {"seconds": 0.01}, JobOptions(attempts=5)) for _ in range(total)]
    )
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        for _ in range(2):
            workers.spawn(*queue_args(queue), "--lease", "2", "--concurrency", "4")

        async def some_done() -> bool:
            return len(await _done(effects, queue)) >= 40

        await eventually(some_done, timeout=30)
        own_server.kill()  # SIGKILL: only the append-only file survives
        await asyncio.sleep(0.5)
        own_server.start()

        async def all_done() -> bool:
            return len(await _done(effects, queue)) == total

        await eventually(all_done, timeout=90, interval=0.2)

        async def all_completed() -> bool:
            counts = await backend.get_job_counts(queue)
            return counts["completed"] == total

        await eventually(all_completed, timeout=30)
    finally:
        workers.close()
        await backend.close()
    done = await _done(effects, queue)
    assert set(done) == {job.id for job in jobs}  # none lost
    # At least once: a job that finished while the server died may run twice; no more
    # than the workers' concurrency could have held at the kill.
    assert sum(n - 1 for n in done.values()) <= 8


async def test_a_script_flush_mid_drain_costs_reloads_not_jobs(
    own_server: OwnServer,
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """The server forgets every script (as after a restart or a failover) while two
    workers drain: their next calls answer NOSCRIPT, load the script again and go on."""
    url = f"redis://127.0.0.1:{own_server.port}/0"
    client = Redis.from_url(url)
    backend = RedisBackend(client, prefix="lane")
    total = 300
    jobs = await backend.add_jobs(
        queue, [JobSpec("sleep", {"seconds": 0.01}) for _ in range(total)]
    )
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        runs = [workers.spawn(*queue_args(queue), "--concurrency", "1") for _ in range(2)]

        async def some_done() -> bool:
            return len(await _done(effects, queue)) >= 30

        await eventually(some_done, timeout=30)
        await client.script_flush()
        assert len(await _done(effects, queue)) < total  # flushed mid-drain

        async def all_done() -> bool:
            return len(await _done(effects, queue)) == total

        await eventually(all_done, timeout=60, interval=0.2)
        assert all(worker.alive() for worker in runs)
    finally:
        workers.close()
        await backend.close()
    assert await _done(effects, queue) == {job.id: 1 for job in jobs}
