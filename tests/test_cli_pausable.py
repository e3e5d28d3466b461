"""``LANE_PG_PAUSABLE=false``: ``pause`` refuses, ``resume`` still works (PAUSE-10), in a
subprocess as a user runs them."""

from __future__ import annotations

import subprocess

import asyncpg

from tests.test_cli_queue_commands import cli as run
from tests.test_cli_queue_commands import is_paused, unique_queue


async def cli(*args: str, dsn: str, pausable: str) -> subprocess.CompletedProcess[str]:
    return await run(*args, dsn=dsn, extra_env={"LANE_PG_PAUSABLE": pausable})


async def test_pause_refuses_and_resume_works_when_pausing_is_disabled_PAUSE_10(
    pg_dsn: str,
) -> None:
    queue = unique_queue("nopause")
    refused = await cli("pause", queue, dsn=pg_dsn, pausable="false")
    assert refused.returncode == 1, refused
    assert refused.stdout == ""
    assert "pausing is disabled (LANE_PG_PAUSABLE=false)" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1  # one line, no traceback
    assert not await is_paused(pg_dsn, queue)

    # A queue paused before pausing was turned off can still be let go.
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("SELECT lane.pause_queue($1)", queue)
    finally:
        await conn.close()
    resumed = await cli("resume", queue, dsn=pg_dsn, pausable="false")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == f"lane_pg: queue '{queue}' resumed\n"
    assert not await is_paused(pg_dsn, queue)


async def test_pause_runs_when_pausing_is_enabled_PAUSE_10(pg_dsn: str) -> None:
    queue = unique_queue("yespause")
    done = await cli("pause", queue, dsn=pg_dsn, pausable="true")
    assert done.returncode == 0, done.stderr
    assert await is_paused(pg_dsn, queue)
    bad = await cli("pause", queue, dsn=pg_dsn, pausable="perhaps")
    assert bad.returncode == 1
    assert "LANE_PG_PAUSABLE='perhaps'" in bad.stderr
