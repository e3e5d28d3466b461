"""The programs in examples/ run as a user runs them: subprocesses, exit 0, what they print.

Each test gets a database of its own on the test server (the examples use fixed queue
names and create an ``orders`` table), passed as ``LANE_PG_DSN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import NewDatabase
from tests.helpers import open_test_redis

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
ADMIN_DSN = os.environ.get("LANE_PG_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def run_python(*args: str, dsn: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """The interpreter in the repository root, with ``LANE_PG_DSN=dsn`` and no other
    ``LANE_PG_*`` variable (so nothing falls back to the embedded server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["LANE_PG_DSN"] = dsn
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


async def run(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    done = await asyncio.to_thread(run_python, *args, dsn=dsn)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


@pytest.fixture
async def db(new_db: NewDatabase) -> str:
    """A fresh, empty database (the examples migrate it themselves)."""
    return await new_db()


async def fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def json_value(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value


# ------------------------------------------------------------------ transactions
@pytest.mark.parametrize("example", ["tx_psycopg.py", "tx_sqlalchemy.py"])
async def test_transaction_example_commits_both_and_rolls_back_both(db: str, example: str) -> None:
    done = await run(str(EXAMPLES / example), dsn=db)
    assert "committed:   order 1 (1 row) + job receipt:1 on queue 'receipts' (waiting)" in (
        done.stdout
    )
    assert "rolled back: payment of 250000 cents for order 2 declined" in done.stdout
    assert "order 2: 0 rows, job receipt:2: none" in done.stdout

    orders = await fetch(db, "SELECT id, customer FROM orders ORDER BY id")
    assert [(r["id"], r["customer"]) for r in orders] == [(1, "ada@example.com")]
    jobs = await fetch(db, "SELECT queue, id, name, state, data FROM lane.jobs")
    assert [(j["queue"], j["id"], j["name"], j["state"]) for j in jobs] == [
        ("receipts", "receipt:1", "send_receipt", "waiting")
    ]
    assert json_value(jobs[0]["data"]) == {"order_id": 1, "customer": "ada@example.com"}


async def test_transaction_examples_share_the_orders_table(db: str) -> None:
    """Either example may run first; each reuses the table the other created."""
    await run(str(EXAMPLES / "tx_sqlalchemy.py"), dsn=db)
    await run(str(EXAMPLES / "tx_psycopg.py"), dsn=db)
    await run(str(EXAMPLES / "tx_sqlalchemy.py"), dsn=db)
    orders = await fetch(db, "SELECT id FROM orders ORDER BY id")
    assert [r["id"] for r in orders] == [1, 3, 5]
    jobs = await fetch(db, "SELECT id FROM lane.jobs WHERE queue = 'receipts' ORDER BY id")
    assert [j["id"] for j in jobs] == ["receipt:1", "receipt:3", "receipt:5"]


# ------------------------------------------------------------------ quickstart
async def test_quickstart_enqueues_and_prints_the_worker_command(db: str) -> None:
    done = await run(str(EXAMPLES / "quickstart.py"), dsn=db)
    assert done.stdout.count("added    ") == 3
    assert "python -m lane_pg worker --app examples.quickstart:app --burst" in done.stdout
    jobs = await fetch(db, "SELECT name, state FROM lane.jobs WHERE queue = 'quickstart'")
    assert sorted((j["name"], j["state"]) for j in jobs) == [
        ("build_report", "waiting"),
        ("send_welcome", "waiting"),
        ("send_welcome", "waiting"),
    ]


async def test_quickstart_worker_processes_the_jobs(db: str) -> None:
    await run(str(EXAMPLES / "quickstart.py"), dsn=db)
    done = await run(
        "-m", "lane_pg", "worker", "--app", "examples.quickstart:app", "--burst", dsn=db
    )
    assert "welcome mail to ada@example.com" in done.stdout
    assert "welcome mail to grace@example.com" in done.stdout
    assert "report with 60 rows" in done.stdout
    jobs = await fetch(
        db, "SELECT name, state, return_value, progress FROM lane.jobs WHERE queue = 'quickstart'"
    )
    assert {j["state"] for j in jobs} == {"completed"}
    report = next(j for j in jobs if j["name"] == "build_report")
    assert json_value(report["return_value"]) == {"rows": 60}
    assert json_value(report["progress"]) == {"done": 3, "of": 3}
    stats = await run("-m", "lane_pg", "stats", "--queue", "quickstart", "--json", dsn=db)
    assert json.loads(stats.stdout)["completed"] == 3


# ------------------------------------------------------------------ lanes
async def test_lanes_enqueues_interleaved_jobs(db: str) -> None:
    done = await run(str(EXAMPLES / "lanes.py"), dsn=db)
    added = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("added")]
    assert added == ["prompt-1", "control-1", "prompt-2", "control-2", "prompt-3", "control-3"]
    assert (
        "python -m lane_pg worker --app examples.lanes:app --concurrency 1 --burst" in done.stdout
    )


async def test_lanes_worker_runs_control_first(db: str) -> None:
    await run(str(EXAMPLES / "lanes.py"), dsn=db)
    done = await run(
        "-m",
        "lane_pg",
        "worker",
        "--app",
        "examples.lanes:app",
        "--concurrency",
        "1",
        "--burst",
        dsn=db,
    )
    ran = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("ran ")]
    assert ran == ["control-1", "control-2", "control-3", "prompt-1", "prompt-2", "prompt-3"]
    states = await fetch(db, "SELECT DISTINCT state FROM lane.jobs")
    assert [s["state"] for s in states] == ["completed"]


# ------------------------------------------------------------------ demo and facade
@pytest.fixture(params=["postgres", "redis"])
async def demo_url(
    request: pytest.FixtureRequest, new_db: NewDatabase, redis_url: str
) -> AsyncIterator[str]:
    """The demo's backend: a fresh database, or a fresh key prefix on the test Redis
    (its keys deleted afterwards)."""
    if request.param == "postgres":
        yield await new_db()
        return
    client = await open_test_redis(redis_url)
    prefix = f"demo{uuid.uuid4().hex[:10]}"
    try:
        yield f"{redis_url.split('?')[0]}?prefix={prefix}"
    finally:
        async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=500):
            await client.delete(key)
        await client.aclose()


