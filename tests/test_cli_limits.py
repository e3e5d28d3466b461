"""``python -m lane_pg limits QUEUE [--rate N/DURATION] [--max-active N] [--clear]`` in a
subprocess, as a user runs it (RATE-2, RATE-7)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from lane_pg import JobRateLimit
from lane_pg.postgres.backend import PostgresBackend
from tests.test_cli_queue_commands import cli, run_cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_limits_shows_none_for_a_new_queue_RATE_2(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("lim")
    result = await cli("limits", queue, "--dsn", pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: queue '{queue}': rate none, max active none\n"
    assert result.stderr == ""
    assert queue not in await backend.list_queues()  # showing creates nothing


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("100/1s", JobRateLimit(100, 1), "100/1s"),
        ("5/500ms", JobRateLimit(5, timedelta(milliseconds=500)), "5/500ms"),
        ("60/1m", JobRateLimit(60, 60), "60/60s"),
        ("10/s", JobRateLimit(10, 1), "10/1s"),
        ("3/1.5s", JobRateLimit(3, 1.5), "3/1500ms"),
        ("1000/1h", JobRateLimit(1000, 3600), "1000/3600s"),
    ],
)
async def test_limits_sets_the_rate_RATE_2(
    pg_dsn: str, backend: PostgresBackend, text: str, limit: JobRateLimit, shown: str
) -> None:
    queue = unique_queue("limrate")
    result = await cli("limits", queue, "--rate", text, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': rate {shown}, max active none\n"
    assert await backend.get_claim_rate_limit(queue) == limit


async def test_limits_sets_and_clears_each_limit_RATE_7(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("limboth")
    result = await cli("limits", queue, "--rate", "5/500ms", "--max-active", "3", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': rate 5/500ms, max active 3\n"
    assert await backend.get_max_active_jobs(queue) == 3

    result = await cli("limits", queue, "--max-active", "none", dsn=pg_dsn)
    assert result.stdout == f"lane_pg: set queue '{queue}': rate 5/500ms, max active none\n"
    assert await backend.get_max_active_jobs(queue) is None

    await backend.set_max_active_jobs(queue, 7)
    result = await cli("limits", queue, "--rate", "NONE", dsn=pg_dsn)
    assert result.stdout == f"lane_pg: set queue '{queue}': rate none, max active 7\n"

    await backend.set_claim_rate_limit(queue, JobRateLimit(2, 1))
    result = await cli("limits", queue, "--clear", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': rate none, max active none\n"
    assert await backend.get_claim_rate_limit(queue) is None
    assert await backend.get_max_active_jobs(queue) is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--rate", "5"], "expected N/DURATION"),
        (["--rate", "5/1"], "expected N/DURATION"),
        (["--rate", "0/1s"], "max must be an integer between 1"),
        (["--rate", "5/0s"], "duration must be 1 ms"),
        (["--rate", "5/0.5ms"], "whole milliseconds"),
        (["--rate=-1/1s"], "expected N/DURATION"),
        (["--rate", "5/30d"], "duration must be 1 ms"),  # days parse, 30 are too long
        (["--rate", "5/1000h"], "duration must be 1 ms"),
        (["--max-active", "0"], "expected a count"),
        (["--max-active", "many"], "expected a count"),
        (["--max-active", "2147483648"], "expected a count"),
        (["--clear", "--rate", "1/1s"], "--clear removes both limits"),
        (["--rate", "1/1s", "--max-active", "x"], "expected a count"),
    ],
)
async def test_limits_refuses_bad_input_and_changes_nothing(
    pg_dsn: str, backend: PostgresBackend, args: list[str], expected: str
) -> None:
    queue = unique_queue("limbad")
    await backend.set_claim_rate_limit(queue, JobRateLimit(9, 9))
    await backend.set_max_active_jobs(queue, 9)
    result = await cli("limits", queue, *args, dsn=pg_dsn)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lane_pg limits: error: ")
    assert expected in lines[0], lines[0]
    assert await backend.get_claim_rate_limit(queue) == JobRateLimit(9, 9)
    assert await backend.get_max_active_jobs(queue) == 9


async def test_limits_refuses_a_bad_queue_name_and_a_bad_dsn() -> None:
    result = await cli("limits", "bad name!", "--dsn", "postgresql://postgres@127.0.0.1:1/x")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "invalid queue name" in result.stderr
    result = await cli("limits", "q1", "--dsn", "postgresql://postgres:secret@127.0.0.1:1/test")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "cannot connect" in result.stderr
    assert "secret" not in result.stderr


def test_limits_help() -> None:
    assert "limits" in run_cli("--help").stdout
    helped = run_cli("limits", "--help")
    assert helped.returncode == 0, helped.stderr
    for option in ("--rate", "--max-active", "--clear", "--dsn"):
        assert option in helped.stdout
