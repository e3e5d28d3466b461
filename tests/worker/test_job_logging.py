"""What a worker's output shows: every failed attempt (WARNING, with the exception and the
next run), a job that failed for good (ERROR, with its traceback), one line per job with
``-v``, JSON lines with ``--log-format json``, and the closing summary in words; and the
same records, with their fields, for an app that runs its worker itself."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import AsyncIterator

import pytest

from lane_pg.backend import JobQueueBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import Backoff, JobOptions, JobRow, Lane
from lane_pg.worker import JobContext, Worker, WorkerConfig
from tests.conftest import FreshSchema
from tests.worker.conftest import Workers, queue_args, until

APP = "tests.worker.logging_app:app"
BURST_TIMEOUT = 30.0


async def _failing_job(backend: JobQueueBackend, queue: str) -> JobRow:
    return await backend.add_job(
        queue, "bad_address", "nowhere", JobOptions(attempts=2, backoff=Backoff.fixed(0))
    )


async def test_a_plain_worker_shows_each_failed_attempt_and_the_traceback_of_the_last(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await _failing_job(backend, queue_name)
    worker = await workers.run(*queue_args(queue_name), "--burst", app=APP, timeout=BURST_TIMEOUT)
    assert worker.returncode == 0, worker.describe()
    err = worker.stderr()
    where = f"job {queue_name}/{job.id} (bad_address)"
    assert (
        f"WARNING lane_pg.jobs: {where} failed, attempt 1 of 2: ValueError: bad address"
        " 'nowhere'; retrying now"
    ) in err, worker.describe()
    assert (
        f"ERROR lane_pg.jobs: {where} failed for good (no attempts left), attempt 2 of 2:"
        " ValueError: bad address 'nowhere'"
    ) in err, worker.describe()
    assert "Traceback (most recent call last)" in err and "in bad_address" in err
    assert "claimed" not in err  # per-job INFO lines only with -v
    assert (
        "stopped: jobs: 0 completed, 1 failed for good, 0 given back, 0 lost; attempts: 2"
        " claimed, 2 failed (1 to be retried)"
    ) in worker.stdout(), worker.describe()


async def test_an_app_that_configures_logging_keeps_it_and_sees_the_failures(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    """The CLI configured logging before importing the app, so the app's own basicConfig
    did nothing; and no failed attempt was logged at all."""
    job = await _failing_job(backend, queue_name)
    worker = await workers.run(
        *queue_args(queue_name),
        "--burst",
        app=APP,
        env={"LANE_PG_TEST_APP_LOGGING": "1"},
        timeout=BURST_TIMEOUT,
    )
    assert worker.returncode == 0, worker.describe()
    err = worker.stderr()
    assert f"APP WARNING lane_pg.jobs | job {queue_name}/{job.id}" in err, worker.describe()
    assert f"APP ERROR lane_pg.jobs | job {queue_name}/{job.id}" in err, worker.describe()
    assert "APP INFO lane_pg.jobs | " in err  # the app asked for DEBUG: it gets every line


async def test_verbose_after_the_command_adds_a_line_per_job_claimed_and_completed(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "ok", None)
    worker = await workers.run(
        *queue_args(queue_name), "--burst", "-v", app=APP, timeout=BURST_TIMEOUT
    )
    assert worker.returncode == 0, worker.describe()
    err = worker.stderr()
    where = f"INFO lane_pg.jobs: job {queue_name}/{job.id} (ok)"
    assert f"{where} claimed, attempt 1 of 1" in err, worker.describe()
    assert f"{where} completed in " in err and " ms" in err, worker.describe()


async def test_log_format_json_writes_one_object_per_line_with_the_job_fields(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await _failing_job(backend, queue_name)
    worker = await workers.run(
        *queue_args(queue_name),
        "--burst",
        "--log-format",
        "json",
        "-v",
        app=APP,
        timeout=BURST_TIMEOUT,
    )
    assert worker.returncode == 0, worker.describe()
    lines = [json.loads(line) for line in worker.stderr().splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "message"} <= set(doc) for doc in lines)
    mine = [doc for doc in lines if doc.get("job_id") == job.id]
    retry = next(doc for doc in mine if doc["level"] == "WARNING")
    assert {key: retry[key] for key in ("logger", "queue", "name", "attempt", "max_attempts")} == {
        "logger": "lane_pg.jobs",
        "queue": queue_name,
        "name": "bad_address",
        "attempt": 1,
        "max_attempts": 2,
    }
    assert retry["error"] == "ValueError: bad address 'nowhere'" and retry["next_run_at"]
    final = next(doc for doc in mine if doc["level"] == "ERROR")
    assert final["attempt"] == 2 and "Traceback (most recent call last)" in final["traceback"]
    assert any(doc["level"] == "INFO" and "claimed" in doc["message"] for doc in mine)


async def test_a_def_processor_completes_once_in_a_worker_process(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "sync_ok", None)
    worker = await workers.run(
        *queue_args(queue_name), "--burst", "--sync-threads", "2", app=APP, timeout=BURST_TIMEOUT
    )
    assert worker.returncode == 0, worker.describe()
    done = await backend.get_job(queue_name, job.id)
    assert done is not None and done.state == "completed", worker.describe()
    assert done.return_value == {"pid": worker.pid, "thread": "lane_pg-sync-1"}
    assert done.progress == {"thread": "lane_pg-sync-1"}
    assert (done.attempts_started, done.attempts_made) == (1, 0)


async def test_a_sync_handler_that_never_returns_is_given_back_and_does_not_hold_the_exit(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    """SIGTERM: the worker waits for the thread up to --shutdown-timeout, gives the job
    back, and exits; the thread (still sleeping) does not keep the process alive."""
    job = await backend.add_job(queue_name, "sync_forever", None)
    worker = await workers.start(*queue_args(queue_name), "--shutdown-timeout", "0.5", app=APP)

    async def started() -> bool | None:
        row = await backend.get_job(queue_name, job.id)
        return row is not None and row.progress == "started"

    await until(started, timeout=20)
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    row = await backend.get_job(queue_name, job.id)
    assert row is not None and row.state == "waiting", worker.describe()
    assert row.attempts_made == 0 and row.lock_token is None
    assert "1 given back" in worker.stdout(), worker.describe()


async def test_a_bad_sync_threads_value_is_one_line(workers: Workers, queue_name: str) -> None:
    worker = await workers.refused(*queue_args(queue_name), "--sync-threads", "0", app=APP)
    assert worker.returncode != 0
    assert "sync_threads must be None or a count >= 1, got 0" in worker.stderr()
    assert "Traceback" not in worker.stderr()


# ------------------------------------------------------------------ in process, with caplog


@pytest.fixture
async def own_schema(pg_dsn: str, fresh_schema: FreshSchema) -> AsyncIterator[PostgresBackend]:
    """A backend on a schema of its own. The in-process worker leads maintenance, which
    recovers every expired lease of its schema and logs each on ``lane_pg.jobs``: on the
    shared schema, jobs other tests left active showed among this test's records."""
    backend = await PostgresBackend.connect(
        pg_dsn, schema=await fresh_schema(), min_size=1, max_size=4
    )
    try:
        yield backend
    finally:
        await backend.close()


