"""``python -m lane_pg stats | pause | resume`` as a user runs them, through the CLI's entry
function in this process (tests/cli_runner.py); ``run_cli`` and ``cli`` serve the other
command tests too."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from lane_pg import JobOptions
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import QueueDemand
from tests.cli_runner import run_lane_pg

REPO = Path(__file__).resolve().parents[1]
HEADINGS = [
    "queue",
    "paused",
    "waiting",
    "delayed",
    "active",
    "waiting-children",
    "completed",
    "failed",
]


def cli_environment(dsn: str | None) -> dict[str, str]:
    """This process's environment with no LANE_PG_* variable but ``LANE_PG_DSN=dsn``, and
    the repository on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if dsn is not None:
        env["LANE_PG_DSN"] = dsn
    return env


def run_cli(
    *args: str, dsn: str | None = None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m lane_pg ARGS`` with no LANE_PG_* variable but ``LANE_PG_DSN=dsn`` and
    ``extra_env`` (in this process: tests/cli_runner.py)."""
    env = cli_environment(dsn)
    env.update(extra_env or {})
    return run_lane_pg(*args, env=env, cwd=REPO)


async def cli(
    *args: str, dsn: str | None = None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_cli, *args, dsn=dsn, extra_env=extra_env)


def unique_queue(tag: str) -> str:
    return f"cliq_{tag}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def backend(pg_dsn: str) -> AsyncIterator[PostgresBackend]:
    be = await PostgresBackend.connect(pg_dsn, max_size=2)
    yield be
    await be.close()


async def is_paused(dsn: str, queue: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT lane.is_queue_paused($1)", queue))
    finally:
        await conn.close()


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
    lines = stdout.rstrip("\n").splitlines()
    assert lines, "no output"
    return lines, [line.split() for line in lines]


# ------------------------------------------------------------------ pause / resume
async def test_pause_then_resume(pg_dsn: str) -> None:
    queue = unique_queue("pr")
    assert not await is_paused(pg_dsn, queue)

    paused = await cli("pause", queue, "--dsn", pg_dsn)
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout == f"lane_pg: queue '{queue}' paused\n"
    # A name nothing used before is paused ahead of time, with a warning (a typo shows).
    assert paused.stderr == (
        f"lane_pg: queue '{queue}' has no jobs and no workers yet: paused ahead of time;"
        " check the name\n"
    )
    assert await is_paused(pg_dsn, queue)

    again = await cli("pause", queue, dsn=pg_dsn)  # LANE_PG_DSN instead of --dsn
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"lane_pg: queue '{queue}' paused (it was already paused)\n"
    assert again.stderr == ""
    assert await is_paused(pg_dsn, queue)

    resumed = await cli("resume", queue, "--dsn", pg_dsn)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == f"lane_pg: queue '{queue}' resumed\n"
    assert not await is_paused(pg_dsn, queue)

    idle = await cli("resume", queue, dsn=pg_dsn)
    assert idle.returncode == 0, idle.stderr
    assert idle.stdout == f"lane_pg: queue '{queue}' resumed (it was not paused)\n"
    assert not await is_paused(pg_dsn, queue)


async def test_paused_queue_is_not_claimed_until_resumed(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    queue = unique_queue("claim")
    job = await backend.add_job(queue, "work", {"n": 1})
    assert (await cli("pause", queue, dsn=pg_dsn)).returncode == 0
    assert await backend.claim_jobs("w1", [QueueDemand(queue, limit=5)], lease=30) == []
    assert (await cli("resume", queue, dsn=pg_dsn)).returncode == 0
    claimed = await backend.claim_jobs("w1", [QueueDemand(queue, limit=5)], lease=30)
    assert [j.id for j in claimed] == [job.id]


async def test_pause_and_resume_write_events(pg_dsn: str, backend: PostgresBackend) -> None:
    queue = unique_queue("ev")
    assert (await cli("pause", queue, dsn=pg_dsn)).returncode == 0
    assert (await cli("resume", queue, dsn=pg_dsn)).returncode == 0
    events = await backend.read_events(queue)
    assert [e.event for e in events][-2:] == ["paused", "resumed"]


# ------------------------------------------------------------------ stats
async def test_stats_table_counts_each_state(pg_dsn: str, backend: PostgresBackend) -> None:
    busy, quiet, unknown = unique_queue("a"), unique_queue("b"), unique_queue("c")
    for n in range(3):
        await backend.add_job(busy, "w", {"n": n})
    await backend.add_job(busy, "later", None, JobOptions(delay=3600))
    claimed = await backend.claim_jobs("w1", [QueueDemand(busy, limit=3)], lease=60)
    assert len(claimed) == 3
    done, bad, running = claimed
    assert done.lock_token and bad.lock_token
    await backend.complete_job(busy, done.id, done.lock_token, {"ok": True})
    await backend.fail_job(busy, bad.id, bad.lock_token, "boom")
    await backend.add_job(quiet, "w")
    await backend.pause_queue(quiet)

    result = await cli(
        "stats", "--queue", quiet, "--queue", unknown, "--queue", busy, "--dsn", pg_dsn
    )
    assert result.returncode == 0, result.stderr
    lines, rows = table(result.stdout)
    assert rows[0] == HEADINGS
    assert [row[0] for row in rows[1:]] == sorted([busy, quiet, unknown])
    by_queue = {row[0]: row[1:] for row in rows[1:]}
    #                        paused waiting delayed active w-children completed failed
    assert by_queue[busy] == ["no", "0", "1", "1", "0", "1", "1"]
    assert by_queue[quiet] == ["yes", "1", "0", "0", "0", "0", "0"]
    assert by_queue[unknown] == ["no", "0", "0", "0", "0", "0", "0"]
    # Aligned: every column ends (numbers) or starts (queue) at the same offset.
    for heading in HEADINGS[1:]:
        end = lines[0].index(heading) + len(heading)
        for line in lines[1:]:
            assert line[end - 1] != " " and line[end : end + 1] in ("", " "), (heading, line)
    assert len({len(line) for line in lines}) == 1
    assert running.state == "active"


async def test_stats_json_one_object_per_line(pg_dsn: str, backend: PostgresBackend) -> None:
    first, second = unique_queue("j1"), unique_queue("j2")
    await backend.add_job(first, "w")
    await backend.add_job(first, "w")
    await backend.add_job(second, "w", None, JobOptions(delay=600))
    await backend.pause_queue(second)

    result = await cli("stats", "--json", "--queue", second, "--queue", first, dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert objects == [
        {
            "queue": first,
            "paused": False,
            "waiting": 2,
            "delayed": 0,
            "active": 0,
            "waiting_children": 0,
            "completed": 0,
            "failed": 0,
        },
        {
            "queue": second,
            "paused": True,
            "waiting": 0,
            "delayed": 1,
            "active": 0,
            "waiting_children": 0,
            "completed": 0,
            "failed": 0,
        },
    ]


async def test_stats_without_filter_lists_every_queue_sorted(
    pg_dsn: str, backend: PostgresBackend
) -> None:
    ours = sorted([unique_queue("z"), unique_queue("y")])
    for queue in ours:
        await backend.add_job(queue, "w")
    result = await cli("stats", dsn=pg_dsn)
    assert result.returncode == 0, result.stderr
    _, rows = table(result.stdout)
    assert rows[0] == HEADINGS
    names = [row[0] for row in rows[1:]]
    assert names == sorted(names)
    assert set(ours) <= set(names)
    counts = await backend.pool.fetchval("SELECT count(*) FROM lane.queue_stats")
    assert len(names) >= len(ours) and counts >= len(ours)


# ------------------------------------------------------------------ failures
@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("not a dsn", "invalid DSN"),
        ("postgresql://postgres@127.0.0.1:1/test", "cannot connect"),
        ("postgresql://postgres:secret@127.0.0.1:1/test", "cannot connect"),
    ],
)
@pytest.mark.parametrize(
    "command", [["stats"], ["pause", "q1"], ["resume", "q1"], ["events", "q1"]]
)
async def test_bad_dsn_exits_non_zero_with_one_line(
    command: list[str], dsn: str, expected: str
) -> None:
    result = await cli(*command, "--dsn", dsn)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"lane_pg {command[0]}: error: ")
    assert expected in lines[0]
    assert "secret" not in lines[0]


async def test_unknown_database_and_missing_schema(pg_dsn: str) -> None:
    head, _, _ = pg_dsn.partition("?")
    nodb = head.rsplit("/", 1)[0] + f"/no_such_db_{uuid.uuid4().hex[:8]}"
    result = await cli("stats", "--dsn", nodb)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "does not exist" in result.stderr

    result = await cli("pause", "q1", "--dsn", pg_dsn, "--schema", "lane_not_installed")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "not installed" in result.stderr


async def test_invalid_queue_name_is_refused(pg_dsn: str) -> None:
    for command in (
        ["pause", "bad name!"],
        ["resume", "bad name!"],
        ["stats", "--queue", "bad name!"],
        ["events", "bad name!"],
    ):
        result = await cli(*command, dsn=pg_dsn)
        assert result.returncode == 1, command
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and "invalid queue name" in result.stderr


def test_help_lists_the_commands() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    for name in ("stats", "pause", "resume", "events"):
        assert name in done.stdout
    for name, option in (
        ("stats", "--json"),
        ("pause", "QUEUE"),
        ("resume", "QUEUE"),
        ("events", "--record"),
    ):
        helped = run_cli(name, "--help")
        assert helped.returncode == 0, helped.stderr
        assert option in helped.stdout and "--dsn" in helped.stdout
