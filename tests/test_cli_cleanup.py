"""``python -m lane_pg drain | clean | obliterate | recover-stalled`` in a subprocess, as a
user runs them (CLI-12), against the test database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand
from tests.test_cli_queue_commands import REPO, cli, cli_environment, is_paused, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def finished(backend: PostgresBackend, queue: str, count: int) -> None:
    for _ in range(count):
        await backend.add_job(queue, "n")
    for job in await backend.claim_jobs("w", [QueueDemand(queue, count)], 60):
        assert job.lock_token is not None
        await backend.complete_job(queue, job.id, job.lock_token)


async def test_drain_removes_waiting_then_delayed_jobs_CLI_12(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("drain")
    await backend.add_job(queue, "a")
    await backend.add_job(queue, "b")
    await backend.add_job(queue, "d", None, {"delay_ms": 600_000})

    result = await cli("drain", queue, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: drained queue {queue!r}: removed 2 waiting job(s)\n"
    assert await backend.get_job_counts(queue, ["waiting", "delayed"]) == {
        "waiting": 0,
        "delayed": 1,
    }

    result = await cli("drain", queue, "--delayed", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert "removed 1 waiting and delayed job(s)" in result.stdout
    assert await backend.get_job_count(queue) == 0


async def test_clean_removes_finished_jobs_older_than_a_duration_CLI_12(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("clean")
    await finished(backend, queue, 3)

    kept = await cli("clean", queue, "--state", "completed", "--older-than", "1h", dsn=pg_dsn)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout == f"lane_pg: cleaned queue {queue!r}: removed 0 completed job(s)\n"

    some = await cli(
        "clean", queue, "--state", "completed", "--grace", "0s", "--limit", "2", dsn=pg_dsn
    )
    assert some.returncode == 0, some.stderr
    assert "removed 2 completed job(s)" in some.stdout
    assert (await backend.get_job_counts(queue, ["completed"]))["completed"] == 1
    cleaned = [e for e in await backend.read_events(queue, limit=1000) if e.event == "cleaned"]
    assert [e.data for e in cleaned] == [{"count": 0}, {"count": 2}]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--state", "completed", "--older-than", "soon"], 1, "expected a duration"),
        (["--state", "completed", "--older-than", "1h", "--limit", "-3"], 1, "expected a count"),
        (["--state", "waiting-children", "--older-than", "1h"], 2, "invalid choice"),
        (["--state", "completed"], 2, "--older-than"),
    ],
)
async def test_clean_refuses_bad_input_before_connecting_CLI_12(
    args: list[str], code: int, message: str
) -> None:
    # No database at this address: the refusal comes first.
    result = await cli("clean", "q", *args, "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert result.returncode == code
    assert message in result.stderr


async def test_obliterate_refuses_active_jobs_unless_forced_CLI_12(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("obl")
    job = await backend.add_job(queue, "n")
    await backend.claim_jobs("w", [QueueDemand(queue, 1)], 600)

    refused = await cli("obliterate", queue, dsn=pg_dsn)
    assert refused.returncode == 1
    assert "has active jobs" in refused.stderr and "left paused" in refused.stderr
    assert await is_paused(pg_dsn, queue)
    assert await backend.get_job_state(queue, job.id) == "active"

    forced = await cli("obliterate", queue, "--force", dsn=pg_dsn)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == f"lane_pg: obliterated queue {queue!r}: removed 1 job(s)\n"
    assert not await is_paused(pg_dsn, queue)
    assert await backend.get_job(queue, job.id) is None
    assert queue not in await backend.list_queues()


def run_on_a_terminal(answer: str, *args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    """``python -m lane_pg ARGS`` whose stdin is a terminal that already holds ``answer``."""
    controller, terminal = os.openpty()
    try:
        os.write(controller, answer.encode())
        return subprocess.run(
            [sys.executable, "-m", "lane_pg", *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            cwd=REPO,
            env=cli_environment(dsn),
            timeout=60,
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)


async def test_obliterate_asks_on_a_terminal_CLI_12(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("ask")
    job = await backend.add_job(queue, "n")

    declined = await asyncio.to_thread(run_on_a_terminal, "n\n", "obliterate", queue, dsn=pg_dsn)
    assert declined.returncode == 1
    assert "nothing changed" in declined.stdout
    assert await backend.get_job_state(queue, job.id) == "waiting"

    accepted = await asyncio.to_thread(run_on_a_terminal, "y\n", "obliterate", queue, dsn=pg_dsn)
    assert accepted.returncode == 0, accepted.stderr
    assert "removed 1 job(s)" in accepted.stdout
    assert await backend.get_job(queue, job.id) is None


async def test_recover_stalled_requeues_expired_leases_CLI_12(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("stall")
    job = await backend.add_job(queue, "n")
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    await backend.claim_jobs("w", [QueueDemand(queue, 1)], 30, now=an_hour_ago)

    result = await cli("recover-stalled", queue, dsn=pg_dsn)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{queue}\t{job.id}\twaiting",
        "lane_pg: recovered 1 stalled job(s): 1 back to waiting, 0 failed",
    ]
    assert await backend.get_job_state(queue, job.id) == "waiting"
    again = await cli("recover-stalled", queue, dsn=pg_dsn)
    assert again.stdout.endswith("recovered 0 stalled job(s): 0 back to waiting, 0 failed\n")
