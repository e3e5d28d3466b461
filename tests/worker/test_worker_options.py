"""Runtime options of a real worker process: ``LANE_PG_PAUSABLE=false`` ignores the queue's
paused flag (PAUSE-10) while a normal worker honours it; ``--fail-on-timeout`` (RETRY-4)
and ``--stacktrace-limit`` (WORK-14); ``--poll-interval`` in milliseconds (CLI-1);
``--on-unknown-job`` (A14)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from lane_pg.backend.failed import FailedJobFilter
from lane_pg.cli import CommandError, build_parser
from lane_pg.cli.worker import worker_config
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.failed import DatabaseFailedJobStore
from lane_pg.types import JobOptions, JobSpec
from lane_pg.worker import WorkerConfig
from tests.helpers import events
from tests.worker.conftest import Workers, counts, queue_args, stop, until

BURST_TIMEOUT = 30.0


async def test_a_worker_with_pausing_disabled_drains_a_paused_queue_PAUSE_10(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    await backend.add_jobs(queue_name, [JobSpec("noop", n) for n in range(5)])
    await backend.pause_queue(queue_name)

    honouring = await workers.run(*queue_args(queue_name), "--burst", timeout=BURST_TIMEOUT)
    assert honouring.returncode == 0, honouring.describe()
    assert await counts(db, [queue_name]) == {"waiting": 5}

    ignoring = await workers.run(
        *queue_args(queue_name),
        "--burst",
        env={"LANE_PG_PAUSABLE": "false"},
        timeout=BURST_TIMEOUT,
    )
    assert ignoring.returncode == 0, ignoring.describe()
    assert await counts(db, [queue_name]) == {"completed": 5}
    assert await backend.is_queue_paused(queue_name)


async def test_the_worker_command_takes_the_runtime_options_RETRY_4_WORK_14(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    slow = await backend.add_job(
        queue_name, "sleep", {"seconds": 30}, JobOptions(timeout=0.2, attempts=3)
    )
    worker = await workers.run(
        *queue_args(queue_name),
        "--burst",
        "--fail-on-timeout",
        "--stacktrace-limit",
        "0",
        timeout=BURST_TIMEOUT,
    )
    assert worker.returncode == 0, worker.describe()
    job = await backend.get_job(queue_name, slow.id)
    assert job is not None
    assert (job.state, job.attempts_started, job.stacktrace) == ("failed", 1, [])
    assert (job.failed_reason or "").startswith("TimeoutExceeded: job sleep")


def _worker_options(*argv: str) -> WorkerConfig:
    args = build_parser().parse_args(["worker", *argv])
    return worker_config(args, ())


def test_poll_interval_is_milliseconds_and_block_timeout_seconds_CLI_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _worker_options("--poll-interval", "250").poll_interval == 0.25
    assert _worker_options("--poll-interval", "1500").poll_interval == 1.5
    assert _worker_options("--block-timeout", "2").poll_interval == 2.0
    assert _worker_options().poll_interval == WorkerConfig().poll_interval
    with pytest.raises(CommandError, match="poll interval must be positive"):
        _worker_options("--poll-interval", "0")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--help"])
    worker_help = " ".join(capsys.readouterr().out.split())
    assert "--poll-interval DURATION time between claims" in worker_help
    assert "a bare number is milliseconds" in worker_help
    assert "--block-timeout DURATION the same setting as --poll-interval" in worker_help
    assert _worker_options("--poll-interval", "2s").poll_interval == 2.0
    assert _worker_options("--block-timeout", "250ms").poll_interval == 0.25


async def test_on_unknown_job_release_in_a_worker_process_A14(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    """``--on-unknown-job release``: the job no processor of the app serves is given back,
    again and again, never failed and never charged; the others run as usual."""
    unknown = await backend.add_job(queue_name, "no_such_processor", None, JobOptions(attempts=1))
    known = await backend.add_job(queue_name, "record")
    worker = await workers.start(
        *queue_args(queue_name), "--on-unknown-job", "release", "--poll-interval", "50"
    )

    async def given_back() -> int:
        names = [event.event for event in await events(backend, queue_name)]
        return sum(1 for name in names if name == "delayed")

    await until(lambda: _at_least(given_back, 3), timeout=20)
    stop(worker)
    assert await worker.wait_exit() == 0, worker.describe()
    job = await backend.get_job(queue_name, unknown.id)
    assert job is not None and job.state in ("waiting", "delayed")
    assert (job.attempts_started, job.attempts_made, job.failed_reason) == (0, 0, None)
    records = await DatabaseFailedJobStore(backend).page(FailedJobFilter(queue=queue_name))
    assert records == []
    assert await backend.get_job_state(queue_name, known.id) == "completed"
    assert worker.stderr().count("no processor for job name 'no_such_processor'") == 1


async def _at_least(count: Callable[[], Awaitable[int]], least: int) -> bool:
    return await count() >= least


async def test_a_bad_on_unknown_job_exits_2_A14(workers: Workers, queue_name: str) -> None:
    worker = await workers.refused(*queue_args(queue_name), "--on-unknown-job", "retry")
    assert worker.returncode == 2, worker.describe()
    assert "--on-unknown-job: invalid choice: 'retry'" in worker.stderr()
