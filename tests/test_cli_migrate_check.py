"""The start-up check in real processes (SCH-6, CLI-1): ``python -m lane_pg worker`` refuses
a schema whose functions were changed by hand with psql after migrate, with one line naming
``migrate``, and starts once ``python -m lane_pg migrate`` has run again."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from tests.conftest import NewDatabase
from tests.test_cli import REPO, lane_pg, python

# A body changed in place, as someone "fixing" production by hand would.
HAND_EDIT = """
CREATE OR REPLACE FUNCTION lane.get_job_state(p_queue text, p_id text)
RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'active'::text $$;
"""


def _psql(dsn: str, script: str) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", script],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _burst_worker(dsn: str) -> subprocess.CompletedProcess[str]:
    """One ``worker --burst`` of the test app on a queue of its own: it starts, finds
    nothing to do and exits 0, or refuses to start."""
    return python(
        "-m",
        "lane_pg",
        "worker",
        "--app",
        "tests.worker.apps:app",
        "--queue",
        "sqlver_check",
        "--burst",
        dsn=dsn,
        cwd=REPO,
    )


async def test_worker_refuses_functions_changed_by_hand_until_migrate_runs_SCH_6(
    new_db: NewDatabase,
) -> None:
    dsn = await new_db()
    migrated = await asyncio.to_thread(lane_pg, "migrate", "--dsn", dsn)
    assert migrated.returncode == 0, migrated.stderr
    started = await asyncio.to_thread(_burst_worker, dsn)
    assert started.returncode == 0, started.stderr
    assert "started" in started.stdout

    await asyncio.to_thread(_psql, dsn, HAND_EDIT)
    refused = await asyncio.to_thread(_burst_worker, dsn)
    assert refused.returncode not in (0, None), refused.stdout
    assert "started" not in refused.stdout
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, refused.stderr
    assert "python -m lane_pg migrate" in lines[0]
    assert "changed by hand" in lines[0]

    again = await asyncio.to_thread(lane_pg, "migrate", "--dsn", dsn)
    assert again.returncode == 0, again.stderr
    assert "functions refreshed" in again.stdout
    restarted = await asyncio.to_thread(_burst_worker, dsn)
    assert restarted.returncode == 0, restarted.stderr
    assert "started" in restarted.stdout
