"""Pause transitions, forwards, --connection, --queue lists, --max-jobs, restart and the
pause/resume commands with real ``python -m lane_pg`` processes (PAUSE-7, PAUSE-8,
ROUTE-5, ROUTE-11, CLI-2..7, CLI-13).

Idle loop cycles are observed, not slept through: a claim promotes its queue's due delayed
jobs even while the queue is paused (PAUSE-12), and the test holds the maintenance
leadership (``maintenance_held``), so a delayed job of the worker's queue that turns
waiting proves one more claim cycle of that worker."""

from __future__ import annotations

import re
import signal
import subprocess

import asyncpg

from lane_pg.postgres.backend import PostgresBackend
from tests.conftest import FreshSchema
from tests.test_cli_queue_commands import cli
from tests.worker.conftest import (
    APP,
    WorkerProcess,
    Workers,
    counts,
    queue_args,
    until,
    wait_for_state,
)
from tests.worker.forward_app import FORWARD_ENV

FORWARD_APP = "tests.worker.forward_app:app"
STATUS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} "


def status_lines(worker: WorkerProcess, text: str) -> list[str]:
    """The stdout lines ``YYYY-MM-DD HH:MM:SS <text>``."""
    pattern = re.compile(STATUS + re.escape(text) + "$")
    return [line for line in worker.stdout().splitlines() if pattern.fullmatch(line)]


async def claim_cycles(
    backend: PostgresBackend, db: asyncpg.Connection, queue: str, n: int
) -> None:
    """Wait until the worker serving ``queue`` has made ``n`` more claims: each promotes a
    delayed job added just before it (PAUSE-12; nobody else promotes: maintenance_held),
    which then waits (paused) or runs."""
    for _ in range(n):
        job = await backend.add_job(queue, "noop", None, {"delay_ms": 1})
        await wait_for_state(db, queue, job.id, "waiting", "active", "completed")


async def test_one_line_per_pause_transition_PAUSE_7_CLI_13(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    maintenance_held: str,
) -> None:
    worker = await workers.start(*queue_args(queue_name), "--poll-interval", "50")
    [started] = [line for line in worker.stdout().splitlines() if "started" in line]
    assert f"worker {worker.worker_id} started: connection " in started
    assert queue_name in started

    await backend.pause_queue(queue_name)
    await until(lambda: _async(status_lines(worker, f"Queue {queue_name} PAUSED")))
    await claim_cycles(backend, db, queue_name, 10)
    await backend.resume_queue(queue_name)
    await until(lambda: _async(status_lines(worker, f"Queue {queue_name} RESUMED")))
    job = await backend.add_job(queue_name, "record")
    await wait_for_state(db, queue_name, job.id, "completed")
    await claim_cycles(backend, db, queue_name, 3)
    assert len(status_lines(worker, f"Queue {queue_name} PAUSED")) == 1, worker.describe()
    assert len(status_lines(worker, f"Queue {queue_name} RESUMED")) == 1, worker.describe()
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()


async def _async(value: object) -> object:
    return value


async def test_pause_is_checked_on_the_started_name_not_the_forward_PAUSE_8_ROUTE_11(
    workers: Workers,
    backend: PostgresBackend,
    db: asyncpg.Connection,
    queue_name: str,
    maintenance_held: str,
) -> None:
    default, high = queue_name, f"{queue_name}.high"
    worker = await workers.start(
        *queue_args(default),
        "--poll-interval",
        "50",
        app=FORWARD_APP,
        env={FORWARD_ENV: f"{default}:{high}"},
    )
    assert f"{high}(priority 0, max 50, paused as {default})" in worker.stdout()

    # Pausing the destination does not stop a --queue=default worker (ROUTE-5: it claims
    # the forwarded jobs on high).
    await backend.pause_queue(high)
    first = await backend.add_job(high, "record")
    await wait_for_state(db, high, first.id, "completed")
    assert status_lines(worker, f"Queue {high} PAUSED") == []

    # Pausing default stops it, even though its jobs are on high.
    await backend.pause_queue(default)
    await until(lambda: _async(status_lines(worker, f"Queue {default} PAUSED")))
    second = await backend.add_job(high, "record")
    await claim_cycles(backend, db, high, 5)
    assert (await backend.get_job_state(high, second.id)) == "waiting"
    await backend.resume_queue(default)
    await wait_for_state(db, high, second.id, "completed")
    await until(lambda: _async(status_lines(worker, f"Queue {default} RESUMED")))
    assert len(status_lines(worker, f"Queue {default} PAUSED")) == 1
    assert len(status_lines(worker, f"Queue {default} RESUMED")) == 1
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()


