"""W3 (processing throughput) and W4 (enqueue-to-start latency)."""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import asyncpg

from benchmarks import raw
from benchmarks.common import (
    QUEUE,
    QUIET_NOTE,
    Reporter,
    bench_dsn,
    lane_worker_args,
    percentile,
    progress,
    raw_worker_args,
    record_no_events,
    reset,
    spawn,
    stop_all,
    wait_all,
    wait_ready,
)
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.worker import WorkerConfig

SWEEP = (50, 100, 200, 400)
"""lane_pg worker --concurrency values tried (one process, one run each) when not given."""
SHIPPED_CONCURRENCY = WorkerConfig().concurrency
"""What a worker runs with when nothing is set (the "shipped defaults" W3 lines)."""
DEFAULT_CONCURRENCY = 200
"""Used by W4-W6 when W3 is not run and no --w3-concurrency is given."""


# --------------------------------------------------------------------------- pre-enqueue


async def lane_prefill(
    conn: asyncpg.Connection, n: int, options: str = "{}", *, queue: str = QUEUE
) -> None:
    """``n`` noop jobs through lane.add_jobs, 1000 per call (not measured)."""
    for start in range(0, n, 1000):
        k = min(1000, n - start)
        await conn.execute(
            "SELECT count(*) FROM lane.add_jobs($1, $2::text[], $3::text[]::jsonb[],"
            " $4::text[]::jsonb[])",
            queue,
            ["noop"] * k,
            [json.dumps({"n": start + i}) for i in range(k)],
            [options] * k,
        )


async def raw_prefill(conn: asyncpg.Connection, n: int) -> None:
    for start in range(0, n, 1000):
        k = min(1000, n - start)
        await raw.insert_many(conn, QUEUE, [json.dumps({"n": start + i}) for i in range(k)])


class Snapshot:
    """Enqueue once through lane.add_jobs, then restore that exact state before each run
    (jobs, their events, the queue row), which is faster than re-adding."""

    TABLES = ("queues", "jobs", "events")

    def __init__(self, n: int, *, record_events: bool = True) -> None:
        self.n = n
        self.record_events = record_events
        self.schema = "bench_snap" if record_events else "bench_snap_quiet"
        self.taken = False

    async def restore(self, conn: asyncpg.Connection) -> None:
        await reset(conn)
        if not self.taken:
            # Keep every finished row so each job can be checked to have run exactly once:
            # the shipped default prunes completed jobs beyond the newest 10,000 (W6).
            await conn.execute("SELECT lane.set_queue_retention($1, NULL, NULL)", QUEUE)
            if not self.record_events:
                await record_no_events(conn)
            await lane_prefill(conn, self.n)
            await conn.execute(
                f"DROP SCHEMA IF EXISTS {self.schema} CASCADE; CREATE SCHEMA {self.schema}"
            )
            for t in self.TABLES:
                await conn.execute(f"CREATE TABLE {self.schema}.{t} AS SELECT * FROM lane.{t}")
            self.taken = True
        else:
            for t in self.TABLES:
                await conn.execute(
                    f"INSERT INTO lane.{t} OVERRIDING SYSTEM VALUE SELECT * FROM {self.schema}.{t}"
                )
            for t, col in (("jobs", "key"), ("events", "id")):
                await conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('lane.{t}', '{col}'),"
                    f" (SELECT max({col}) FROM lane.{t}))"
                )
        await conn.execute("ANALYZE lane.jobs; ANALYZE lane.events")


# --------------------------------------------------------------------------- W3


async def _lane_drain(
    conn: asyncpg.Connection, snap: Snapshot, processes: int, concurrency: int
) -> float:
    await snap.restore(conn)
    n = snap.n
    started = time.monotonic()
    procs = [spawn(lane_worker_args(concurrency, burst=True)) for _ in range(processes)]
    await wait_all(procs, limit_s=600)
    wall = time.monotonic() - started
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'completed') AS completed,"
        " count(*) FILTER (WHERE attempts_started = 1) AS once, count(*) AS total,"
        " extract(epoch FROM max(finished_at) - min(processed_at))::float8 AS seconds"
        " FROM lane.jobs WHERE queue = $1",
        QUEUE,
    )
    if not (row["completed"] == row["once"] == row["total"] == n):
        raise RuntimeError(f"lane_pg W3: expected {n} jobs completed once each, got {dict(row)}")
    rate = n / row["seconds"]
    progress(
        f"  lane_pg {processes} proc x c{concurrency}: {rate:.0f} jobs/s"
        f" ({row['seconds']:.2f}s in db, {wall:.2f}s wall incl. start-up)"
    )
    return rate


