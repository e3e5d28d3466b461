"""W6: table health over many processed jobs, with and without finished-job retention."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from benchmarks.common import (
    Reporter,
    bench_dsn,
    lane_worker_args,
    progress,
    raw_worker_args,
    reset,
    spawn,
    wait_all,
)
from benchmarks.processing import lane_prefill, raw_prefill

WORKERS = 2
MB = 1024 * 1024

VARIANTS = (
    # (label, lane options, raw worker deletes); only the first runs unless --w6-all-variants
    ("default retention (newest 10,000 completed kept, pruned by the worker)", "{}", False),
    ("remove_on_complete: true", '{"remove_on_complete": true}', True),
)


async def _sizes(conn: asyncpg.Connection, table: str) -> dict[str, Any]:
    # The exited workers flushed their statistics at exit; give them a moment anyway.
    await asyncio.sleep(1.0)
    await conn.execute("SELECT pg_stat_force_next_flush()")
    row = await conn.fetchrow(
        "SELECT pg_total_relation_size(c.oid) AS total, pg_relation_size(c.oid) AS heap,"
        " pg_indexes_size(c.oid) AS indexes, s.n_live_tup, s.n_dead_tup,"
        " s.autovacuum_count, s.autoanalyze_count"
        " FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid"
        " WHERE c.oid = $1::regclass",
        table,
    )
    rows = await conn.fetchval(f"SELECT count(*) FROM {table}")
    return {
        "rows": rows,
        "total_mb": round(row["total"] / MB, 2),
        "heap_mb": round(row["heap"] / MB, 2),
        "indexes_mb": round(row["indexes"] / MB, 2),
        "n_live_tup": row["n_live_tup"],
        "n_dead_tup": row["n_dead_tup"],
        "autovacuum_count": row["autovacuum_count"],
    }


async def _lane_rounds(
    conn: asyncpg.Connection, total: int, size: int, options: str, concurrency: int
) -> list[dict[str, Any]]:
    await reset(conn)
    # TRUNCATE keeps the cumulative counters; start each variant from zero.
    await conn.execute("SELECT pg_stat_reset_single_table_counters('lane.jobs'::regclass)")
    out = []
    for done in range(size, total + size, size):
        t0 = time.monotonic()
        await lane_prefill(conn, size, options)
        t1 = time.monotonic()
        procs = [spawn(lane_worker_args(concurrency, burst=True)) for _ in range(WORKERS)]
        await wait_all(procs, limit_s=900)
        t2 = time.monotonic()
        sizes = await _sizes(conn, "lane.jobs")
        events = await conn.fetchval("SELECT pg_total_relation_size('lane.events')")
        left = await conn.fetchval(
            "SELECT count(*) FROM lane.jobs WHERE state NOT IN ('completed', 'failed')"
        )
        if left:
            raise RuntimeError(f"W6 lane_pg: {left} jobs not finished after the drain")
        out.append(
            {**sizes, "events_total_mb": round(events / MB, 2), "jobs_processed": done,
             "add_s": round(t1 - t0, 1), "drain_s": round(t2 - t1, 1)}
        )  # fmt: skip
        progress(f"  lane_pg {options} round {done}: {out[-1]}")
    return out


async def _raw_rounds(
    conn: asyncpg.Connection, total: int, size: int, delete: bool
) -> list[dict[str, Any]]:
    await reset(conn)
    await conn.execute("SELECT pg_stat_reset_single_table_counters('bench_raw.jobs'::regclass)")
    out = []
    for done in range(size, total + size, size):
        t0 = time.monotonic()
        await raw_prefill(conn, size)
        t1 = time.monotonic()
        procs = [spawn(raw_worker_args(burst=True, delete=delete)) for _ in range(WORKERS)]
        await wait_all(procs, limit_s=900)
        t2 = time.monotonic()
        sizes = await _sizes(conn, "bench_raw.jobs")
        out.append(
            {**sizes, "jobs_processed": done, "add_s": round(t1 - t0, 1),
             "drain_s": round(t2 - t1, 1)}
        )  # fmt: skip
        progress(f"  raw delete={delete} round {done}: {out[-1]}")
    return out


async def w6(
    rep: Reporter, total: int, size: int, concurrency: int, with_raw: bool, all_variants: bool
) -> None:
    progress(f"W6 table health: {total} jobs per variant in rounds of {size}")
    conn = await asyncpg.connect(bench_dsn())
    try:
        for label, options, delete in VARIANTS if all_variants else VARIANTS[:1]:
            lane = await _lane_rounds(conn, total, size, options, concurrency)
            base = await _raw_rounds(conn, total, size, delete) if with_raw else []
            common = (
                f"{label}: rounds of {size} jobs (lane.add_jobs 1000 per call, then drained by"
                f" {WORKERS} worker processes --burst --concurrency {concurrency}), {total}"
                " jobs in all (--w6-total and --w6-round set them);"
                " value = pg_total_relation_size of lane.jobs (heap + indexes + toast) after"
                " the round; n_dead_tup from pg_stat_user_tables; autovacuum as shipped plus"
                " lane.jobs' own reloptions;"
                " one pass, no repeats"
            )
            for i, figures in enumerate(lane):
                raw_fig = base[i] if base else None
                rep.figure(
                    "W6", f"lane_pg {label}, round {i + 1}", [figures["total_mb"]], "MB",
                    raw=[raw_fig["total_mb"]] if raw_fig else None, digits=2,
                    no_baseline=raw_fig is None,
                    notes=common + ("; ratio = lane_pg / raw table size (lower is smaller)"
                                    if raw_fig else "; raw baseline not run (--w6-raw adds it)"),
                    round=i + 1, **figures,
                )  # fmt: skip
            for i, figures in enumerate(base):
                rep.figure(
                    "W6", f"raw {'DELETE' if delete else 'UPDATE to done'}, round {i + 1}",
                    [figures["total_mb"]], "MB", raw=None, digits=2,
                    notes=f"{common}; baseline: bench_raw.jobs with the raw workers, which"
                    f" {'delete each job' if delete else 'keep each job as done'}",
                    round=i + 1, **figures,
                )  # fmt: skip
    finally:
        await conn.close()