async def test_unknown_connection_exits_non_zero_and_claims_nothing_CLI_2(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "record")
    worker = await workers.refused(*queue_args(queue_name), "--connection", "nope")
    assert worker.returncode not in (0, None)
    assert "unknown queue connection 'nope'" in worker.stderr(), worker.describe()
    stored = await backend.get_job(queue_name, job.id)
    assert stored is not None and (stored.state, stored.attempts_started) == ("waiting", 0)


async def test_named_default_connection_drains_it_CLI_2(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "record")
    worker = await workers.run(*queue_args(queue_name), "--connection", "postgres", "--burst")
    assert worker.returncode == 0, worker.describe()
    assert "started: connection postgres;" in worker.stdout()
    await wait_for_state(db, queue_name, job.id, "completed")


async def test_queue_list_claims_only_the_listed_queues_CLI_3(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    exports, heavy, other = (f"{queue_name}.{tag}" for tag in ("exports", "heavy", "other"))
    jobs = {queue: await backend.add_job(queue, "record") for queue in (exports, heavy, other)}
    worker = await workers.run(f"--queue={exports},{heavy}:1", "--burst")
    assert worker.returncode == 0, worker.describe()
    assert await counts(db, [exports, heavy]) == {"completed": 2}
    assert (await backend.get_job_state(other, jobs[other].id)) == "waiting"


async def test_sigterm_during_a_two_second_job_lets_it_complete_CLI_4(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    worker = await workers.start(*queue_args(queue_name))
    job = await backend.add_job(queue_name, "sleep", {"seconds": 2.0})
    await wait_for_state(db, queue_name, job.id, "active")
    worker.send(signal.SIGTERM)
    assert await worker.wait_exit() == 0, worker.describe()
    done = await backend.get_job(queue_name, job.id)
    assert done is not None and done.state == "completed", done


async def test_max_jobs_exits_after_that_many_CLI_5(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    for n in range(5):
        await backend.add_job(queue_name, "record", {"n": n})
    worker = await workers.run(*queue_args(queue_name), "--max-jobs", "2")
    assert worker.returncode == 0, worker.describe()
    assert await counts(db, [queue_name]) == {"completed": 2, "waiting": 3}


async def test_restart_stops_running_workers_only_CLI_6(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    running = await workers.start(*queue_args(queue_name), "--poll-interval", "200")
    job = await backend.add_job(queue_name, "record")
    await wait_for_state(db, queue_name, job.id, "completed")  # it has looked at least once

    done = await cli("restart", dsn=workers.dsn)
    assert done.returncode == 0, done.stderr
    assert "restart signal stored" in done.stdout
    assert await running.wait_exit() == 0, running.describe()
    stopping = [line for line in running.stdout().splitlines() if "Restart signal" in line]
    assert len(stopping) == 1, running.describe()
    assert re.fullmatch(STATUS + r"Restart signal: stopping after \d+ jobs", stopping[0])

    later = await workers.start(*queue_args(queue_name), "--poll-interval", "200")
    after = await backend.add_job(queue_name, "record")
    await wait_for_state(db, queue_name, after.id, "completed")
    again = await backend.add_job(queue_name, "record")
    await wait_for_state(db, queue_name, again.id, "completed")
    assert later.alive(), later.describe()
    later.send(signal.SIGTERM)
    assert await later.wait_exit() == 0, later.describe()


async def test_work_alias_and_block_timeout_CLI_1(
    workers: Workers, backend: PostgresBackend, db: asyncpg.Connection, queue_name: str
) -> None:
    job = await backend.add_job(queue_name, "record")
    done = await cli(
        "work",
        "--app",
        APP,
        "--queue",
        queue_name,
        "--block-timeout",
        "0.1",
        "--burst",
        dsn=workers.dsn,
    )
    assert done.returncode == 0, done.stderr
    await wait_for_state(db, queue_name, job.id, "completed")
    both = await cli(
        "work",
        "--app",
        APP,
        "--queue",
        queue_name,
        "--block-timeout",
        "1",
        "--poll-interval",
        "1000",
        dsn=workers.dsn,
    )
    assert both.returncode == 2  # one setting, given twice: refused


async def test_no_app_and_no_job_classes_is_refused_CLI_1(
    workers: Workers, queue_name: str
) -> None:
    worker = await workers.refused(*queue_args(queue_name), app=None)
    assert worker.returncode == 1, worker.describe()
    assert "nothing to run" in worker.stderr()


async def test_pause_and_resume_commands_exit_codes_CLI_7(
    workers: Workers, backend: PostgresBackend, queue_name: str
) -> None:
    dsn = workers.dsn

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await cli(*args, dsn=dsn)

    paused = await run("pause", queue_name)
    assert paused.returncode == 0, paused.stderr
    assert await backend.is_queue_paused(queue_name)
    assert (await run("pause", queue_name, "--connection", "nope")).returncode == 2
    assert (await run("resume", queue_name, "--connection", "nope")).returncode == 2
    assert (await run("pause")).returncode == 1  # neither QUEUE nor --all
    assert (await run("pause", queue_name, "--all")).returncode == 1  # both
    resumed = await run("continue", queue_name, "--connection", "postgres")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == f"lane_pg: queue '{queue_name}' resumed on connection 'postgres'\n"
    assert not await backend.is_queue_paused(queue_name)
    try:
        await backend.pause_queue(queue_name)
        everything = await run("pause", "--all")
        assert everything.returncode == 0, everything.stderr
        assert (await backend.get_pause_status([f"{queue_name}.x"])).is_paused(f"{queue_name}.x")
        lifted = await run("resume", "--all")
        assert lifted.returncode == 0, lifted.stderr
        assert "queues paused one by one stay paused" in lifted.stdout
        status = await backend.get_pause_status([queue_name, f"{queue_name}.x"])
        assert status.all_paused is False
        assert status.paused == frozenset({queue_name})
        refused = await cli("pause", "--all", dsn=dsn, extra_env={"LANE_PG_PAUSABLE": "false"})
        assert refused.returncode == 1
        assert "every queue is not paused" in refused.stderr
        assert (await backend.get_pause_status()).all_paused is False
    finally:
        await backend.resume_all()


async def test_an_unfiltered_worker_prints_each_queues_transitions_PAUSE_7_CLI_13(
    workers: Workers, fresh_schema: FreshSchema, pg_dsn: str, queue_name: str
) -> None:
    """A worker started with ``--all-queues`` (on a schema of its own: it serves every
    queue) prints one line per transition of a queue's own pause, not one per poll."""
    schema = await fresh_schema()
    store = await PostgresBackend.connect(pg_dsn, schema=schema, min_size=1, max_size=2)
    holder = f"test:{queue_name}"
    try:
        # Held by the test, so only the worker's claims promote the cycle probes below.
        assert await store.leader().acquire_leadership("maintenance", holder, 120)
        billing = f"{queue_name}.billing"
        worker = await workers.start("--all-queues", "--schema", schema, "--poll-interval", "50")
        assert "queues all" in worker.stdout(), worker.describe()

        await store.pause_queue(billing)
        await until(lambda: _async(status_lines(worker, f"Queue {billing} PAUSED")))
        await _claim_cycles_on(store, billing, 10)
        await store.resume_queue(billing)
        await until(lambda: _async(status_lines(worker, f"Queue {billing} RESUMED")))
        job = await store.add_job(billing, "record")
        await until(lambda: _state_is(store, billing, job.id, "completed"))
        await _claim_cycles_on(store, billing, 3)
        assert len(status_lines(worker, f"Queue {billing} PAUSED")) == 1, worker.describe()
        assert len(status_lines(worker, f"Queue {billing} RESUMED")) == 1, worker.describe()
        assert status_lines(worker, "All queues PAUSED") == []
        worker.send(signal.SIGTERM)
        assert await worker.wait_exit() == 0, worker.describe()
    finally:
        await store.leader().resign_leadership("maintenance", holder)
        await store.close()


async def _state_is(store: PostgresBackend, queue: str, job_id: str, *states: str) -> bool:
    return await store.get_job_state(queue, job_id) in states


async def _claim_cycles_on(store: PostgresBackend, queue: str, n: int) -> None:
    """``claim_cycles`` on a schema of the test's own."""
    for _ in range(n):
        job_id = (await store.add_job(queue, "noop", None, {"delay_ms": 1})).id
        await until(
            lambda job_id=job_id: _state_is(store, queue, job_id, "waiting", "active", "completed")
        )
