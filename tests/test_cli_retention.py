"""``python -m lane_pg retention QUEUE [--keep-completed N|all] [--keep-failed N|all]`` in a
subprocess, as a user runs it (bounded queue retention, RET-1)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueRetention
from tests.test_cli_queue_commands import cli, run_cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_retention_shows_the_defaults_of_a_new_queue_RET_1(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("show")
    result = await cli("retention", queue, "--dsn", pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: queue '{queue}': keep completed 10000, keep failed 100000\n"
    assert result.stderr == ""
    assert queue not in await backend.list_queues()  # showing creates nothing


async def test_retention_sets_counts_and_all_RET_1(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("set")
    result = await cli(
        "retention", queue, "--keep-completed", "5", "--keep-failed", "all", dsn=pg_dsn
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': keep completed 5, keep failed all\n"
    assert await backend.get_queue_retention(queue) == QueueRetention(5, None)
    assert queue in await backend.list_queues()

    # An option left out keeps its value.
    result = await cli("retention", queue, "--keep-failed", "7", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lane_pg: set queue '{queue}': keep completed 5, keep failed 7\n"
    result = await cli("retention", queue, "--keep-completed", "ALL", dsn=pg_dsn)
    assert result.stdout == f"lane_pg: set queue '{queue}': keep completed all, keep failed 7\n"
    assert await backend.get_queue_retention(queue) == QueueRetention(None, 7)

    shown = await cli("retention", queue, dsn=pg_dsn)
    assert shown.stdout == f"lane_pg: queue '{queue}': keep completed all, keep failed 7\n"


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--keep-completed", "-1", "expected a count"),
        ("--keep-failed", "abc", "expected a count"),
        ("--keep-completed", "1.5", "expected a count"),
        ("--keep-failed", "2147483648", "expected a count"),
    ],
)
async def test_retention_refuses_bad_counts_and_changes_nothing_RET_1(
    pg_dsn: str, backend: PostgresBackend, option: str, value: str, expected: str
) -> None:
    queue = unique_queue("bad")
    await backend.set_queue_retention(queue, keep_completed=4, keep_failed=6)
    result = await cli("retention", queue, option, value, dsn=pg_dsn)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lane_pg retention: error: ")
    assert expected in lines[0]
    assert await backend.get_queue_retention(queue) == QueueRetention(4, 6)


async def test_retention_invalid_queue_and_bad_dsn_RET_1(pg_dsn: str) -> None:
    result = await cli("retention", "bad name!", dsn=pg_dsn)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "invalid queue name" in result.stderr
    result = await cli("retention", "q1", "--dsn", "postgresql://postgres:secret@127.0.0.1:1/x")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "cannot connect" in result.stderr
    assert "secret" not in result.stderr


def test_help_lists_the_retention_command() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    assert "retention" in done.stdout
    helped = run_cli("retention", "--help")
    assert helped.returncode == 0, helped.stderr
    for option in ("QUEUE", "--keep-completed", "--keep-failed", "--dsn"):
        assert option in helped.stdout