async def test_records_carry_the_job_fields_for_an_app_that_runs_its_own_worker(
    own_schema: PostgresBackend, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = own_schema

    async def bad_address(job: JobRow, ctx: JobContext) -> None:
        raise ValueError("bad address")

    async def fine(job: JobRow, ctx: JobContext) -> None:
        return None

    failing = await backend.add_job(
        queue_name,
        "bad_address",
        None,
        JobOptions(attempts=2, backoff=Backoff.exponential(2.0, jitter=0.5)),
    )
    await backend.add_job(queue_name, "fine", None)
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
    worker = Worker(backend, {"bad_address": bad_address, "fine": fine}, config)
    caplog.set_level(logging.WARNING, logger="lane_pg")
    await asyncio.wait_for(worker.run(), 30)

    [retry] = [r for r in caplog.records if r.name == "lane_pg.jobs"]
    assert retry.levelno == logging.WARNING
    fields = {
        key: getattr(retry, key)
        for key in ("queue", "job_id", "job_name", "attempt", "max_attempts", "error", "worker")
    }
    assert fields == {
        "queue": queue_name,
        "job_id": failing.id,
        "job_name": "bad_address",
        "attempt": 1,
        "max_attempts": 2,
        "error": "ValueError: bad address",
        "worker": config.worker_id,
    }
    assert getattr(retry, "next_run_at", None) is not None
    assert "next attempt in 1s to 3s" in retry.getMessage()  # 2 s, +-50 %
    assert worker.counts["retried"] == 1 and worker.counts["failed_for_good"] == 0
    # No INFO line was made: INFO is off for lane_pg.jobs.
    assert not [r for r in caplog.records if r.levelno == logging.INFO]


async def test_a_terminal_failure_is_an_error_with_its_traceback(
    own_schema: PostgresBackend, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = own_schema

    async def hopeless(job: JobRow, ctx: JobContext) -> None:
        raise KeyError("missing")

    added = await backend.add_job(queue_name, "hopeless", None, JobOptions(attempts=1))
    await backend.add_job(queue_name, "no_such_name", None)
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05, burst=True)
    caplog.set_level(logging.INFO, logger="lane_pg.jobs")
    worker = Worker(backend, {"hopeless": hopeless}, config)
    await asyncio.wait_for(worker.run(), 30)

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2
    [failed] = [r for r in errors if getattr(r, "job_id", None) == added.id]
    assert failed.exc_info is not None and failed.exc_info[0] is KeyError
    assert "failed for good (no attempts left), attempt 1 of 1: KeyError: 'missing'" in (
        failed.getMessage()
    )
    [unknown] = [r for r in errors if r is not failed]
    assert "UnknownJobName: no processor is registered" in unknown.getMessage()
    assert "UnknownJobName: UnknownJobName" not in unknown.getMessage()
    claimed = [r for r in caplog.records if "claimed" in r.getMessage()]
    assert len(claimed) == 2 and all(r.levelno == logging.INFO for r in claimed)
    assert worker.counts["failed_for_good"] == 2


async def test_a_failure_whose_write_raises_is_logged_as_an_error(
    queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from lane_pg.backend import OperationCall
    from lane_pg.memory import MemoryBackend

    class LosesFailures(MemoryBackend):
        def __init__(self) -> None:
            super().__init__()
            self.hooks.add(self._lose_failures)

        async def _lose_failures(
            self, call: OperationCall, proceed: Callable[[], Awaitable[Any]]
        ) -> Any:
            if call.operation.name == "fail_jobs":
                raise ConnectionError("server closed the connection")
            return await proceed()

    async def broken(job: JobRow, ctx: JobContext) -> None:
        raise ValueError("broken handler")

    backend = LosesFailures()
    added = await backend.add_job(queue_name, "broken", None, JobOptions(attempts=3))
    config = WorkerConfig(lanes=(Lane(queue_name),), poll_interval=0.05)
    worker = Worker(backend, {"broken": broken}, config)
    caplog.set_level(logging.WARNING, logger="lane_pg")
    assert await asyncio.wait_for(worker.run_once(), 30) is not None

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    batch = [r for r in errors if r.name == "lane_pg.worker"]
    [line] = [r for r in errors if r.name == "lane_pg.jobs"]
    assert batch and "writing 1 failed results failed" in batch[0].getMessage()
    assert getattr(line, "job_id", None) == added.id
    assert "ValueError: broken handler" in line.getMessage()
    assert "ConnectionError: server closed the connection" in line.getMessage()
    assert line.exc_info is not None and line.exc_info[0] is ValueError
    assert worker.settlement_failures == 1
    held = await backend.get_job(queue_name, added.id)
    assert held is not None and held.state == "active"  # left to its lease
