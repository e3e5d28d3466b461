"""Shared plumbing for the workloads: the bench database, results, subprocesses, stats."""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from lane_pg.postgres.schema import migrate

REPO = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("LANE_BENCH_DB", "lane_bench")
"""The database every run drops and creates again; ``LANE_BENCH_DB`` names another, so runs
of several checkouts on one server do not drop each other's."""
QUEUE = "bench"


def admin_dsn() -> str:
    """A DSN of an existing database on the server, used to (re)create ``lane_bench``."""
    return os.environ.get("LANE_BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def bench_dsn() -> str:
    base = admin_dsn().rsplit("/", 1)[0]
    return f"{base}/{BENCH_DB}"


def progress(message: str) -> None:
    """Progress goes to stderr; stdout carries only the JSON result lines."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- results


@dataclass
class Measurement:
    """One subject's figure over its runs (value = median)."""

    runs: list[float]

    @property
    def median(self) -> float:
        return float(statistics.median(self.runs))


@dataclass
class Reporter:
    settings: str = ""
    lines: list[dict[str, Any]] = field(default_factory=list)

    def emit(self, line: dict[str, Any]) -> None:
        if self.settings and isinstance(line.get("notes"), str):
            line["notes"] = f"{line['notes']} [{self.settings}]"
        self.lines.append(line)
        print(json.dumps(line), flush=True)

    def figure(
        self,
        workload: str,
        subject: str,
        runs: Sequence[float],
        unit: str,
        *,
        raw: Sequence[float] | None,
        notes: str,
        digits: int = 1,
        no_baseline: bool = False,
        **extra: Any,
    ) -> None:
        """A median-of-runs line. ``raw`` is the baseline's runs (None: this is the baseline,
        ratio 1.0; ``no_baseline``: no raw figure exists, ratio null). Ratio is lane_pg / raw of the
        medians, for throughput and latency alike."""
        value = float(statistics.median(runs))
        if no_baseline:
            ratio: float | None = None
        elif raw is None:
            ratio = 1.0
        else:
            base = float(statistics.median(raw))
            ratio = round(value / base, 3) if base else None
        self.emit(
            {
                "workload": workload,
                "subject": subject,
                "value": round(value, digits),
                "unit": unit,
                "ratio_to_raw": ratio,
                "notes": notes,
                "min": round(min(runs), digits),
                "max": round(max(runs), digits),
                "runs": [round(r, digits) for r in runs],
                **extra,
            }
        )


# --------------------------------------------------------------------------- database

RAW_DDL = """
DROP SCHEMA IF EXISTS bench_raw CASCADE;
CREATE SCHEMA bench_raw;
CREATE TABLE bench_raw.jobs (
    id          bigserial PRIMARY KEY,
    queue       text NOT NULL,
    payload     jsonb,
    state       text NOT NULL,
    run_at      timestamptz,
    locked_at   timestamptz,
    -- Two columns beyond the minimal shape, only so the harness can measure the baseline
    -- the way it measures lane_pg (first start to last finish; exactly-once check).
    finished_at timestamptz,
    attempts    integer NOT NULL DEFAULT 0
);
CREATE INDEX jobs_ready_idx ON bench_raw.jobs (id) WHERE state = 'ready';
"""


async def recreate_database() -> None:
    """Drop and recreate ``lane_bench``, migrate lane_pg into it, add the raw schema."""
    conn = await asyncpg.connect(admin_dsn())
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {BENCH_DB}")
    finally:
        await conn.close()
    version = await migrate(bench_dsn())
    conn = await asyncpg.connect(bench_dsn())
    try:
        await conn.execute(RAW_DDL)
    finally:
        await conn.close()
    progress(f"database {BENCH_DB} recreated, lane_pg schema version {version}")


async def drop_database() -> None:
    conn = await asyncpg.connect(admin_dsn())
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    finally:
        await conn.close()


async def reset(conn: asyncpg.Connection) -> None:
    """Empty every lane_pg table but the version records, and the raw table, between runs."""
    tables = await conn.fetch(
        "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) AS t FROM pg_tables"
        " WHERE schemaname = 'lane' AND tablename NOT IN ('schema_version', 'installed_sql')"
    )
    names = ", ".join([r["t"] for r in tables] + ["bench_raw.jobs"])
    await conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")


QUIET_NOTE = (
    "lane.set_queue_events(queue, false), which the README recommends for queues whose"
    " event stream nobody reads"
)


async def record_no_events(conn: asyncpg.Connection) -> None:
    """The README's throughput setting: the benchmark queue records no events."""
    await conn.execute("SELECT lane.set_queue_events($1, false)", QUEUE)


async def server_settings(conn: asyncpg.Connection) -> str:
    names = ["synchronous_commit", "fsync", "shared_buffers", "wal_level", "max_wal_size"]
    values = [f"{n}={await conn.fetchval(f'SHOW {n}')}" for n in names]
    version = await conn.fetchval("SHOW server_version")
    return f"PostgreSQL {version}, {', '.join(values)}, as shipped; {os.cpu_count()} CPUs"


# --------------------------------------------------------------------------- processes


def spawn(args: Sequence[str]) -> subprocess.Popen[bytes]:
    """A child Python process in the repository root; its output goes to our stderr."""
    return subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=sys.stderr, stderr=sys.stderr)


def lane_worker_args(concurrency: int, *, burst: bool, poll: float | None = None) -> list[str]:
    args = [
        "-m", "lane_pg", "worker", "--app", "benchmarks.apps:app", "--queue", QUEUE,
        "--concurrency", str(concurrency), "--dsn", bench_dsn(),
    ]  # fmt: skip
    if burst:
        args.append("--burst")
    if poll is not None:
        args += ["--poll-interval", f"{poll * 1000:g}"]  # milliseconds
    # The cost of an option on the plain workloads: LANE_PG_BENCH_WORKER_ARGS="--metrics-port 0".
    args += os.environ.get("LANE_PG_BENCH_WORKER_ARGS", "").split()
    return args


def raw_worker_args(
    *, burst: bool, listen: bool = False, delete: bool = False, batched: bool = False
) -> list[str]:
    args = ["-m", "benchmarks.raw", "--dsn", bench_dsn(), "--queue", QUEUE]
    if batched:
        args.append("--batched")
    if burst:
        args.append("--burst")
    if listen:
        args.append("--listen")
    if delete:
        args.append("--delete")
    return args


async def wait_all(procs: Sequence[subprocess.Popen[bytes]], limit_s: float) -> None:
    """Wait for the children to exit; kill them (and fail) past ``limit_s`` seconds."""
    deadline = time.monotonic() + limit_s
    for proc in procs:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                raise RuntimeError(f"worker pid {proc.pid} did not finish in {limit_s:.0f}s")
            await asyncio.sleep(0.05)
        if proc.returncode != 0:
            raise RuntimeError(f"worker pid {proc.pid} exited with {proc.returncode}")


async def stop_all(procs: Sequence[subprocess.Popen[bytes]], limit_s: float = 30.0) -> None:
    """SIGTERM the children (graceful stop) and wait for them."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    await wait_all(procs, limit_s)


async def wait_ready(conn: asyncpg.Connection, application_prefix: str, count: int) -> None:
    """Wait until ``count`` sessions whose application_name starts with the prefix exist
    (workers connected and listening), at most 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        n = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE $2",
            BENCH_DB,
            application_prefix + "%",
        )
        if n >= count:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{count} sessions {application_prefix!r}... did not appear in 30 s")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]
