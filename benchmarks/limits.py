"""W7: a rate-limited queue draining beside an unlimited one (RATE-1, DESIGN.md's queue lock).

The limited queue (``bench_limited``, a shared limit of 1,000 claims per second) and the
unlimited one (``bench``) are pre-filled, then worker processes serve both lanes (the
limited one first) in burst mode. Figures: the most jobs of the limited queue claimed in
any one-second window (from the stored ``processed_at``; the limit promises at most 1,000),
its drain rate, and the unlimited queue's throughput, beside a plain drain of the same
unlimited queue alone (W3's shape) in the same run.
"""

from __future__ import annotations

import json

import asyncpg

from benchmarks.common import QUEUE, Reporter, bench_dsn, progress, reset, spawn, wait_all

LIMITED = "bench_limited"
RATE_PER_SECOND = 1000


async def _prefill(conn: asyncpg.Connection, queue: str, n: int) -> None:
    await conn.execute("SELECT lane.set_queue_retention($1, NULL, NULL)", queue)
    for start in range(0, n, 1000):
        k = min(1000, n - start)
        await conn.execute(
            "SELECT cardinality(b.ids) FROM lane.add_jobs_brief($1, $2::text[],"
            " $3::text[]::jsonb[], NULL) b",
            queue,
            ["noop"] * k,
            [json.dumps({"n": start + i}) for i in range(k)],
        )


def _worker_args(concurrency: int, with_limited: bool) -> list[str]:
    lanes = ["--queue", f"{LIMITED}:0", "--queue", f"{QUEUE}:1"] if with_limited else [
        "--queue", QUEUE,
    ]  # fmt: skip
    return [
        "-m", "lane_pg", "worker", "--app", "benchmarks.apps:app", *lanes,
        "--concurrency", str(concurrency), "--dsn", bench_dsn(), "--burst",
    ]  # fmt: skip


async def _drain(
    conn: asyncpg.Connection, n: int, n_limited: int, processes: int, concurrency: int
) -> dict[str, float]:
    """One drain; ``n_limited`` 0 is the plain drain of ``bench`` alone."""
    await reset(conn)
    await _prefill(conn, QUEUE, n)
    if n_limited:
        await _prefill(conn, LIMITED, n_limited)
        await conn.execute(
            "SELECT lane.set_claim_rate_limit($1, $2, 1000)", LIMITED, RATE_PER_SECOND
        )
    await conn.execute("ANALYZE lane.jobs")
    procs = [spawn(_worker_args(concurrency, n_limited > 0)) for _ in range(processes)]
    await wait_all(procs, limit_s=600)
    rows = await conn.fetch(
        "SELECT queue, count(*) FILTER (WHERE state = 'completed' AND attempts_started = 1)"
        " AS once, count(*) AS total,"
        " extract(epoch FROM max(finished_at) - min(processed_at))::float8 AS seconds,"
        " extract(epoch FROM max(processed_at) - min(processed_at))::float8 AS claiming"
        " FROM lane.jobs GROUP BY queue"
    )
    by_queue = {row["queue"]: row for row in rows}
    for queue, expected in ((QUEUE, n), (LIMITED, n_limited)):
        row = by_queue.get(queue)
        got = (0, 0) if row is None else (row["once"], row["total"])
        if got != (expected, expected):
            raise RuntimeError(f"W7 {queue}: expected {expected} jobs completed once, got {got}")
    result = {"plain_rate": n / by_queue[QUEUE]["seconds"]}
    if n_limited:
        # The most claims in [t, t + 1 s) over every claim time t of the limited queue.
        result["window_max"] = await conn.fetchval(
            "SELECT max(c) FROM (SELECT count(*) OVER (ORDER BY processed_at RANGE BETWEEN"
            " CURRENT ROW AND interval '999999 microseconds' FOLLOWING) AS c"
            " FROM lane.jobs WHERE queue = $1) w",
            LIMITED,
        )
        # Counted in whole windows: a sliding log admits each window's 1,000 at its start,
        # so (max - min processed_at) alone would read ~1,250/s for 5,000 jobs.
        result["limited_rate"] = n_limited / (by_queue[LIMITED]["claiming"] + 1.0)
    return result


async def w7(rep: Reporter, runs: int, n: int, n_limited: int, concurrency: int) -> None:
    progress(
        f"W7 limits: {n_limited} jobs limited to {RATE_PER_SECOND}/s beside {n} unlimited,"
        f" c{concurrency}, {runs} runs, 1 and 2 processes"
    )
    conn = await asyncpg.connect(bench_dsn())
    try:
        for processes in (1, 2):
            plain: list[float] = []
            beside: list[float] = []
            window_max: list[float] = []
            limited_rate: list[float] = []
            for _ in range(runs):
                plain.append((await _drain(conn, n, 0, processes, concurrency))["plain_rate"])
                mixed = await _drain(conn, n, n_limited, processes, concurrency)
                beside.append(mixed["plain_rate"])
                window_max.append(mixed["window_max"])
                limited_rate.append(mixed["limited_rate"])
                progress(
                    f"  {processes} proc: plain {plain[-1]:.0f} jobs/s, beside the limited"
                    f" queue {beside[-1]:.0f} jobs/s; limited: max {window_max[-1]:.0f} per"
                    f" 1 s window, {limited_rate[-1]:.0f} jobs/s"
                )
            common = (
                f"{processes} worker process(es), --concurrency {concurrency}, burst; median of"
                f" {runs} runs"
            )
            rep.figure(
                "W7",
                f"limited queue, max claims in any 1 s window x{processes}",
                window_max,
                "jobs",
                raw=None,
                no_baseline=True,
                digits=0,
                notes=f"{n_limited} jobs of {LIMITED} under lane.set_claim_rate_limit(...,"
                f" {RATE_PER_SECOND}, 1000), claimed beside {n} unlimited jobs; the most"
                f" processed_at values in any [t, t + 1 s); the limit allows {RATE_PER_SECOND};"
                f" {common}",
                limit=RATE_PER_SECOND,
            )
            rep.figure(
                "W7",
                f"limited queue drain rate x{processes}",
                limited_rate,
                "jobs/s",
                raw=None,
                no_baseline=True,
                notes=f"{n_limited} / (max - min processed_at of {LIMITED} + the 1 s window): the"
                " limiter admits each window's jobs at its start, so the claims come in bursts;"
                f" {common}",
            )
            rep.figure(
                "W7",
                f"unlimited queue beside the limited one x{processes}",
                beside,
                "jobs/s",
                raw=plain,
                notes=f"{n} jobs of {QUEUE} (no limits), n / (max finished_at - min"
                f" processed_at), drained by workers that also serve {LIMITED} (lane priority"
                f" 0, before {QUEUE}); ratio_to_raw is against the plain drain below; {common}",
            )
            rep.figure(
                "W7",
                f"unlimited queue alone (plain W3 shape) x{processes}",
                plain,
                "jobs/s",
                raw=None,
                notes=f"{n} jobs of {QUEUE} alone, same workers and measure; {common}",
            )
    finally:
        await conn.close()
