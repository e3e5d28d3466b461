"""A worker process's life as a new user meets it: which queues it serves when not told,
a second signal that stops it at once, and a database that comes up after the worker.

Real processes (``python -m lane_pg worker``) on the test database. "The server comes up
later" is a TCP forwarder of the test's own in front of the real server, that begins
listening only once the worker has said it waits: until then the worker's connects are
refused by the kernel, exactly as for a server not started yet."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobOptions, JobSpec
from tests.conftest import FreshSchema
from tests.worker.conftest import (
    Workers,
    effects,
    job_row,
    queue_args,
    until,
)

TYPED_APP = "tests.worker.typed_app"
PROCESSORS_APP = "tests.worker.apps:app"
BURST_TIMEOUT = 30.0
WAITING = "waiting for the database"


# ------------------------------------------------------------------ which queues


async def test_a_worker_without_queue_leaves_another_apps_jobs_untouched(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """No ``--queue``: the worker serves its job classes' queue, and a job of another app
    in another queue stays waiting with no attempt spent (it used to be claimed and failed
    for good as an unknown name)."""
    other = await backend.add_job(f"{queue_name}.other", "someone_elses_job", {"n": 1})
    mine = await backend.add_job(f"{queue_name}.typed", "typed.record", {})
    worker = await workers.run("--burst", app=TYPED_APP, timeout=BURST_TIMEOUT)
    assert worker.returncode == 0, worker.describe()
    assert f"queues {queue_name}.typed(priority 0" in worker.stdout(), worker.describe()

    done = await backend.get_job(mine.queue, mine.id)
    assert done is not None and done.state == "completed", done
    left = await backend.get_job(other.queue, other.id)
    assert left is not None
    assert (left.state, left.attempts_started, left.attempts_made) == ("waiting", 0, 0)
    assert left.failed_reason is None


@pytest.mark.parametrize("value", ["", " ", ",", " , "])
async def test_a_queue_value_that_names_no_queue_is_refused(
    workers: Workers, backend: PostgresBackend, queue_name: str, value: str
) -> None:
    """``--queue ''`` (an unset ``$QUEUES``) is an error, not "every queue"."""
    waiting = await backend.add_job(queue_name, "record")
    worker = await workers.refused("--queue", value)
    assert worker.returncode == 1, worker.describe()
    assert f"--queue {value!r} names no queue" in worker.stderr(), worker.describe()
    assert "--all-queues" in worker.stderr()
    job = await backend.get_job(queue_name, waiting.id)
    assert job is not None and (job.state, job.attempts_started) == ("waiting", 0)


async def test_a_trailing_comma_is_tolerated(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "record")
    worker = await workers.run("--queue", f"{queue_name},", "--burst", timeout=BURST_TIMEOUT)
    assert worker.returncode == 0, worker.describe()
    assert await backend.get_job_state(queue_name, job.id) == "completed"


async def test_no_lanes_and_no_job_classes_refuses_before_connecting(workers: Workers) -> None:
    """Processor functions alone name no queue: the worker refuses, saying how to name
    them, before it opens anything (the DSN's port is closed and never tried)."""
    worker = await workers.refused(
        "--dsn", "postgresql://postgres@127.0.0.1:1/nowhere", app=PROCESSORS_APP
    )
    assert worker.returncode == 1, worker.describe()
    [line] = worker.stderr().strip().splitlines()
    for way in ("no queue to serve", "--queue NAME", "App(lanes=", "`queue`", "--all-queues"):
        assert way in line, line
    assert WAITING not in worker.stderr()


async def test_all_queues_serves_every_queue(
    workers: Workers, fresh_schema: FreshSchema, pg_dsn: str, queue_name: str
) -> None:
    """``--all-queues`` is the explicit way to serve every queue (on a schema of its own,
    which no other test's jobs share)."""
    schema = await fresh_schema()
    store = await PostgresBackend.connect(pg_dsn, schema=schema, min_size=1, max_size=2)
    try:
        jobs = [await store.add_job(f"{queue_name}.{n}", "noop") for n in range(3)]
        worker = await workers.run(
            "--all-queues", "--schema", schema, "--burst", timeout=BURST_TIMEOUT
        )
        assert worker.returncode == 0, worker.describe()
        assert "queues all (--all-queues)" in worker.stdout()
        for job in jobs:
            assert await store.get_job_state(job.queue, job.id) == "completed"
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--queue", "crm:x"], "--queue 'crm:x': the priority must be an integer, got 'x'"),
        (["--queue", "crm:1:y"], "--queue 'crm:1:y': the concurrency must be an integer"),
        (["--queue", "crm:-1"], "--queue 'crm:-1': the priority must be >= 0"),
        (["--queue", ":3"], "--queue ':3': the queue name is empty"),
        (["--queue", "crm", "--lease", "0"], "--lease 0: must be a positive number of seconds"),
        (["--queue", "crm", "--concurrency", "0"], "--concurrency 0: must be a whole number"),
    ],
)
async def test_bad_queue_and_option_values_are_one_sentence(
    workers: Workers, args: list[str], message: str
) -> None:
    worker = await workers.refused(*args)
    assert worker.returncode == 1, worker.describe()
    [line] = worker.stderr().strip().splitlines()
    assert message in line, line
    assert "invalid literal" not in line


