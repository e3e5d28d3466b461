"""``lane_pg.backend.connect(url)``: one way to open a backend from a URL (App, CLI, code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import lane_pg
from lane_pg.backend import backend_kind, connect, resolve_url
from lane_pg.errors import ConfigurationError, SchemaVersionMismatch
from lane_pg.memory import MemoryBackend
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.postgres.pooler import Target, listen_dsn_of, target_of
from tests.cli_runner import run_lane_pg
from tests.helpers import require_test_redis

REPO = Path(__file__).resolve().parents[1]


def _with_scheme(dsn: str, scheme: str) -> str:
    return f"{scheme}://{dsn.split('://', 1)[1]}"


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("postgresql://u@h/db", "postgres"),
        ("postgres://u@h/db", "postgres"),
        ("POSTGRESQL://u@h/db", "postgres"),
        ("postgresql://postgres:@/postgres?host=/tmp/x", "postgres"),  # the embedded form
        ("memory://", "memory"),
        ("redis://127.0.0.1:6379/0", "redis"),
        ("rediss://u:secret@cache:6380/0?prefix=jobs", "redis"),
        ("redis+cluster://127.0.0.1:7000?prefix=jobs", "redis"),
        ("REDISS+CLUSTER://u:secret@cache:7000", "redis"),
    ],
)
def test_each_scheme_names_its_backend(url: str, kind: str) -> None:
    assert backend_kind(url) == kind


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mysql://root:secret@127.0.0.1/x", "rediss+cluster:// or memory://"),
        ("postgresql+asyncpg://u@h/db", "rediss+cluster:// or memory://"),
        ("host=127.0.0.1 dbname=x", "invalid DSN"),
        ("memory://shared", "memory:// takes no host"),
        ("redis+cluster://u:secret@h:7000/2", "database 0 only"),
    ],
)
async def test_other_urls_are_refused_before_connecting(url: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        backend_kind(url)
    assert fragment in str(refused.value)
    assert "secret" not in str(refused.value)
    with pytest.raises(ConfigurationError):
        await connect(url)


async def test_memory_urls_open_a_new_store_each() -> None:
    first, second = await connect("memory://"), await connect("memory://")
    try:
        assert isinstance(first, MemoryBackend) and isinstance(second, MemoryBackend)
        await first.add_job("q", "n")
        assert sum((await second.get_job_counts("q")).values()) == 0
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
async def test_postgres_urls_open_a_checked_pool(pg_dsn: str, queue_name: str, scheme: str) -> None:
    backend = await connect(_with_scheme(pg_dsn, scheme), schema="lane", max_size=2)
    try:
        assert isinstance(backend, PostgresBackend)
        job = await backend.add_job(queue_name, "n", {"k": 1})
        assert await backend.get_job(queue_name, job.id) == job
    finally:
        await backend.close()
    with pytest.raises(SchemaVersionMismatch):
        await connect(pg_dsn, schema="lane_not_installed")


async def test_no_url_means_lane_pg_dsn(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """None (or "") resolves through $LANE_PG_DSN (else the embedded server: test_cli)."""
    monkeypatch.setenv("LANE_PG_DSN", "memory://")
    assert resolve_url(None) == resolve_url("") == "memory://"
    assert isinstance(await connect(None), MemoryBackend)
    monkeypatch.setenv("LANE_PG_DSN", pg_dsn)
    backend = await connect()
    try:
        assert isinstance(backend, PostgresBackend)
    finally:
        await backend.close()


async def test_an_app_on_memory_adds_and_reads_jobs(queue_name: str) -> None:
    """memory:// end to end through App: add_job, then get_job on the app's backend."""
    app = lane_pg.App("memory://")
    try:
        job = await app.add_job(queue_name, "send", {"to": "a@example.com"}, {"priority": 3})
        backend = await app.backend()
        assert isinstance(backend, MemoryBackend)
        assert await app.backend() is backend  # one backend per app
        stored = await backend.get_job(queue_name, job.id)
        assert stored is not None
        assert (stored.name, stored.data, stored.priority, stored.state) == (
            "send",
            {"to": "a@example.com"},
            3,
            "waiting",
        )
    finally:
        await app.close()


