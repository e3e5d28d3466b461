"""Worker processes on Redis (``python -m lane_pg worker --dsn redis://...``) as a user runs
them, beside ``test_worker_faults.py``: deduplication with two workers and two producer
processes (simple owners, TTL owners, a debounce window), a rate limit and a max-active
ceiling shared by two workers, and a Redis server that stops answering for a few seconds
under a worker. Effects are recorded in PostgreSQL (``tests/worker/apps.py``), outside
the server under test; each test has a key prefix (or a server) of its own."""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis
from redis.exceptions import TimeoutError as RedisTimeoutError

from lane_pg.backend.url import connect
from lane_pg.redis.backend import RedisBackend
from lane_pg.redis.server import READ_TIMEOUT
from lane_pg.types import JobRow, JobSpec
from tests.helpers import eventually
from tests.redis.test_worker_faults import (
    OwnServer,
    _done,
    _spawner,
    effects,
    on_test_server,
    own_server,
    queue,
)
from tests.test_cli_queue_commands import cli
from tests.worker.conftest import (
    EFFECTS_TABLE,
    REPO_ROOT,
    WorkerProcess,
    effects_dsn,
    queue_args,
)

# The fixtures, imported for this module.
__all__ = ["effects", "effects_dsn", "on_test_server", "own_server", "queue"]


# ---------------------------------------------------------------- producer processes


class Producers:
    """Producer processes (tests/redis/producer.py), one per spec, started and connected
    first; ``go`` lets them add together and returns each one's answers."""

    def __init__(self, url: str, queue: str, tmp_path: Path) -> None:
        self.url, self.queue = url, queue
        self.go_file = tmp_path / f"go-{os.urandom(4).hex()}"
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, *specs: dict[str, Any]) -> Producers:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
        )
        for spec in specs:
            self.procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "tests.redis.producer",
                    self.url,
                    self.queue,
                    str(self.go_file),
                    json.dumps(spec),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    cwd=REPO_ROOT,
                )
            )
        for proc in self.procs:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.strip() == b"ready", line
        return self

    async def go(self) -> list[list[Any]]:
        self.go_file.touch()
        answers = []
        for proc in self.procs:
            out, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0, err.decode()
            answers.append(json.loads(out))
        return answers

    async def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def _produce(
    url: str, queue: str, tmp_path: Path, specs: list[dict[str, Any]]
) -> list[list[Any]]:
    """Start one producer per spec, let them add together, return their answers."""
    producers = Producers(url, queue, tmp_path)
    try:
        await producers.start(*specs)
        return await producers.go()
    finally:
        await producers.close()


async def _notes(conn: asyncpg.Connection, queue: str) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            f"SELECT job_id, pid, note, at FROM {EFFECTS_TABLE} WHERE queue = $1 ORDER BY at",
            queue,
        )
    )


async def _completed(backend: RedisBackend, queue: str, job_id: str) -> JobRow:
    async def done() -> JobRow | None:
        row = await backend.get_job(queue, job_id)
        return row if row is not None and row.state == "completed" else None

    row: JobRow = await eventually(done, timeout=20)
    return row


# ---------------------------------------------------------------- deduplication


