"""W5: sustained mixed load: enqueue at stepped fixed rates while two workers process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from benchmarks import raw
from benchmarks.common import (
    QUEUE,
    Reporter,
    bench_dsn,
    lane_worker_args,
    progress,
    raw_worker_args,
    reset,
    spawn,
    stop_all,
    wait_ready,
)

WORKERS = 2
TICK = 0.05
"""The producer enqueues what the rate owes every 50 ms, in one call."""
KEPT_UP_BACKLOG_S = 1.0
"""A step is kept up when its last backlog sample is at most this many seconds of its rate
and the producer reached 95 % of the rate."""


@dataclass
class Step:
    rate: int
    added: int = 0
    seconds: float = 0.0
    end_backlog: int = 0
    peak_backlog: int = 0

    @property
    def achieved(self) -> float:
        return self.added / self.seconds if self.seconds else 0.0

    @property
    def kept_up(self) -> bool:
        return (
            self.achieved >= 0.95 * self.rate and self.end_backlog <= self.rate * KEPT_UP_BACKLOG_S
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "enqueued_per_s": round(self.achieved),
            "end_backlog": self.end_backlog,
            "peak_backlog": self.peak_backlog,
            "kept_up": self.kept_up,
        }


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)
    backlog: list[int] = field(default_factory=list)
    """Waiting count sampled every second, across all steps."""
    completed: int = 0

    @property
    def highest_kept_up(self) -> int:
        best = 0
        for step in self.steps:
            if not step.kept_up:
                break
            best = step.rate
        return best


async def _sustain(
    rates: list[int],
    step_s: float,
    add: Callable[[int, int], Awaitable[None]],
    waiting_sql: str,
) -> Trace:
    """Run the producer through the rate steps while sampling the backlog every second."""
    trace = Trace()
    sampler_conn = await asyncpg.connect(bench_dsn())
    current: list[Step] = []
    stop = asyncio.Event()

    async def sample() -> None:
        next_at = time.monotonic() + 1.0
        while not stop.is_set():
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += 1.0
            waiting = int(await sampler_conn.fetchval(waiting_sql))
            trace.backlog.append(waiting)
            if current:
                current[-1].end_backlog = waiting
                current[-1].peak_backlog = max(current[-1].peak_backlog, waiting)

    sampler = asyncio.create_task(sample())
    n = 0
    try:
        for rate in rates:
            step = Step(rate)
            current.append(step)
            trace.steps.append(step)
            t0 = time.monotonic()
            while (elapsed := time.monotonic() - t0) < step_s:
                owed = int(rate * elapsed) - step.added
                if owed > 0:
                    for start in range(0, owed, 1000):
                        k = min(1000, owed - start)
                        await add(n, k)
                        n += k
                        step.added += k
                await asyncio.sleep(max(0.0, TICK - (time.monotonic() - t0 - elapsed)))
            step.seconds = time.monotonic() - t0
            progress(f"    step {rate}/s: {step.as_json()}")
    finally:
        stop.set()
        await sampler
        await sampler_conn.close()
    return trace


async def _lane(conn: asyncpg.Connection, rates: list[int], step_s: float, c: int) -> Trace:
    await reset(conn)
    producer = await asyncpg.connect(bench_dsn())
    procs: list[subprocess.Popen[bytes]] = []

    async def add(first: int, k: int) -> None:
        await producer.execute(
            "SELECT count(*) FROM lane.add_jobs($1, $2::text[], $3::text[]::jsonb[],"
            " $4::text[]::jsonb[])",
            QUEUE,
            ["noop"] * k,
            [json.dumps({"n": first + i}) for i in range(k)],
            ["{}"] * k,
        )

    try:
        procs = [spawn(lane_worker_args(c, burst=False)) for _ in range(WORKERS)]
        await wait_ready(conn, "lane_pg listener", WORKERS)
        trace = await _sustain(
            rates,
            step_s,
            add,
            f"SELECT count(*) FROM lane.jobs WHERE queue = '{QUEUE}' AND state = 'waiting'",
        )
    finally:
        await stop_all(procs, 60)
        await producer.close()
    # Counted from what is left: the default retention prunes completed rows as it goes.
    unfinished = await conn.fetchval(
        "SELECT count(*) FROM lane.jobs WHERE state NOT IN ('completed', 'failed')"
    )
    trace.completed = sum(step.added for step in trace.steps) - unfinished
    return trace


async def _raw(conn: asyncpg.Connection, rates: list[int], step_s: float) -> Trace:
    await reset(conn)
    producer = await asyncpg.connect(bench_dsn())
    procs: list[subprocess.Popen[bytes]] = []

    async def add(first: int, k: int) -> None:
        payloads = [json.dumps({"n": first + i}) for i in range(k)]
        await raw.insert_many(producer, QUEUE, payloads, notify=True)

    try:
        procs = [spawn(raw_worker_args(burst=False, listen=True)) for _ in range(WORKERS)]
        await wait_ready(conn, "bench_raw worker", WORKERS)
        trace = await _sustain(
            rates,
            step_s,
            add,
            f"SELECT count(*) FROM bench_raw.jobs WHERE queue = '{QUEUE}' AND state = 'ready'",
        )
    finally:
        await stop_all(procs, 60)
        await producer.close()
    trace.completed = await conn.fetchval(
        "SELECT count(*) FROM bench_raw.jobs WHERE state = 'done'"
    )
    return trace


async def w5(rep: Reporter, duration: float, rates: list[int], concurrency: int) -> None:
    step_s = duration / len(rates)
    progress(f"W5 sustained: rates {rates} jobs/s, {step_s:.0f}s each, {WORKERS} workers")
    conn = await asyncpg.connect(bench_dsn())
    try:
        progress("  lane_pg")
        lane = await _lane(conn, rates, step_s, concurrency)
        progress("  raw")
        base = await _raw(conn, rates, step_s)
    finally:
        await conn.close()
    common = (
        f"{duration:.0f}s of load per subject: the enqueue rate steps through {rates} jobs/s,"
        f" {step_s:.0f}s each, while {WORKERS} worker processes run; value = the highest rate"
        f" whose step ended with a backlog <= {KEPT_UP_BACKLOG_S:g}s of that rate (and the"
        " producer reached 95% of it), 0 if none; `backlog` = waiting jobs sampled every"
        " second over the whole run; one run (not 3: the 10-minute budget)"
    )
    rep.figure(
        "W5", f"lane_pg worker x{WORKERS}: highest rate kept up", [lane.highest_kept_up],
        "jobs/s", raw=[base.highest_kept_up] if base.highest_kept_up else None, digits=0,
        notes=f"{common}; python -m lane_pg worker --concurrency {concurrency} (poll 5 s);"
        " producer calls lane.add_jobs every 50 ms with what the rate owes (rows not"
        " decoded); ratio null when raw kept up with no step",
        steps=[s.as_json() for s in lane.steps], backlog=lane.backlog,
        completed=lane.completed,
    )  # fmt: skip
    rep.figure(
        "W5", f"raw worker x{WORKERS}: highest rate kept up", [base.highest_kept_up], "jobs/s",
        raw=None, digits=0,
        notes=f"{common}; baseline: raw workers LISTENing, producer INSERT ... unnest +"
        " pg_notify every 50 ms",
        steps=[s.as_json() for s in base.steps], backlog=base.backlog,
        completed=base.completed,
    )  # fmt: skip