async def _raw_drain(
    conn: asyncpg.Connection, n: int, processes: int, *, batched: bool = False
) -> float:
    await reset(conn)
    await raw_prefill(conn, n)
    await conn.execute("ANALYZE bench_raw.jobs")
    procs = [spawn(raw_worker_args(burst=True, batched=batched)) for _ in range(processes)]
    await wait_all(procs, limit_s=600)
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'done') AS done,"
        " count(*) FILTER (WHERE attempts = 1) AS once, count(*) AS total,"
        " extract(epoch FROM max(finished_at) - min(locked_at))::float8 AS seconds"
        " FROM bench_raw.jobs"
    )
    if not (row["done"] == row["once"] == row["total"] == n):
        raise RuntimeError(f"raw W3: expected {n} jobs done once each, got {dict(row)}")
    rate = n / row["seconds"]
    kind = "raw batched" if batched else "raw"
    progress(f"  {kind} {processes} proc: {rate:.0f} jobs/s ({row['seconds']:.2f}s in db)")
    return rate


async def w3(rep: Reporter, runs: int, n: int, concurrency: int | None) -> int:
    """Drain ``n`` pre-enqueued no-op jobs with 1 and 2 worker processes. Returns the
    lane_pg concurrency used (picked by a short sweep when ``concurrency`` is None)."""
    conn = await asyncpg.connect(bench_dsn())
    sweep: dict[int, float] = {}
    try:
        if concurrency is None:
            sweep_n = max(n // 4, 1000)
            progress(f"W3 concurrency sweep: {sweep_n} jobs, 1 process, {SWEEP}")
            snap = Snapshot(sweep_n)
            for c in SWEEP:
                sweep[c] = await _lane_drain(conn, snap, 1, c)
            concurrency = max(sweep, key=lambda c: sweep[c])
        progress(f"W3 processing: {n} jobs x {runs} runs, 1 and 2 processes, c{concurrency}")
        snap = Snapshot(n)
        quiet_snap = Snapshot(n, record_events=False)
        lane: dict[int, list[float]] = {1: [], 2: []}
        quiet: dict[int, list[float]] = {1: [], 2: []}
        default: dict[int, list[float]] = {1: [], 2: []}
        base: dict[int, list[float]] = {1: [], 2: []}
        strong: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(runs):
            for p in (1, 2):
                lane[p].append(await _lane_drain(conn, snap, p, concurrency))
                quiet[p].append(await _lane_drain(conn, quiet_snap, p, concurrency))
                default[p].append(await _lane_drain(conn, snap, p, SHIPPED_CONCURRENCY))
                base[p].append(await _raw_drain(conn, n, p))
                strong[p].append(await _raw_drain(conn, n, p, batched=True))
    finally:
        await conn.close()
    swept = (
        "concurrency picked by a one-run sweep on 1 process over "
        + ", ".join(f"c{c}: {r:.0f}" for c, r in sweep.items())
        + " jobs/s"
        if sweep
        else "concurrency given on the command line"
    )
    for p in (1, 2):
        common = (
            f"{n} no-op jobs pre-enqueued, {p} worker process(es); jobs/s from min(processed_at)"
            f" to max(finished_at); every job completed exactly once (attempts 1); median of"
            f" {runs} runs"
        )
        rep.figure(
            "W3",
            f"lane_pg worker x{p}",
            lane[p],
            "jobs/s",
            raw=base[p],
            notes=f"{common}; python -m lane_pg worker --burst --concurrency"
            f" {concurrency} ({swept}); pre-enqueued through lane.add_jobs and restored"
            " from a snapshot per run, then ANALYZE; the queue keeps all finished jobs"
            " (lane.set_queue_retention(queue, NULL, NULL)) so every row can be checked",
            concurrency=concurrency,
            ratio_strong=_ratio(lane[p], strong[p]),
        )
        rep.figure(
            "W3",
            f"lane_pg worker x{p}, shipped defaults",
            default[p],
            "jobs/s",
            raw=base[p],
            notes=f"{common}; as above with the shipped default concurrency"
            f" ({SHIPPED_CONCURRENCY}) and nothing else set",
            concurrency=SHIPPED_CONCURRENCY,
            ratio_strong=_ratio(default[p], strong[p]),
        )
        rep.figure(
            "W3",
            f"lane_pg worker x{p}, events off",
            quiet[p],
            "jobs/s",
            raw=base[p],
            notes=f"{common}; as above on a queue that records no events ({QUIET_NOTE})",
            concurrency=concurrency,
            ratio_strong=_ratio(quiet[p], strong[p]),
        )
        rep.figure(
            "W3",
            f"raw worker x{p}",
            base[p],
            "jobs/s",
            raw=None,
            notes=f"{common}; baseline: claim 10 with one UPDATE ... SKIP LOCKED, then"
            " one UPDATE per job, each its own transaction; ANALYZE after the insert",
        )
        rep.figure(
            "W3",
            f"raw batched worker x{p}",
            strong[p],
            "jobs/s",
            raw=base[p],
            notes=f"{common}; the peer harness's baseline (ratio_strong of the lane_pg lines"
            " is against this): claim 10 with one UPDATE ... SKIP LOCKED, run the batch's"
            " handlers concurrently, mark the batch done with one UPDATE",
        )
    return concurrency


def _ratio(runs: list[float], baseline: list[float]) -> float:
    """median(runs) / median(baseline), as Reporter.figure's ratio."""
    return round(statistics.median(runs) / statistics.median(baseline), 3)


# --------------------------------------------------------------------------- W4


async def _paced(n: int, interval: float, add: object) -> None:
    assert callable(add)
    t0 = time.monotonic()
    for i in range(n):
        delay = t0 + i * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await add(i)


async def _wait_for(conn: asyncpg.Connection, sql: str, n: int, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while await conn.fetchval(sql) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"W4: jobs not finished in {limit_s:.0f}s ({sql})")
        await asyncio.sleep(0.05)


async def _lane_latency(conn: asyncpg.Connection, n: int, concurrency: int) -> list[float]:
    await reset(conn)
    backend = await PostgresBackend.connect(bench_dsn(), min_size=1, max_size=1)
    procs = [spawn(lane_worker_args(concurrency, burst=False, poll=30.0))]
    try:
        await wait_ready(conn, "lane_pg listener", 1)
        await asyncio.sleep(1.0)  # let the worker finish its first claim and go idle

        async def add(i: int) -> None:
            await backend.jobs.add_job(QUEUE, "noop", {"n": i})

        await _paced(n, 0.010, add)
        await _wait_for(conn, "SELECT count(*) FROM lane.jobs WHERE state = 'completed'", n)
    finally:
        await stop_all(procs)
        await backend.close()
    rows = await conn.fetch(
        "SELECT extract(epoch FROM processed_at - created_at)::float8 * 1000 AS ms"
        " FROM lane.jobs WHERE queue = $1",
        QUEUE,
    )
    return [r["ms"] for r in rows]


async def _raw_latency(conn: asyncpg.Connection, n: int) -> list[float]:
    await reset(conn)
    client = await asyncpg.connect(bench_dsn())
    procs = [spawn(raw_worker_args(burst=False, listen=True))]
    try:
        await wait_ready(conn, "bench_raw worker", 1)
        await asyncio.sleep(1.0)

        async def add(i: int) -> None:
            await raw.insert_one(client, QUEUE, json.dumps({"n": i}), notify=True)

        await _paced(n, 0.010, add)
        await _wait_for(conn, "SELECT count(*) FROM bench_raw.jobs WHERE state = 'done'", n)
    finally:
        await stop_all(procs)
        await client.close()
    rows = await conn.fetch(
        "SELECT extract(epoch FROM locked_at - run_at)::float8 * 1000 AS ms FROM bench_raw.jobs"
    )
    return [r["ms"] for r in rows]


STATS = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("max", 100.0))