async def test_a_time_that_is_not_a_duration_is_a_usage_error(workers: Workers) -> None:
    worker = await workers.refused("--queue", "crm", "--startup-timeout", "-1")
    assert worker.returncode == 2, worker.describe()
    assert "argument --startup-timeout: '-1': expected a duration" in worker.stderr()


async def test_a_mistyped_option_prints_the_workers_usage(workers: Workers) -> None:
    worker = await workers.refused("--queues", "crm")
    assert worker.returncode == 2, worker.describe()
    assert "usage: python -m lane_pg worker" in worker.stderr(), worker.describe()
    assert "unrecognized arguments: --queues crm" in worker.stderr()


async def test_queue_and_all_queues_exclude_each_other(workers: Workers) -> None:
    worker = await workers.refused("--queue", "a", "--all-queues")
    assert worker.returncode == 2, worker.describe()
    assert "not allowed with argument --queue" in worker.stderr()


# ------------------------------------------------------------------ a second signal


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_second_signal_gives_running_jobs_back_at_once(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    signum: int,
) -> None:
    """The first signal prints what the worker waits for; the second gives the running
    jobs back (waiting, lease cleared, the attempt not counted) and exits 128 + signal."""
    worker = await workers.start(*queue_args(queue_name), "--concurrency", "2")
    slow = [
        await backend.add_job(
            queue_name, "announced_sleep", {"seconds": 60}, JobOptions(attempts=1)
        )
        for _ in range(2)
    ]
    # Both handlers started (an ``active`` row alone can precede the worker reading its
    # claim's answer, and the first signal then counts one running job: a CI flake).
    await until(lambda: _started(db, queue_name, 2))

    worker.send(signum)
    first = f"worker {worker.worker_id} stopping: waiting up to 30s for 2 running jobs;"
    await until(lambda: _printed(worker.stdout(), first))
    assert "signal again to stop now" in worker.stdout()
    assert worker.alive()

    worker.send(signum)
    assert await worker.wait_exit(timeout=20) == 128 + signum, worker.describe()
    out = worker.stdout()
    assert f"worker {worker.worker_id} stopping now: giving back 2 running jobs" in out
    assert "stopped at once: gave back 2 running jobs" in out
    for job in slow:
        assert f"{queue_name}/{job.id}" in out
        row = await job_row(db, queue_name, job.id)
        assert row is not None
        assert row["state"] == "waiting", dict(row)
        assert (row["lock_token"], row["lease_expires_at"]) == (None, None)
        assert (row["attempts_started"], row["attempts_made"]) == (0, 0)
        assert (row["failed_reason"], row["finished_at"]) == (None, None)
    assert [row["note"] for row in await effects(db, queue_name)] == ["started", "started"]

    # Given back whole: a job of a single attempt runs again and completes.
    for job in slow:
        await backend.update_job_data(queue_name, job.id, {"seconds": 0})
    again = await workers.run(*queue_args(queue_name), "--burst", timeout=BURST_TIMEOUT)
    assert again.returncode == 0, again.describe()
    for job in slow:
        assert await backend.get_job_state(queue_name, job.id) == "completed"