async def test_demo_runs_the_runtime_and_the_facade(demo_url: str) -> None:
    done = await run(str(EXAMPLES / "demo.py"), dsn=demo_url)
    assert f"backend    {'redis' if demo_url.startswith('redis') else 'postgres'}" in done.stdout
    assert "all 7 jobs completed; the series ran 3 times and ended" in done.stdout
    assert "worker ran 7 facade jobs: all completed" in done.stdout
    assert "push_unique True, again False" in done.stdout
    assert "then       batch 'import': 3 imported" in done.stdout
    assert "finally    batch 'import': 100% done, error=None" in done.stdout
    assert "batch      'import' finished: True, 0 failed" in done.stdout
    chain = [line for line in done.stdout.splitlines() if line.startswith("chain      ")]
    assert chain[1:] == [  # the first line is the dispatch
        "chain      fetch for tenant acme",
        "chain      transform for tenant acme",
        "chain      upload for tenant acme",
    ]


async def test_facade_app_is_pushed_and_drained_by_the_worker_cli_PUSH_1_CLI_1(db: str) -> None:
    pushed = await run(str(EXAMPLES / "facade_app.py"), dsn=db)
    assert "pushed 5 jobs" in pushed.stdout
    assert "push_unique for user 99: True then False" in pushed.stdout
    # The delayed push is due 200 ms after it was written: wait for the database to say
    # so (a burst worker leaves jobs that are not due yet).
    for _ in range(100):
        due = await fetch(
            db,
            "SELECT count(*) AS n FROM lane.jobs WHERE state = 'delayed' AND available_at > now()",
        )
        if due[0]["n"] == 0:
            break
        await asyncio.sleep(0.05)
    done = await run("-m", "lane_pg", "worker", "--app", "examples.facade_app", "--burst", dsn=db)
    for line in (
        "welcome mail for user 42",
        "welcome mail for user 7",
        "welcome mail for user 99",
        "invoice for order 1001: 350",
        "invoice for order 1002: 75",
    ):
        assert line in done.stdout
    jobs = await fetch(
        db, "SELECT name, queue, state, data, max_attempts FROM lane.jobs ORDER BY id::bigint"
    )
    assert [(j["name"], j["queue"], j["state"], j["max_attempts"]) for j in jobs] == [
        ("SendWelcomeEmail", "facade-mail", "completed", 5),
        ("SendWelcomeEmail", "facade-mail", "completed", 5),
        ("BuildInvoice", "facade-billing", "completed", 2),
        ("BuildInvoice", "facade-billing", "completed", 2),
        ("SendWelcomeEmail", "facade-mail", "completed", 5),
    ]
    assert done.stdout.count("welcome mail for user 99") == 1
    assert json_value(jobs[2]["data"]) == {"order": 1001, "lines": [250, 100]}
