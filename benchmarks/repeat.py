"""R1: a cron series firing every second while two workers drain other work (issue 10):
every tick runs once and on time, none doubled, and the plain work keeps flowing."""

from __future__ import annotations

import asyncio
import json
import time
from itertools import pairwise

import asyncpg

from benchmarks.common import (
    QUEUE,
    Reporter,
    bench_dsn,
    lane_worker_args,
    percentile,
    progress,
    reset,
    spawn,
    stop_all,
    wait_ready,
)

SERIES = "noop:cron:* * * * * *"
BATCH = 200
BATCH_INTERVAL_S = 0.1  # 2,000 plain jobs/s offered beside the series, at priority 5
PLAIN_OPTIONS = json.dumps({"priority": 5})


async def r1(rep: Reporter, duration: float, concurrency: int) -> None:
    progress(f"R1 cron every second for {duration:.0f}s beside other work, 2 workers")
    conn = await asyncpg.connect(bench_dsn())
    producer = await asyncpg.connect(bench_dsn())
    await reset(conn)
    # Keep every finished job: the default retention (newest 10,000 completed) would prune
    # the early occurrences the counts below are taken from.
    await conn.execute("SELECT lane.set_queue_retention($1, NULL, NULL)", QUEUE)
    procs = [spawn(lane_worker_args(concurrency, burst=False)) for _ in range(2)]
    added = 0
    try:
        await wait_ready(conn, "lane_pg listener", 2)
        await producer.execute(
            "SELECT lane.add_job($1, 'noop', 'null', $2::jsonb)",
            QUEUE,
            json.dumps({"repeat": {"pattern": "* * * * * *"}}),  # priority 0: ahead of them
        )
        started = time.monotonic()
        while time.monotonic() - started < duration:
            await producer.execute(
                "SELECT count(*) FROM lane.add_jobs($1, $2::text[], $3::text[]::jsonb[],"
                " $4::text[]::jsonb[])",
                QUEUE,
                ["noop"] * BATCH,
                ["null"] * BATCH,
                [PLAIN_OPTIONS] * BATCH,
            )
            added += BATCH
            await asyncio.sleep(BATCH_INTERVAL_S)
        while True:  # the owner may be running this instant: its lease refuses removal
            try:
                await producer.execute("SELECT lane.remove_repeat($1, $2)", QUEUE, SERIES)
                break
            except asyncpg.PostgresError as exc:
                if exc.sqlstate != "LN007":
                    raise
                await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
    finally:
        await stop_all(procs)
        await producer.close()
    rows = await conn.fetch(
        "SELECT available_at, extract(epoch FROM processed_at - available_at)::float8 * 1000"
        " AS late_ms FROM lane.jobs WHERE queue = $1 AND repeat_key = $2 AND state = 'completed'"
        " ORDER BY available_at",
        QUEUE,
        SERIES,
    )
    ticks = [row["available_at"] for row in rows]
    # The plain work finished while the series ran, from its first tick to its last
    # (worker start-up on a loaded machine is not counted).
    span = (ticks[-1] - ticks[0]).total_seconds() if len(ticks) > 1 else float("nan")
    plain_in_span = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND repeat_key IS NULL"
        " AND state = 'completed' AND finished_at BETWEEN $2 AND $3",
        QUEUE,
        ticks[0] if ticks else None,
        ticks[-1] if ticks else None,
    )
    plain_done = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE queue = $1 AND repeat_key IS NULL"
        " AND state = 'completed'",
        QUEUE,
    )
    await conn.close()
    late = [row["late_ms"] for row in rows]
    doubled = len(ticks) - len(set(ticks))
    gaps = [(b - a).total_seconds() for a, b in pairwise(ticks)]
    missed = sum(round(gap) - 1 for gap in gaps if gap > 1)
    common = (
        f"cron '* * * * * *' for {elapsed:.1f}s, 2 worker processes x concurrency {concurrency},"
        f" {BATCH} plain jobs (priority 5) added every {BATCH_INTERVAL_S * 1000:.0f} ms beside it"
        f" ({added} added, {plain_done} completed)"
    )
    rep.figure(
        "R1",
        "lane_pg cron ticks run",
        [float(len(ticks))],
        "ticks",
        raw=None,
        no_baseline=True,
        notes=f"{common}; {doubled} doubled, {missed} missed between the first and last tick"
        f" ({span:.0f} s apart)",
        doubled=doubled,
        missed=missed,
    )
    for label, q in (("p50", 50.0), ("p99", 99.0), ("max", 100.0)):
        rep.figure(
            "R1",
            f"lane_pg cron tick start after its time, {label}",
            [percentile(late, q)],
            "ms",
            raw=None,
            no_baseline=True,
            digits=2,
            notes=f"{common}; processed_at - scheduled tick",
        )
    rep.figure(
        "R1",
        "lane_pg plain jobs completed beside the series",
        [plain_in_span / span],
        "jobs/s",
        raw=None,
        no_baseline=True,
        notes=f"{common}; finished between the first and last tick",
    )