async def test_a_second_signal_does_not_wait_for_a_handlers_thread(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """A handler blocked in a thread cannot be cancelled: its job is given back and the
    process exits without joining the thread."""
    worker = await workers.start(*queue_args(queue_name), app="tests.worker.thread_app:app")
    job = await backend.add_job(queue_name, "thread_sleep", {"seconds": 300})
    # The handler's log line, not the row's state: a claim is committed (active) before
    # the worker holds the job, and a signal in between finds no job running yet.
    await until(lambda: _logged(backend, queue_name, job.id))
    worker.send(signal.SIGTERM)
    await until(lambda: _printed(worker.stdout(), "signal again to stop now"))
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit(timeout=20) == 128 + signal.SIGTERM, worker.describe()
    row = await job_row(db, queue_name, job.id)
    assert row is not None
    assert (row["state"], row["lock_token"], row["attempts_started"]) == ("waiting", None, 0)


async def _started(db: asyncpg.Connection, queue: str, count: int) -> bool:
    return sum(row["note"] == "started" for row in await effects(db, queue)) >= count


async def _printed(text: str, line: str) -> bool:
    return line in text


async def _logged(backend: PostgresBackend, queue: str, job_id: str) -> bool:
    return (await backend.get_job_logs(queue, job_id)).count > 0


# ------------------------------------------------------------------ start-up order


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _via(dsn: str, port: int) -> str:
    """``dsn`` pointed at 127.0.0.1:``port``."""
    parts = urlsplit(dsn)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit(
        parts._replace(netloc=f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}")
    )


@contextlib.asynccontextmanager
async def forwarder(port: int, target: str) -> AsyncIterator[None]:
    """Listen on ``port`` and pipe every connection to ``target``'s host and port."""
    upstream = urlsplit(target)
    host, target_port = upstream.hostname or "127.0.0.1", upstream.port or 5432
    pipes: set[asyncio.Task[None]] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(host, target_port)
        for task in (
            asyncio.create_task(pipe(client_r, server_w)),
            asyncio.create_task(pipe(server_r, client_w)),
        ):
            pipes.add(task)
            task.add_done_callback(pipes.discard)

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    try:
        yield
    finally:
        server.close()
        for task in list(pipes):
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)


async def test_a_worker_started_before_its_database_processes_jobs_once_it_is_up(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    port = _free_port()
    job = await backend.add_job(queue_name, "record")
    worker = workers.spawn(*queue_args(queue_name), "--dsn", _via(workers.dsn, port))
    await until(lambda: _printed(worker.stderr(), WAITING), timeout=20)
    assert worker.alive(), worker.describe()
    assert await backend.get_job_state(queue_name, job.id) == "waiting"

    async with forwarder(port, workers.dsn):
        await worker.wait_started(timeout=30)
        await until(lambda: _completed(backend, queue_name, job.id), timeout=30)
        later = await backend.add_job(queue_name, "record")  # woken through the forwarder
        await until(lambda: _completed(backend, queue_name, later.id), timeout=30)
        worker.send(signal.SIGTERM)
        assert await worker.wait_exit() == 0, worker.describe()
    # One line per waiting window, never one per try.
    assert worker.stderr().count(WAITING) == 1, worker.describe()
    assert "password" not in worker.stderr()


async def test_a_migrate_beside_the_worker_after_the_server_comes_up_is_waited_for(
    workers: Workers, db: asyncpg.Connection, queue_name: str
) -> None:
    """Compose order: the worker starts, then the server, then ``lane_pg migrate``: the
    server answering without the schema is not final while the worker had to wait."""
    from lane_pg.postgres.schema import migrate

    schema = f"lane_t_{queue_name[-10:]}_late"
    port = _free_port()
    worker = workers.spawn(
        *queue_args(queue_name), "--dsn", _via(workers.dsn, port), "--schema", schema
    )
    try:
        await until(lambda: _printed(worker.stderr(), WAITING), timeout=20)
        async with forwarder(port, workers.dsn):
            await until(lambda: _printed(worker.stderr(), "answers, but"), timeout=30)
            assert worker.alive(), worker.describe()
            await migrate(workers.dsn, schema=schema)
            await worker.wait_started(timeout=60)
            store = await PostgresBackend.connect(workers.dsn, schema=schema, max_size=2)
            try:
                job = await store.add_job(queue_name, "noop")
                await until(lambda: _completed(store, queue_name, job.id), timeout=30)
            finally:
                await store.close()
            worker.send(signal.SIGTERM)
            assert await worker.wait_exit() == 0, worker.describe()
    finally:
        await db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _completed(backend: PostgresBackend, queue: str, job_id: str) -> bool:
    return await backend.get_job_state(queue, job_id) == "completed"


async def test_a_signal_ends_the_wait_for_the_database(workers: Workers, queue_name: str) -> None:
    worker = workers.spawn(*queue_args(queue_name), "--dsn", _via(workers.dsn, _free_port()))
    await until(lambda: _printed(worker.stderr(), WAITING), timeout=20)
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    assert "stopped while waiting for the database" in worker.stdout()
    assert f"worker {worker.worker_id} started" not in worker.stdout()


async def test_the_startup_timeout_bounds_the_wait(workers: Workers, queue_name: str) -> None:
    port = _free_port()
    worker = await workers.refused(
        *queue_args(queue_name), "--dsn", _via(workers.dsn, port), "--startup-timeout", "2"
    )
    assert worker.returncode == 1, worker.describe()
    lines = worker.stderr().strip().splitlines()
    assert len(lines) == 2 and WAITING in lines[0], worker.describe()
    assert "did not answer within the start-up timeout of 2s" in lines[1]
    assert "attempts; last: ConnectionRefusedError" in lines[1]


def _with_user_and_database(dsn: str, user: str | None, database: str | None) -> str:
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user or parts.username}@{host}"
    return urlunsplit(
        parts._replace(netloc=netloc, path=f"/{database}" if database else parts.path)
    )