async def test_an_app_on_memory_runs_a_worker_without_a_listen_connection(
    queue_name: str,
) -> None:
    """A memory:// app's worker polls (no wake-up source) and runs its jobs: App names no
    PostgreSQL piece; wake-ups come from the backend's HasWakeups capability."""
    app = lane_pg.App("memory://")
    seen: list[str] = []

    @app.processor("send")
    async def send(job: lane_pg.JobRow, ctx: lane_pg.JobContext) -> lane_pg.types.JSON:
        seen.append(job.id)
        return {"ok": True}

    try:
        job = await app.add_job(queue_name, "send")
        worker = await app.run_worker(lanes=(lane_pg.Lane(queue_name),), burst=True)
        assert worker.notifier is None
        assert seen == [job.id]
        assert await (await app.backend()).get_job_state(queue_name, job.id) == "completed"
    finally:
        await app.close()


async def test_an_app_on_postgres_listens_through_the_backend(pg_dsn: str) -> None:
    """A PostgreSQL app's worker gets its LISTEN notifier from the backend (HasWakeups)."""
    app = lane_pg.App(pg_dsn)
    try:
        worker = await app.create_worker(lanes=(lane_pg.Lane("listens"),), burst=True)
        try:
            assert isinstance(worker.notifier, lane_pg.backend.WakeupSource)
            assert type(worker.notifier).__module__ == "lane_pg.postgres.notifier"
        finally:
            assert worker.notifier is not None
            await worker.notifier.close()
    finally:
        await app.close()


def test_an_app_refuses_a_url_no_backend_opens() -> None:
    with pytest.raises(ConfigurationError, match="invalid DSN"):
        lane_pg.App("mysql://127.0.0.1:3306/x")


async def test_a_redis_url_opens_the_redis_backend_under_its_prefix(redis_url: str) -> None:
    """``redis://...?prefix=NAME``: the Redis backend, its keys under ``{NAME:queue}``
    (the prefix is lane_pg's, not a parameter of the Redis client)."""
    await require_test_redis(redis_url)
    prefix = f"t{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in redis_url else "?"
    try:
        backend = await connect(f"{redis_url}{separator}prefix={prefix}")
    except ConfigurationError as exc:  # pragma: no cover - the server is there in CI
        pytest.skip(f"no usable Redis at {redis_url}: {exc}")
    try:
        assert backend.kind == "redis"
        job = await backend.jobs.add_job("q1", "x", {"n": 1})
        assert (await backend.jobs.get_job("q1", job.id)) == job
        client = backend.client  # type: ignore[attr-defined]
        assert await client.exists(f"{{{prefix}:q1}}:job:{job.id}")
    finally:
        client = backend.client  # type: ignore[attr-defined]
        async for key in client.scan_iter(match=f"{{{prefix}[:}}]*"):
            await client.delete(key)
        await backend.close()


async def test_a_bad_redis_prefix_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="Redis key prefix"):
        await connect("redis://127.0.0.1:6379/0?prefix=a{b")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**clean, "PYTHONPATH": str(REPO), **env},
        timeout=60,
        check=False,
    )


def test_a_driver_is_imported_when_its_backend_is_opened(pg_dsn: str) -> None:
    code = (
        "import asyncio, json, sys, lane_pg\n"
        "def drivers():\n"
        "    return [m for m in ('asyncpg', 'psycopg', 'sqlalchemy') if m in sys.modules]\n"
        "async def main():\n"
        "    seen = [drivers()]\n"
        "    await (await lane_pg.connect('memory://')).close()\n"
        "    seen.append(drivers())\n"
        f"    await (await lane_pg.connect({pg_dsn!r})).close()\n"
        "    seen.append(drivers())\n"
        "    print(json.dumps(seen))\n"
        "asyncio.run(main())\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], [], ["asyncpg"]]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m lane_pg ARGS`` with no LANE_PG_* variable (tests/cli_runner.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANE_PG_")}
    return run_lane_pg(*args, env={**env, "PYTHONPATH": str(REPO)}, cwd=REPO)