async def w4(rep: Reporter, runs: int, n: int, concurrency: int) -> None:
    """An idle worker; ``n`` jobs enqueued one at a time 10 ms apart."""
    progress(f"W4 latency: {n} jobs 10 ms apart x {runs} runs")
    conn = await asyncpg.connect(bench_dsn())
    lane: dict[str, list[float]] = {name: [] for name, _ in STATS}
    base: dict[str, list[float]] = {name: [] for name, _ in STATS}
    try:
        for _ in range(runs):
            for target, fetch in ((lane, "lane"), (base, "raw")):
                ms = (
                    await _lane_latency(conn, n, concurrency)
                    if fetch == "lane"
                    else await _raw_latency(conn, n)
                )
                for name, q in STATS:
                    target[name].append(percentile(ms, q))
                progress(
                    f"  {fetch}: "
                    + ", ".join(f"{name} {target[name][-1]:.2f} ms" for name, _ in STATS)
                )
    finally:
        await conn.close()
    common = (
        f"{n} jobs enqueued one at a time 10 ms apart to one idle worker process; latency ="
        " processed_at - created_at, both clock_timestamp() on the database (created_at is"
        " taken inside the autocommit add, so the commit is inside the latency); lower is"
        f" better, ratio lane_pg / raw; median over {runs} runs of each run's statistic"
    )
    for name, _ in STATS:
        rep.figure(
            "W4",
            f"lane_pg worker {name}",
            lane[name],
            "ms",
            raw=base[name],
            digits=2,
            notes=f"{common}; python -m lane_pg worker --poll-interval 30000"
            f" --concurrency {concurrency}, woken by lane.add_job's NOTIFY;"
            " enqueued with PostgresBackend.add_job",
        )
        rep.figure(
            "W4",
            f"raw worker {name}",
            base[name],
            "ms",
            raw=None,
            digits=2,
            notes=f"{common}; baseline: INSERT + pg_notify in one statement; the worker"
            " LISTENs and claims on NOTIFY; latency = locked_at - run_at",
        )