@pytest.mark.parametrize(
    ("user", "database", "schema", "expected"),
    [
        ("no_such_role_lane_pg", None, None, 'role "no_such_role_lane_pg" does not exist'),
        (None, None, "no_such_schema_lane_pg", "no_such_schema_lane_pg"),
    ],
    ids=["unknown-role", "missing-schema"],
)
async def test_what_waiting_cannot_fix_exits_at_once(
    workers: Workers,
    queue_name: str,
    user: str | None,
    database: str | None,
    schema: str | None,
    expected: str,
) -> None:
    """Authentication and a missing schema exit 1 with one line and no retry (no "waiting"
    line: the first answer is final)."""
    dsn = _with_user_and_database(workers.dsn, user, database)
    args = ["--dsn", dsn] + (["--schema", schema] if schema else [])
    worker = await workers.refused(*queue_args(queue_name), *args)
    assert worker.returncode == 1, worker.describe()
    [line] = worker.stderr().strip().splitlines()
    assert expected in line and "not retried" in line, line
    assert WAITING not in worker.stderr()


async def test_a_database_created_after_the_worker_started_is_waited_for(
    workers: Workers, db: asyncpg.Connection, queue_name: str
) -> None:
    """A harness (or a compose file) that creates the database and migrates it after the
    worker started: the worker waits, then serves it."""
    from lane_pg.postgres.schema import migrate

    database = f"lane_late_{queue_name[-10:]}"
    dsn = _with_user_and_database(workers.dsn, None, database)
    worker = workers.spawn(*queue_args(queue_name), "--dsn", dsn)
    try:
        await until(lambda: _printed(worker.stderr(), "does not exist: waiting up to"), timeout=20)
        assert worker.alive(), worker.describe()
        await db.execute(f'CREATE DATABASE "{database}"')
        await migrate(dsn, schema="lane")
        await worker.wait_started(timeout=60)
        store = await PostgresBackend.connect(dsn, schema="lane", max_size=2)
        try:
            job = await store.add_job(queue_name, "record")
            await until(lambda: _completed(store, queue_name, job.id), timeout=30)
        finally:
            await store.close()
        worker.send(signal.SIGTERM)
        assert await worker.wait_exit() == 0, worker.describe()
    finally:
        if worker.alive():
            worker.send(signal.SIGKILL)
            await worker.wait_exit()
        await db.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


async def test_a_database_that_never_comes_is_given_up_on(
    workers: Workers, queue_name: str
) -> None:
    dsn = _with_user_and_database(workers.dsn, None, "no_such_database_lane_pg")
    worker = await workers.refused(*queue_args(queue_name), "--dsn", dsn, "--startup-timeout", "1")
    assert worker.returncode == 1, worker.describe()
    last = worker.stderr().strip().splitlines()[-1]
    assert 'database "no_such_database_lane_pg" does not exist' in last, worker.describe()
    assert "the start-up timeout of 1s passed" in last


async def test_a_malformed_dsn_exits_at_once(workers: Workers, queue_name: str) -> None:
    worker = await workers.refused(
        *queue_args(queue_name), "--dsn", "postgresql://postgres@127.0.0.1:notaport/x"
    )
    assert worker.returncode not in (0, None), worker.describe()
    assert len(worker.stderr().strip().splitlines()) == 1, worker.describe()
    assert WAITING not in worker.stderr()


async def test_a_job_of_another_queue_is_never_claimed_by_a_typed_worker_in_the_same_db(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    """The shared-database case with a worker that keeps running (not burst): a job pushed
    to another queue while it serves stays waiting."""
    worker = await workers.start(app=TYPED_APP)
    mine = await backend.add_job(f"{queue_name}.typed", "typed.record", {})
    await until(lambda: _completed(backend, mine.queue, mine.id), timeout=20)
    others = await backend.add_jobs(
        f"{queue_name}.billing", [JobSpec("charge", {"n": n}) for n in range(3)]
    )
    mine_again = await backend.add_job(f"{queue_name}.typed", "typed.record", {})
    await until(lambda: _completed(backend, mine_again.queue, mine_again.id), timeout=20)
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    for job in others:
        left = await backend.get_job(job.queue, job.id)
        assert left is not None and (left.state, left.attempts_started) == ("waiting", 0)