def test_the_cli_opens_backends_through_connect() -> None:
    """The CLI's --dsn goes through connect: a URL the driver cannot read is a usage
    error (exit 2, one line, no password), memory:// opens (an empty store of the
    process; stats reads its counts through the contract), and migrate, which installs
    PostgreSQL's schema, says it needs a postgresql:// URL."""
    malformed = _cli("events", "q1", "--dsn", "postgresql://u:secret@127.0.0.1:port/x")
    assert malformed.returncode == 2, malformed.stderr
    assert "invalid DSN" in malformed.stderr and "secret" not in malformed.stderr
    paused = _cli("pause", "q1", "--dsn", "memory://")
    assert (paused.returncode, paused.stdout.strip()) == (0, "lane_pg: queue 'q1' paused")
    stats = _cli("stats", "--dsn", "memory://")
    assert (stats.returncode, stats.stdout.split()[:2]) == (0, ["queue", "paused"])
    migrated = _cli("migrate", "--dsn", "memory://")
    assert migrated.returncode == 2
    assert "expected a URL like postgresql://" in migrated.stderr


# --------------------------------------------------------------------------- poolers


def test_the_pooler_parameter_is_lane_pgs_and_never_reaches_the_driver() -> None:
    pooled = target_of("postgresql://app@bouncer:6432/app?sslmode=disable&pooler=transaction")
    assert pooled == Target("postgresql://app@bouncer:6432/app?sslmode=disable", True)
    assert pooled.asyncpg_options() == {"statement_cache_size": 0}
    assert pooled.psycopg_options() == {"prepare_threshold": None}
    direct = target_of("postgresql://app@db/app?pooler=session")
    assert direct == Target("postgresql://app@db/app", False)
    assert direct.asyncpg_options() == {} and direct.psycopg_options() == {}
    assert target_of("postgresql://app@db/app") == Target("postgresql://app@db/app", False)
    with pytest.raises(ConfigurationError, match=r"pooler='statement'.*transaction, session"):
        target_of("postgresql://app@db/app?pooler=statement")


def test_listen_goes_direct_and_never_through_a_transaction_pooler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pooled, direct = "postgresql://a@bouncer:6432/app?pooler=transaction", "postgresql://a@db/app"
    monkeypatch.delenv("LANE_PG_LISTEN_DSN", raising=False)
    assert listen_dsn_of(direct, None) == direct
    assert listen_dsn_of(pooled, None) is None  # the worker polls
    assert listen_dsn_of(pooled, direct) == direct
    monkeypatch.setenv("LANE_PG_LISTEN_DSN", direct)
    assert listen_dsn_of(pooled, None) == direct
    with pytest.raises(ConfigurationError, match="LISTEN needs a direct connection"):
        listen_dsn_of(direct, pooled)


async def test_a_bad_pooler_value_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="pooler='yes'"):
        await connect("postgresql://nobody@127.0.0.1:1/none?pooler=yes")


def test_pool_size_caps_a_pool_and_is_taken_out_of_the_url() -> None:
    capped = target_of("postgresql://a@db/app?pool_size=2&application_name=x")
    assert capped == Target("postgresql://a@db/app?application_name=x", False, 2)
    both = target_of("postgresql://a@b:6432/app?pooler=transaction&pool_size=3")
    assert (both.transaction_pooler, both.pool_size) == (True, 3)
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(ConfigurationError, match=r"pool_size=.*whole number"):
            target_of(f"postgresql://a@db/app?pool_size={bad}")


async def test_a_pool_size_in_the_dsn_caps_every_pool_the_backend_opens(pg_dsn: str) -> None:
    sep = "&" if "?" in pg_dsn else "?"
    backend = await PostgresBackend.connect(f"{pg_dsn}{sep}pool_size=2")
    try:
        assert backend.pool.get_max_size() == 2
        claim = await backend.dedicated()
        assert claim is not None and claim.pool.get_max_size() == 1  # a cap, never a raise
        await claim.close()
    finally:
        await backend.close()
    wide = await PostgresBackend.connect(f"{pg_dsn}{sep}pool_size=50", max_size=4)
    try:
        assert wide.pool.get_max_size() == 4
    finally:
        await wide.close()
