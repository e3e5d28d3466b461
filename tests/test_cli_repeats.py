"""``python -m lane_pg repeats [QUEUE]`` and ``repeats remove QUEUE KEY`` in a subprocess,
as a user runs them (REP-10, REP-11)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lane_pg.postgres.backend import PostgresBackend
from tests.test_cli_queue_commands import cli, unique_queue


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def test_repeats_lists_and_removes_a_series_REP_10_REP_11(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("rep")
    job = await backend.add_job(
        queue, "beat", None, {"repeat": {"pattern": "0 0 2 * * * *", "key": "nightly", "limit": 5}}
    )
    listed = await cli("repeats", queue, dsn=pg_dsn)
    assert listed.returncode == 0, listed.stderr
    header, line = listed.stdout.splitlines()
    assert header.split("\t") == ["queue", "key", "next_run", "job", "runs", "schedule"]
    fields = line.split("\t")
    assert fields[:2] == [queue, "nightly"]
    assert fields[2] == job.available_at.isoformat()
    # Nothing ran yet: the owner waiting is the first of five.
    assert fields[3:] == [job.id, "0/5", "cron '0 0 2 * * * *'"]

    removed = await cli("repeats", "remove", queue, "nightly", dsn=pg_dsn)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == (
        f"lane_pg: removed repeat series 'nightly' of queue '{queue}' (its job {job.id})\n"
    )
    assert await backend.get_repeat(queue, "nightly") is None
    assert await backend.get_job(queue, job.id) is None

    empty = await cli("repeats", queue, dsn=pg_dsn)
    assert empty.stdout == f"lane_pg: no repeat series in '{queue}'\n"
    again = await cli("repeats", "remove", queue, "nightly", dsn=pg_dsn)
    assert again.returncode == 1
    assert "has no repeat series 'nightly'" in again.stderr


async def test_repeats_refuses_extra_arguments(pg_dsn: str) -> None:
    result = await cli("repeats", "a", "b", dsn=pg_dsn)
    assert result.returncode == 1
    assert "use `repeats [QUEUE]` or `repeats remove QUEUE KEY`" in result.stderr
