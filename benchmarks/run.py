"""lane_pg benchmark suite: ``python benchmarks/run.py [--only W1,W3] [--quick]``.

Prints one JSON line per figure to stdout (progress goes to stderr). Each workload runs
lane_pg and a raw-SQL baseline (benchmarks/raw.py) against the same freshly created
database, ``lane_bench`` (``$LANE_BENCH_DB``). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncpg

from benchmarks import (
    enqueue,
    flows,
    health,
    limits,
    processing,
    repeat,
    sustained,
)
from benchmarks.common import (
    Reporter,
    bench_dsn,
    drop_database,
    progress,
    recreate_database,
    server_settings,
)

WORKLOADS = (
    "W1", "W2", "W3", "W4", "W5", "W6", "D1", "R1", "W7", "F1", "F2",
    "RW1", "RW2", "RW3", "RW4", "RW6",
)  # fmt: skip
"""RW*: the same workloads on the Redis backend, beside a raw-Redis baseline."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="lane_pg benchmark suite (JSON lines)")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="e.g. W1,W3")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (3)")
    parser.add_argument(
        "--w3-concurrency",
        default="auto",
        help="lane_pg worker --concurrency for W3-W6, or 'auto' to pick the"
        " best of a short sweep (default)",
    )
    parser.add_argument(
        "--w5-duration",
        type=float,
        default=None,
        help="seconds of sustained load per subject in W5 (60; --quick 12)",
    )
    parser.add_argument(
        "--w5-rates",
        default="1000,2000,4000,8000,12000,16000,20000,24000",
        help="enqueue rates stepped through in W5, jobs/s",
    )
    parser.add_argument(
        "--w6-total",
        type=int,
        default=None,
        help="jobs per W6 variant (1000000; --quick 20000)",
    )
    parser.add_argument(
        "--w6-round",
        type=int,
        default=None,
        help="jobs per W6 round (100000; --quick 10000)",
    )
    parser.add_argument(
        "--w6-raw",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also run the raw baseline rounds in W6 (default off: budget)",
    )
    parser.add_argument(
        "--w6-all-variants",
        action="store_true",
        help="also run W6 with remove_on_complete: true (default: the shipped retention only)",
    )
    parser.add_argument(
        "--w6-hold-snapshot",
        type=float,
        default=None,
        metavar="SECONDS",
        help="in W6, another session holds a REPEATABLE READ snapshot open this long from"
        " the start of round --w6-hold-round, while the rounds go on (default off)",
    )
    parser.add_argument(
        "--w6-hold-round",
        type=int,
        default=2,
        help="the W6 round whose start takes the held snapshot (2; at least 2)",
    )
    parser.add_argument(
        "--w6-hold-query",
        default=health.HOLD_QUERY,
        help="the held transaction's first read, which takes its snapshot"
        f" ({health.HOLD_QUERY!r}; 'SELECT 1' locks no table)",
    )
    parser.add_argument(
        "--w7-limited",
        type=int,
        default=None,
        help="jobs of W7's rate-limited queue (1,000/s; default 5000, --quick 2000)",
    )
    parser.add_argument(
        "--f1-flows",
        type=int,
        default=None,
        help="flows of F1, 10 children each (1000; --quick 100)",
    )
    parser.add_argument(
        "--f2-children",
        type=int,
        default=None,
        help="children of F2's one flow (10000; --quick 1000)",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave lane_bench behind")
    args = parser.parse_args(argv)
    args.only = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    unknown = set(args.only) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}")
    return args


async def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    quick = args.quick
    await recreate_database()
    conn = await asyncpg.connect(bench_dsn())
    try:
        rep = Reporter(settings=await server_settings(conn))
    finally:
        await conn.close()
    runs = args.runs
    only = args.only
    concurrency: int | None = None if args.w3_concurrency == "auto" else int(args.w3_concurrency)
    try:
        if "W1" in only:
            await enqueue.w1(rep, runs, 500 if quick else 5000)
        if "D1" in only:
            await enqueue.d1(rep, runs, 500 if quick else 5000)
        if "W2" in only:
            await enqueue.w2(rep, runs, 10_000 if quick else 100_000, 1000)
        if "W3" in only:
            concurrency = await processing.w3(rep, runs, 2000 if quick else 20_000, concurrency)
        elif concurrency is None:
            concurrency = processing.DEFAULT_CONCURRENCY
        if "W4" in only:
            await processing.w4(rep, runs, 100 if quick else 500, concurrency)
        if "R1" in only:
            await repeat.r1(rep, 10.0 if quick else 60.0, concurrency)
        if "W5" in only:
            duration = args.w5_duration or (12.0 if quick else 60.0)
            rates = [int(r) for r in args.w5_rates.split(",")]
            await sustained.w5(rep, duration, rates, concurrency)
        if "W6" in only:
            total = args.w6_total or (20_000 if quick else 1_000_000)
            size = args.w6_round or (10_000 if quick else 100_000)
            await health.w6(
                rep, total, size, concurrency, args.w6_raw, args.w6_all_variants,
                args.w6_hold_snapshot, args.w6_hold_round, args.w6_hold_query,
            )  # fmt: skip
        if "W7" in only:
            limited = args.w7_limited or (2000 if quick else 5000)
            await limits.w7(rep, runs, 5000 if quick else 20_000, limited, concurrency)
        if "F1" in only:
            count = args.f1_flows or (100 if quick else 1000)
            await flows.f1(rep, runs, count, 10, concurrency)
        if "F2" in only:
            await flows.f2(rep, runs, args.f2_children or (1000 if quick else 10_000), concurrency)
        await _redis(rep, args)
    finally:
        if not args.keep_db:
            await drop_database()
    progress(f"done in {time.monotonic() - started:.0f}s")
    return 0


async def _redis(rep: Reporter, args: argparse.Namespace) -> None:
    """The RW* workloads (``benchmarks/redis_workloads.py``), imported only when asked for:
    the Redis client's modules in the process slowed the PostgreSQL W2 by 13 % (more
    objects for every full garbage collection to walk: 76k against 66k jobs/s, quick,
    interleaved runs)."""
    quick, runs, only = args.quick, args.runs, args.only
    if not any(name.startswith("RW") for name in only):
        return
    from benchmarks import redis_workloads

    if "RW1" in only:
        await redis_workloads.rw1(rep, runs, 500 if quick else 5000)
    if "RW2" in only:
        await redis_workloads.rw2(rep, runs, 10_000 if quick else 100_000, 1000)
    if "RW3" in only:
        await redis_workloads.rw3(rep, runs, 2000 if quick else 20_000)
    if "RW4" in only:
        await redis_workloads.rw4(rep, runs, 100 if quick else 500)
    if "RW6" in only:
        await redis_workloads.rw6(rep, 20_000 if quick else 200_000, 10_000 if quick else 50_000)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
