"""``python -m lane_pg``: run as a user runs it. The commands run in this process through
the CLI's entry function (tests/cli_runner.py); the entry point itself, the embedded server
and the worker run as real processes."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from lane_pg.postgres.schema import SCHEMA_VERSION, check_version
from lane_pg.postgres.schema.files import migration_files
from tests.cli_runner import run_lane_pg
from tests.conftest import NewDatabase

ADMIN_DSN = os.environ.get("LANE_PG_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parents[1]


def lane_pg(*args: str, cwd: Path = REPO, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m lane_pg ARGS`` with no LANE_PG_* variable set, in this process."""
    return run_lane_pg(*args, env=_environment(None), cwd=cwd, timeout=timeout)


def _environment(dsn: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if dsn is not None:
        env["LANE_PG_DSN"] = dsn
    return env


def python(
    *args: str, cwd: Path = REPO, timeout: float = 60, dsn: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the interpreter with no LANE_PG_* variable set except ``LANE_PG_DSN=dsn``."""
    env = _environment(dsn)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
async def empty_db(new_db: NewDatabase) -> str:
    return await new_db()


async def test_migrate_installs_then_is_idempotent(empty_db: str) -> None:
    first = await asyncio.to_thread(lane_pg, "migrate", "--dsn", empty_db)
    assert first.returncode == 0, first.stderr
    assert f"to version {SCHEMA_VERSION}" in first.stdout
    second = await asyncio.to_thread(lane_pg, "migrate", "--dsn", empty_db)
    assert second.returncode == 0, second.stderr
    assert f"already at version {SCHEMA_VERSION}" in second.stdout
    conn = await asyncpg.connect(empty_db)
    try:
        assert await check_version(conn, "lane") == SCHEMA_VERSION
        # One row per migration file (numbers are reserved per branch, so they may skip).
        assert await conn.fetchval("SELECT count(*) FROM lane.schema_version") == len(
            migration_files()
        )
    finally:
        await conn.close()


async def test_migrate_custom_schema(empty_db: str) -> None:
    done = await asyncio.to_thread(lane_pg, "migrate", "--dsn", empty_db, "--schema", "lane_custom")
    assert done.returncode == 0, done.stderr
    conn = await asyncpg.connect(empty_db)
    try:
        assert await check_version(conn, "lane_custom") == SCHEMA_VERSION
        assert await conn.fetchval("SELECT to_regnamespace('lane')") is None
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("not a dsn", "invalid DSN"),
        ("mysql://root@127.0.0.1/x", "invalid DSN"),
        ("postgresql://postgres@127.0.0.1:1/test", "cannot migrate"),
        ("postgresql://postgres:secret@127.0.0.1:1/test", "cannot migrate"),
    ],
)
def test_bad_or_unreachable_dsn_prints_one_line(dsn: str, expected: str) -> None:
    done = lane_pg("migrate", "--dsn", dsn)
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]
    assert "secret" not in lines[0]


def test_invalid_schema_name_is_a_usage_error() -> None:
    done = lane_pg("migrate", "--dsn", "postgresql://postgres@127.0.0.1:1/x", "--schema", "a;b")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "invalid schema name" in done.stderr


def test_sql_prints_the_install_script_without_a_database() -> None:
    done = lane_pg("migrate", "--sql", "--schema", "jobs_q")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("-- lane_pg schema 'jobs_q'")
    assert "CREATE TABLE jobs_q.jobs" in done.stdout
    assert "lane.jobs" not in done.stdout


def test_no_command_prints_usage() -> None:
    """The entry point as a real process (``python -m lane_pg``): its exit codes."""
    done = python("-m", "lane_pg")
    assert done.returncode == 2
    assert "usage:" in done.stderr
    helped = python("-m", "lane_pg", "migrate", "--help")
    assert helped.returncode == 0
    assert "--dsn" in helped.stdout


@pytest.mark.skipif(importlib.util.find_spec("pgserver") is None, reason="pgserver missing")
async def test_without_dsn_uses_the_embedded_server(tmp_path: Path) -> None:
    """A12: no --dsn and no LANE_PG_DSN: an embedded PostgreSQL in ./.lane_pg is used."""
    # Real processes: the embedded server lives with the processes that use it.
    done = await asyncio.to_thread(python, "-m", "lane_pg", "migrate", cwd=tmp_path, timeout=110)
    assert done.returncode == 0, done.stderr
    assert f"version {SCHEMA_VERSION}" in done.stdout
    assert (tmp_path / ".lane_pg" / "PG_VERSION").is_file()
    # Said on the first line, with the data directory and the way to a real server.
    notice = done.stderr.splitlines()[0]
    assert "embedded PostgreSQL" in notice, done.stderr
    assert str((tmp_path / ".lane_pg").resolve()) in notice
    assert "--dsn" in notice and "LANE_PG_DSN" in notice
    # The server stopped with the last process using it; the data stayed. Start it again
    # here and check that asyncpg accepts pgserver's unix-socket URI.
    from lane_pg.postgres.embedded import embedded_dsn, release_embedded

    pgdata = tmp_path / ".lane_pg"
    dsn = await asyncio.to_thread(embedded_dsn, pgdata)
    try:
        assert dsn.startswith("postgresql://")
        conn = await asyncpg.connect(dsn)
        try:
            assert await check_version(conn, "lane") == SCHEMA_VERSION
        finally:
            await conn.close()
        # A second process joins the running server instead of starting another one.
        again = await asyncio.to_thread(
            python, "-m", "lane_pg", "migrate", cwd=tmp_path, timeout=110
        )
        assert again.returncode == 0, again.stderr
        assert "already at version" in again.stdout
        assert "embedded PostgreSQL" in again.stderr.splitlines()[0]
        # A worker's start-up line names the store too.
        worker = await asyncio.to_thread(
            lane_pg,
            "worker",
            "--app",
            "tests.worker.apps:app",
            "--queue",
            "embedded_check",
            "--burst",
            cwd=tmp_path,
            timeout=110,
        )
        assert worker.returncode == 0, worker.stderr
        assert "embedded PostgreSQL" in worker.stderr.splitlines()[0]
        started = next(line for line in worker.stdout.splitlines() if " started: " in line)
        assert f"the embedded PostgreSQL in {(tmp_path / '.lane_pg').resolve()}" in started
    finally:
        await asyncio.to_thread(release_embedded, pgdata)


async def test_demo_completes_its_jobs_and_its_series(empty_db: str) -> None:
    done = await asyncio.to_thread(
        python, str(REPO / "examples" / "demo.py"), dsn=empty_db, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("completed ") >= 7  # 4 jobs (1 after a retry) + 3 runs
    assert "failed     flaky_report" in done.stdout
    assert "(same job: True)" in done.stdout
    assert "all 7 jobs completed; the series ran 3 times and ended" in done.stdout
    assert "sales_total" in done.stdout and "result=42" in done.stdout  # the flow's parent