async def test_a_simple_owner_deduplicates_two_producers_while_two_workers_run_it(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """Adds with the owner's id while it runs return the owner and store nothing; once it
    completed, the next add owns the id, and the racing adds of two producers all get
    that one new owner. Each owner runs once."""
    backend, url = on_test_server
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    dedup = {"deduplication": {"id": "account:42"}}
    spec = {"kind": "add", "name": "record", "options": dedup, "count": 10}
    producers = Producers(url, queue, tmp_path)
    try:
        await workers.start_many(2, *queue_args(queue), "--concurrency", "2")
        await producers.start(spec, spec)
        first = await backend.add_job(queue, "announced_sleep", {"seconds": 1.0}, dedup)

        async def started(job_id: str) -> bool:
            notes = await _notes(effects, queue)
            return any(r["note"] == "started" and r["job_id"] == job_id for r in notes)

        await eventually(lambda: started(first.id), timeout=15)
        during = await producers.go()
        assert [set(ids) for ids in during] == [{first.id}, {first.id}]
        assert await backend.get_deduplication_job_id(queue, "account:42") == first.id
        await _completed(backend, queue, first.id)

        # The next owner: a long one, so that every racing add finds it still running.
        producers = await Producers(url, queue, tmp_path).start(spec, spec)
        second = await backend.add_job(queue, "announced_sleep", {"seconds": 1.0}, dedup)
        assert second.id != first.id
        await eventually(lambda: started(second.id), timeout=15)
        after = await producers.go()
        assert [set(ids) for ids in after] == [{second.id}, {second.id}]
        await _completed(backend, queue, second.id)
    finally:
        workers.close()
        await producers.close()
    assert await _done(effects, queue) == {first.id: 1, second.id: 1}
    counts = await backend.get_job_counts(queue)
    assert sum(counts.values()) == counts["completed"] == 2


async def test_a_ttl_owner_throttles_two_producers_after_it_ran(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """Throttle mode: a TTL owner blocks its id after it completed, until the TTL is over;
    then the first of the racing adds is the one new owner, and it runs once."""
    backend, url = on_test_server
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    held = {"deduplication": {"id": "report", "ttl_ms": 60_000}}
    short = {"deduplication": {"id": "digest", "ttl_ms": 1_000}}
    try:
        await workers.start_many(2, *queue_args(queue), "--concurrency", "2")
        report = await backend.add_job(queue, "record", None, held)
        digest = await backend.add_job(queue, "record", None, short)
        await _completed(backend, queue, report.id)
        await _completed(backend, queue, digest.id)

        async def digest_released() -> bool:
            return await backend.get_deduplication_job_id(queue, "digest") is None

        await eventually(digest_released, timeout=10)  # its TTL is over (server clock)
        again = {"deduplication": {"id": "digest", "ttl_ms": 60_000}}
        answers = await _produce(
            url,
            queue,
            tmp_path,
            [
                {"kind": "add", "name": "record", "options": held, "count": 10},
                {"kind": "add", "name": "record", "options": again, "count": 10},
                {"kind": "add", "name": "record", "options": again, "count": 10},
            ],
        )
        assert set(answers[0]) == {report.id}  # completed, still inside its TTL
        [new_owner] = set(answers[1]) | set(answers[2])
        assert new_owner not in (report.id, digest.id)
        assert await backend.get_deduplication_job_id(queue, "digest") == new_owner
        await _completed(backend, queue, new_owner)
    finally:
        workers.close()
    assert await _done(effects, queue) == {report.id: 1, digest.id: 1, new_owner: 1}
    assert (await backend.get_job_counts(queue))["completed"] == 3


async def test_a_debounce_window_raced_by_two_producers_runs_its_last_dispatch_once(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """Two producers dispatch into one window at once: each dispatch replaces the delayed
    one before it, so one job is left, the last stored (the greatest generated id), and
    the two workers run it once when the window ends; every other dispatch is gone."""
    backend, url = on_test_server
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    key = "debounce:record:search"
    window = {"delay_ms": 2_500, "deduplication": {"id": key, "replace_delayed": True}}
    spec = {"kind": "debounce", "name": "record", "options": window, "count": 15}
    try:
        await workers.start_many(2, *queue_args(queue), "--concurrency", "2")
        answers = await _produce(url, queue, tmp_path, [spec, spec])
        dispatched = [job_id for answer in answers for job_id, _ in answer]
        assert len(set(dispatched)) == 30
        last = max(dispatched, key=int)
        assert await backend.get_deduplication_job_id(queue, key) == last
        replaced = {replaced for answer in answers for _, replaced in answer if replaced}
        assert replaced == set(dispatched) - {last}  # each one replaced once, the last kept
        await _completed(backend, queue, last)
    finally:
        workers.close()
    assert await _done(effects, queue) == {last: 1}
    counts = await backend.get_job_counts(queue)
    assert sum(counts.values()) == counts["completed"] == 1


# ---------------------------------------------------------------- shared limits

RATE = 4
LIMITED_JOBS = 14


async def test_a_rate_limit_and_max_active_hold_across_two_workers(
    on_test_server: tuple[RedisBackend, str],
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """``limits QUEUE --rate 4/1s --max-active 2``, then two workers (four slots each)
    drain the queue: no second of the server's claim times (``processed_at``, Redis's
    TIME) holds more than 4 claims, and no more than 2 jobs ever run at once, counted from
    the runs' own start and finish records and from the active index while they run."""
    backend, url = on_test_server
    result = await cli("limits", queue, "--rate", f"{RATE}/1s", "--max-active", "2", dsn=url)
    assert result.returncode == 0, result.stderr
    jobs = await backend.add_jobs(
        queue, [JobSpec("announced_sleep", {"seconds": 0.15}) for _ in range(LIMITED_JOBS)]
    )
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    most_active = 0
    try:
        await workers.start_many(2, *queue_args(queue), "--concurrency", "4")

        async def drained() -> bool:
            nonlocal most_active
            counts = await backend.get_job_counts(queue, ["active", "completed"])
            most_active = max(most_active, counts["active"])
            return counts["completed"] == LIMITED_JOBS

        await eventually(drained, timeout=40, interval=0.01)
    finally:
        workers.close()
    assert 1 <= most_active <= 2
    rows = [await backend.get_job(queue, job.id) for job in jobs]
    claims = sorted(row.processed_at for row in rows if row is not None and row.processed_at)
    assert len(claims) == LIMITED_JOBS
    assert {row.attempts_started for row in rows if row is not None} == {1}
    second = timedelta(seconds=1)
    busiest = max(bisect.bisect_left(claims, t + second) - i for i, t in enumerate(claims))
    assert busiest <= RATE, claims

    # Runs overlapping in time, from the handlers' own records (one clock: PostgreSQL's).
    changes = sorted(
        (r["at"], 1 if r["note"] == "started" else -1)
        for r in await _notes(effects, queue)
        if r["note"] in ("started", "done")
    )
    running = peak = 0
    for _, change in changes:
        running += change
        peak = max(peak, running)
    assert 1 <= peak <= 2
    assert {r["job_id"] for r in await _notes(effects, queue)} == {job.id for job in jobs}
    assert await _done(effects, queue) == {job.id: 1 for job in jobs}


# ---------------------------------------------------------------- Redis unreachable


def _outage_lines(worker: WorkerProcess) -> list[str]:
    output = worker.stdout() + worker.stderr()
    return [line for line in output.splitlines() if "failing" in line]


def _claims_failing(worker: WorkerProcess) -> list[str]:
    return [line for line in _outage_lines(worker) if "claims failing" in line]


async def test_a_worker_rides_out_a_redis_outage_and_claims_after_it(
    own_server: OwnServer,
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """The worker's server goes away for a few seconds and comes back on its port with
    its append-only file: the worker says so (a warning for the outage, a line when claims
    work again, no traceback per poll), keeps running, and claims what is added after."""
    url = f"redis://127.0.0.1:{own_server.port}/0"
    backend = RedisBackend(Redis.from_url(url), prefix="lane")
    workers = _spawner(url, effects_dsn, tmp_path, queue)
    try:
        worker = await workers.start(*queue_args(queue), "--poll-interval", "200ms")
        before = await backend.add_jobs(queue, [JobSpec("record", {"n": n}) for n in range(3)])

        async def ran(jobs: list[JobRow]) -> bool:
            return set(await _done(effects, queue)) >= {job.id for job in jobs}

        await eventually(lambda: ran(before), timeout=15)
        for job in before:  # settled before the outage (see the test below)
            await _completed(backend, queue, job.id)
        own_server.kill()

        await eventually(lambda: _outage_lines(worker), timeout=15)
        await asyncio.sleep(1.0)  # the outage: about five polls of this worker
        assert worker.alive(), worker.describe()
        own_server.start()  # same port, same directory: the append-only file is read back

        after = await backend.add_jobs(queue, [JobSpec("record", {"n": n}) for n in range(3)])
        await eventually(lambda: ran(after), timeout=30)
        assert worker.alive(), worker.describe()
        # One warning for the outage, not one per poll.
        assert len(_claims_failing(worker)) == 1, worker.describe()
        assert "Traceback" not in worker.stdout() + worker.stderr(), worker.describe()
    finally:
        workers.close()
        await backend.close()
    assert await _done(effects, queue) == {job.id: 1 for job in before + after}


async def test_a_paused_queue_stays_paused_while_redis_stops_answering(
    own_server: OwnServer,
    effects: asyncpg.Connection,
    effects_dsn: str,
    queue: str,
    tmp_path: Path,
) -> None:
    """The server is frozen (SIGSTOP: connections stay open, nothing answers) under a worker
    of a paused queue and an open one until the worker's calls time out and it logs the
    outage, then thawed (SIGCONT). The worker lives through it;
    the paused queue's jobs are not claimed, during the freeze or after it (the pause is
    the server's, not a read the worker could miss), while a job added to the open queue
    after the thaw runs; resuming then runs the paused ones."""
    url = f"redis://127.0.0.1:{own_server.port}/0"
    backend = RedisBackend(Redis.from_url(url), prefix="lane")
    held, open_queue = queue, f"{queue}_open"
    # The worker's calls time out after 1 s, not the default 5 s (the next test checks the
    # default): the freeze lasts until they do.
    workers = _spawner(f"{url}?socket_timeout=1", effects_dsn, tmp_path, queue)
    assert own_server.proc is not None
    try:
        await backend.pause_queue(held)
        worker = await workers.start(*queue_args(held, open_queue), "--poll-interval", "200ms")
        waiting = await backend.add_jobs(held, [JobSpec("record", {"n": n}) for n in range(3)])
        first = await backend.add_job(open_queue, "record", None)
        # Settled before the freeze: a completion in flight would time out, be logged with
        # its traceback and wait for its lease (WORK-16), which is not this test's subject.
        await _completed(backend, open_queue, first.id)

        own_server.proc.send_signal(signal.SIGSTOP)
        try:
            # Frozen until the worker's calls time out and it says claims fail.
            await eventually(lambda: _claims_failing(worker), timeout=20)
            assert worker.alive(), worker.describe()
        finally:
            own_server.proc.send_signal(signal.SIGCONT)

        second = await backend.add_job(open_queue, "record", None)
        await eventually(lambda: _ran(effects, open_queue, second.id), timeout=30)
        for job in waiting:
            row = await backend.get_job(held, job.id)
            assert row is not None and (row.state, row.attempts_started) == ("waiting", 0)
        assert await _done(effects, held) == {}
        assert (await backend.get_pause_status([held])).is_paused(held)

        await backend.resume_queue(held)

        async def resumed() -> bool:
            return set(await _done(effects, held)) == {job.id for job in waiting}

        await eventually(resumed, timeout=15)
        assert worker.alive(), worker.describe()
        assert len(_claims_failing(worker)) == 1, worker.describe()  # once per outage
        assert "Traceback" not in worker.stdout() + worker.stderr(), worker.describe()
    finally:
        workers.close()
        await backend.close()
        await effects.execute(f"DELETE FROM {EFFECTS_TABLE} WHERE queue = $1", open_queue)


async def _ran(conn: asyncpg.Connection, queue: str, job_id: str) -> bool:
    return job_id in await _done(conn, queue)


async def test_a_frozen_server_times_a_call_out_instead_of_hanging_it(
    own_server: OwnServer,
) -> None:
    """A call to a frozen server raises within the read timeout lane_pg sets (whatever the
    client library's default), which is what lets a worker see the outage above; the same
    backend answers again once the server thaws. The freeze runs with a URL's own timeout
    of 1 s, which wins over lane_pg's."""
    assert own_server.proc is not None
    url = f"redis://127.0.0.1:{own_server.port}/0"
    default = await connect(url)
    try:
        assert isinstance(default, RedisBackend)
        kwargs = default.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert kwargs["socket_timeout"] == READ_TIMEOUT
    finally:
        await default.close()
    backend = await connect(f"{url}?socket_timeout=1")
    try:
        assert isinstance(backend, RedisBackend)
        kwargs = backend.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert kwargs["socket_timeout"] == 1
        await backend.get_job_counts("q")  # a connection in the pool, then the freeze
        own_server.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(RedisTimeoutError):
                await asyncio.wait_for(backend.get_job_counts("q"), READ_TIMEOUT + 10)
        finally:
            own_server.proc.send_signal(signal.SIGCONT)
        assert (await backend.get_job_counts("q"))["waiting"] == 0
        # A script's call, on the connection the scripts hold and their one watchdog timer:
        # the same error, raised in the caller's task, which is not left cancelled.
        await backend.add_job("q", "before", None)  # the queue is known: one script call
        own_server.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(RedisTimeoutError, match="within 1"):
                async with asyncio.timeout(READ_TIMEOUT + 10):
                    await backend.add_job("q", "frozen", None)
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
        finally:
            own_server.proc.send_signal(signal.SIGCONT)
        added = await backend.add_job("q", "thawed", None)
        assert (await backend.get_job("q", added.id)) == added
    finally:
        await backend.close()
