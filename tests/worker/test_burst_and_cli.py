"""``--burst``, result mapping and the worker command's start-up and error paths (CLI-1,
CLI-13, WORK-3, WORK-9, WORK-10, WORK-14, RETRY, SCH-6)."""

from __future__ import annotations

import signal
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import Backoff, JobOptions, JobRow, JobSpec
from tests.worker.conftest import Workers, counts, effects, queue_args

BURST_TIMEOUT = 30.0


async def _job(backend: JobQueueBackend, queue: str, job: JobRow) -> JobRow:
    found = await backend.get_job(queue, job.id)
    assert found is not None
    return found


async def test_burst_runs_everything_ready_then_exits_0_WORK_3_WORK_10_WORK_14(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    records = await backend.add_jobs(queue_name, [JobSpec("record", {"n": n}) for n in range(5)])
    unknown = await backend.add_job(queue_name, "no_such_processor", {}, JobOptions(attempts=3))
    unrecoverable = await backend.add_job(queue_name, "unrecoverable", None, JobOptions(attempts=5))
    failing = await backend.add_job(
        queue_name, "fail", None, JobOptions(attempts=2, backoff=Backoff.fixed(0))
    )
    context = await backend.add_job(queue_name, "context_writes", {"original": 1})

    worker = await workers.run(
        *queue_args(queue_name), "--burst", "--concurrency", "4", timeout=BURST_TIMEOUT
    )
    assert worker.returncode == 0, worker.describe()
    assert f"worker {worker.worker_id} started" in worker.stdout()

    for job in records:
        done = await _job(backend, queue_name, job)
        assert (done.state, done.return_value) == ("completed", {"pid": worker.pid})
    assert sorted(row["job_id"] for row in await effects(db, queue_name)) == sorted(
        [job.id for job in records] + [context.id]
    )

    # A14 / WORK-3: no processor for the name fails terminally, attempts left or not.
    missing = await _job(backend, queue_name, unknown)
    assert missing.state == "failed"
    assert missing.failed_reason is not None and "UnknownJobName" in missing.failed_reason
    assert "no_such_processor" in missing.failed_reason
    assert missing.attempts_started == 1

    # WORK-10: UnrecoverableJobError skips the remaining attempts.
    hopeless = await _job(backend, queue_name, unrecoverable)
    assert (hopeless.state, hopeless.attempts_made, hopeless.attempts_started) == ("failed", 1, 1)
    assert hopeless.failed_reason is not None and "cannot succeed" in hopeless.failed_reason

    # WORK-10 / WORK-14: a plain exception is retried per its options (zero backoff goes
    # straight back to waiting, so burst mode runs it again), then fails for good.
    failed = await _job(backend, queue_name, failing)
    assert (failed.state, failed.attempts_made, failed.attempts_started) == ("failed", 2, 2)
    assert failed.failed_reason is not None and "attempt 2" in failed.failed_reason
    assert len(failed.stacktrace) == 2
    assert all("RuntimeError" in trace for trace in failed.stacktrace)

    # WORK-9: context writes go through the backend.
    written = await _job(backend, queue_name, context)
    assert written.state == "completed"
    assert written.progress == {"step": 1}
    assert written.data == {"rewritten": True, "original": 1}
    logs = await backend.get_job_logs(queue_name, context.id)
    assert [entry.message for entry in logs.logs] == [f"hello from {worker.pid}"]

    assert await counts(db, [queue_name]) == {"completed": 6, "failed": 3}


async def test_burst_exits_0_on_an_idle_queue_and_leaves_delayed_jobs_CLI_1(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    later = await backend.add_job(queue_name, "record", None, JobOptions(delay=60))
    worker = await workers.run(*queue_args(queue_name), "--burst", timeout=BURST_TIMEOUT)
    assert worker.returncode == 0, worker.describe()
    left = await _job(backend, queue_name, later)
    assert (left.state, left.attempts_started) == ("delayed", 0)
    assert await effects(db, queue_name) == []


async def test_startup_line_names_worker_and_queues_without_unbuffered_output_CLI_13(
    workers: Workers, queue_name: str
) -> None:
    """The line is flushed at once: a process manager reading a pipe or file sees it while
    the worker runs, without PYTHONUNBUFFERED."""
    worker = await workers.start(*queue_args(queue_name), unbuffered=False)
    [line] = [line for line in worker.stdout().splitlines() if "started" in line]
    assert f"worker {worker.worker_id} started" in line
    assert queue_name in line
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{text}"
    return lines[0]


@pytest.mark.parametrize(
    "app",
    [
        "nope:app",
        "tests.worker.apps:missing",
        "tests.worker.apps",
        "tests.worker.apps:EFFECTS_TABLE",
    ],
)
async def test_bad_app_exits_non_zero_with_one_line_CLI_1(
    workers: Workers, queue_name: str, app: str
) -> None:
    worker = await workers.refused(*queue_args(queue_name), app=app)
    assert worker.returncode not in (0, None), worker.describe()
    line = _one_line(worker.stderr())
    assert app.split(":")[0] in line, line


async def test_unreachable_database_exits_non_zero_with_one_line_CLI_1(
    workers: Workers, queue_name: str
) -> None:
    worker = await workers.refused(
        *queue_args(queue_name),
        "--dsn",
        "postgresql://postgres@127.0.0.1:1/nowhere",
        "--startup-timeout",
        "0",
    )
    assert worker.returncode not in (0, None), worker.describe()
    _one_line(worker.stderr())


@pytest_asyncio.fixture
async def old_schema(db: asyncpg.Connection) -> AsyncIterator[str]:
    """A schema whose recorded version is older than anything this library accepts."""
    name = f"wt_old_{uuid.uuid4().hex[:10]}"
    await db.execute(
        f"CREATE SCHEMA {name};"
        f" CREATE TABLE {name}.schema_version (version integer PRIMARY KEY,"
        " breaking boolean NOT NULL DEFAULT false, description text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now());"
        f" INSERT INTO {name}.schema_version (version, description) VALUES (0, 'ancient')"
    )
    try:
        yield name
    finally:
        await db.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.mark.parametrize("with_dsn", [False, True], ids=["env-dsn", "dsn-option"])
async def test_old_schema_exits_non_zero_with_one_line_SCH_6(
    workers: Workers, queue_name: str, old_schema: str, with_dsn: bool
) -> None:
    dsn = ["--dsn", workers.dsn] if with_dsn else []
    worker = await workers.refused(*queue_args(queue_name), *dsn, "--schema", old_schema)
    assert worker.returncode not in (0, None), worker.describe()
    line = _one_line(worker.stderr())
    assert old_schema in line and "version" in line, line


async def test_missing_schema_exits_non_zero_with_one_line_SCH_6(
    workers: Workers, queue_name: str
) -> None:
    missing = f"wt_none_{uuid.uuid4().hex[:10]}"
    worker = await workers.refused(
        *queue_args(queue_name), "--dsn", workers.dsn, "--schema", missing
    )
    assert worker.returncode not in (0, None), worker.describe()
    assert missing in _one_line(worker.stderr())
