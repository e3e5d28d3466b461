"""The workloads on Redis: lane_pg's Redis backend beside a raw-Redis baseline in the same
run (``benchmarks/README.md``). The baseline is a plain list queue with no semantics: a
job is a hash plus its id pushed on a list (MULTI: HSET + LPUSH), claimed with (B)LMOVE to a
busy list and marked done with a hash write and an LREM. Every run uses a key prefix of its
own on ``$LANE_BENCH_REDIS`` (default redis://127.0.0.1:6379/0) and deletes its keys after;
the server's other keys are never touched.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from benchmarks.common import QUEUE, Reporter, percentile, progress, spawn, stop_all, wait_all
from lane_pg.redis.backend import RedisBackend
from lane_pg.types import JobSpec

REDIS_URL = os.environ.get("LANE_BENCH_REDIS", "redis://127.0.0.1:6379/0")
CONCURRENCY = 50


def _prefix() -> str:
    return f"bench{uuid.uuid4().hex[:10]}"


async def _drop(client: Redis, prefix: str) -> None:
    async for key in client.scan_iter(match=f"{{{prefix}[:}}]*", count=1000):
        await client.delete(key)


async def _memory(client: Redis) -> int:
    info: dict[str, Any] = await client.info("memory")
    return int(info["used_memory"])


async def _timed(work: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def _raw_add(client: Redis, prefix: str, ids: range) -> None:
    async with client.pipeline(transaction=True) as pipe:
        for i in ids:
            pipe.hset(
                f"{{{prefix}}}:job:{i}",
                mapping={
                    "data": json.dumps({"n": i}),
                    "state": "ready",
                    "c": time.time() * 1000,
                },
            )
        pipe.lpush(f"{{{prefix}}}:ready", *ids)
        await pipe.execute()


async def rw1(rep: Reporter, runs: int, n: int) -> None:
    """One add per call, one client."""
    progress(f"W1 on Redis: {n} jobs x {runs} runs")
    client = Redis.from_url(REDIS_URL)
    lane: list[float] = []
    raw: list[float] = []
    try:
        for _ in range(runs):
            prefix = _prefix()
            backend = RedisBackend(client, prefix=prefix, owns_client=False)

            async def add_lane(backend: RedisBackend = backend) -> None:
                for i in range(n):
                    await backend.jobs.add_job(QUEUE, "noop", {"n": i})

            lane.append(n / await _timed(add_lane))
            await _drop(client, prefix)
            prefix = _prefix()

            async def add_raw(prefix: str = prefix) -> None:
                for i in range(n):
                    await _raw_add(client, prefix, range(i, i + 1))

            raw.append(n / await _timed(add_raw))
            await _drop(client, prefix)
    finally:
        await client.aclose()
    notes = f"{n} jobs added one call at a time by one client; median of {runs} runs"
    rep.figure(
        "W1",
        "lane_pg on Redis add_job",
        lane,
        "jobs/s",
        raw=raw,
        backend="redis",
        notes=f"{notes}; RedisBackend.jobs.add_job (one EVALSHA of add_jobs.lua)",
    )
    rep.figure(
        "W1",
        "raw Redis MULTI HSET+LPUSH",
        raw,
        "jobs/s",
        raw=None,
        backend="redis",
        notes=f"{notes}; baseline: MULTI HSET + LPUSH per job",
    )


async def rw2(rep: Reporter, runs: int, n: int, batch: int) -> None:
    """Bulk adds of ``batch`` jobs per call."""
    progress(f"W2 on Redis: {n} jobs in calls of {batch} x {runs} runs")
    client = Redis.from_url(REDIS_URL)
    lane: list[float] = []
    raw: list[float] = []
    try:
        for _ in range(runs):
            prefix = _prefix()
            backend = RedisBackend(client, prefix=prefix, owns_client=False)

            async def add_lane(backend: RedisBackend = backend) -> None:
                for start in range(0, n, batch):
                    specs = [JobSpec("noop", {"n": i}) for i in range(start, start + batch)]
                    await backend.jobs.add_jobs(QUEUE, specs)

            lane.append(n / await _timed(add_lane))
            await _drop(client, prefix)
            prefix = _prefix()

            async def add_raw(prefix: str = prefix) -> None:
                for start in range(0, n, batch):
                    await _raw_add(client, prefix, range(start, start + batch))

            raw.append(n / await _timed(add_raw))
            await _drop(client, prefix)
    finally:
        await client.aclose()
    notes = f"{n} jobs added {batch} per call by one client; median of {runs} runs"
    rep.figure(
        "W2",
        "lane_pg on Redis add_jobs",
        lane,
        "jobs/s",
        raw=raw,
        backend="redis",
        notes=f"{notes}; RedisBackend.jobs.add_jobs (one EVALSHA per call)",
    )
    rep.figure(
        "W2",
        "raw Redis pipelined HSET+LPUSH",
        raw,
        "jobs/s",
        raw=None,
        backend="redis",
        notes=f"{notes}; baseline: one MULTI of HSETs and an LPUSH",
    )


def _worker(kind: str, prefix: str, *, burst: bool, poll: float = 1.0) -> list[str]:
    args = [
        "-m",
        "benchmarks.redis_worker",
        kind,
        "--url",
        REDIS_URL,
        "--prefix",
        prefix,
        "--queue",
        QUEUE,
        "--concurrency",
        str(CONCURRENCY),
        "--poll",
        str(poll),
    ]
    return [*args, "--burst"] if burst else args


async def _lane_times(
    client: Redis, prefix: str, n: int, first: int = 1
) -> list[tuple[float, float, float]]:
    """(created, started, finished) ms of the jobs ``first`` .. ``first + n - 1`` of the
    lane_pg run, checking each was completed exactly once."""
    backend = RedisBackend(client, prefix=prefix, owns_client=False)
    keys = backend.keys(QUEUE)
    async with client.pipeline(transaction=False) as pipe:
        for i in range(first, first + n):
            pipe.hmget(
                keys.job(str(i)),
                "created_at",
                "processed_at",
                "finished_at",
                "state",
                "attempts_started",
            )
        rows: list[list[bytes | None]] = await pipe.execute()
    out = []
    for row in rows:
        if row[3] != b"completed" or row[4] != b"1":
            raise RuntimeError(f"a job was not completed exactly once: {row}")
        out.append((float(row[0] or 0), float(row[1] or 0), float(row[2] or 0)))
    return out


async def _raw_times(client: Redis, prefix: str, n: int) -> list[tuple[float, float, float]]:
    async with client.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.hmget(f"{{{prefix}}}:job:{i}", "c", "s", "f", "state")
        rows: list[list[bytes | None]] = await pipe.execute()
    out = []
    for row in rows:
        if row[3] != b"done":
            raise RuntimeError(f"a raw job was not done: {row}")
        out.append((float(row[0] or 0), float(row[1] or 0), float(row[2] or 0)))
    return out


def _rate(times: list[tuple[float, float, float]]) -> float:
    span = (max(t[2] for t in times) - min(t[1] for t in times)) / 1000
    return len(times) / span if span > 0 else float("nan")


async def _drain(client: Redis, kind: str, n: int, processes: int) -> float:
    prefix = _prefix()
    try:
        if kind == "lane":
            backend = RedisBackend(client, prefix=prefix, owns_client=False)
            # Every job kept, so each can be checked and timed: the default retention (the
            # newest 10,000 completed) deletes the oldest of 20,000 as the drain finishes them.
            await backend.queues.set_queue_retention(QUEUE, keep_completed=None, keep_failed=None)
            for start in range(0, n, 1000):
                specs = [JobSpec("noop", {"n": i}) for i in range(start, min(start + 1000, n))]
                await backend.jobs.add_jobs(QUEUE, specs)
        else:
            for start in range(0, n, 1000):
                await _raw_add(client, prefix, range(start, min(start + 1000, n)))
        procs = [spawn(_worker(kind, prefix, burst=True)) for _ in range(processes)]
        await wait_all(procs, 300)
        times = await (_lane_times if kind == "lane" else _raw_times)(client, prefix, n)
        return _rate(times)
    finally:
        await _drop(client, prefix)


async def rw3(rep: Reporter, runs: int, n: int) -> None:
    """Drain ``n`` pre-enqueued no-op jobs with 1 and 2 worker processes."""
    progress(f"W3 on Redis: {n} jobs x {runs} runs, 1 and 2 processes, c{CONCURRENCY}")
    client = Redis.from_url(REDIS_URL)
    lane: dict[int, list[float]] = {1: [], 2: []}
    raw: dict[int, list[float]] = {1: [], 2: []}
    try:
        for _ in range(runs):
            for p in (1, 2):
                lane[p].append(await _drain(client, "lane", n, p))
                raw[p].append(await _drain(client, "raw", n, p))
    finally:
        await client.aclose()
    for p in (1, 2):
        notes = (
            f"{n} no-op jobs pre-enqueued, {p} worker process(es) of concurrency {CONCURRENCY};"
            f" jobs/s from the first start to the last finish; median of {runs} runs"
        )
        rep.figure(
            "W3",
            f"lane_pg on Redis worker x{p}",
            lane[p],
            "jobs/s",
            raw=raw[p],
            backend="redis",
            concurrency=CONCURRENCY,
            notes=f"{notes}; lane_pg's Worker over RedisBackend, burst; every job"
            " completed exactly once (attempts 1)",
        )
        rep.figure(
            "W3",
            f"raw Redis worker x{p}",
            raw[p],
            "jobs/s",
            raw=None,
            backend="redis",
            concurrency=CONCURRENCY,
            notes=f"{notes}; baseline: LMOVE ready->busy, MULTI HSET done + LREM",
        )


async def _latency(client: Redis, kind: str, n: int) -> list[float]:
    prefix = _prefix()
    try:
        if kind == "lane":
            backend = RedisBackend(client, prefix=prefix, owns_client=False)
            await backend.jobs.add_job(QUEUE, "noop", None, {"delay_ms": 3_600_000})
        procs = [spawn(_worker(kind, prefix, burst=False, poll=30.0))]
        await asyncio.sleep(2.0)  # started, claimed nothing, blocked

        async def add(i: int) -> None:
            if kind == "lane":
                await backend.jobs.add_job(QUEUE, "noop", {"n": i})
            else:
                await _raw_add(client, prefix, range(i, i + 1))

        t0 = time.monotonic()
        for i in range(n):
            delay = t0 + i * 0.010 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await add(i)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = (
                await client.zcard(backend.keys(QUEUE).key("completed"))
                if kind == "lane"
                else n
                - await client.llen(f"{{{prefix}}}:ready")
                - await client.llen(f"{{{prefix}}}:busy")
            )
            if done >= n:
                break
            await asyncio.sleep(0.05)
        await stop_all(procs)
        if kind == "lane":
            times = await _lane_times(client, prefix, n, first=2)  # 1: the delayed job
        else:
            times = await _raw_times(client, prefix, n)
        return [started - created for created, started, _ in times]
    finally:
        await _drop(client, prefix)


async def rw4(rep: Reporter, runs: int, n: int) -> None:
    """An idle worker; ``n`` jobs added one at a time 10 ms apart."""
    progress(f"W4 on Redis: {n} jobs 10 ms apart x {runs} runs")
    client = Redis.from_url(REDIS_URL)
    stats = (("p50", 50.0), ("p99", 99.0))
    lane: dict[str, list[float]] = {name: [] for name, _ in stats}
    raw: dict[str, list[float]] = {name: [] for name, _ in stats}
    try:
        for _ in range(runs):
            for kind, target in (("lane", lane), ("raw", raw)):
                ms = await _latency(client, kind, n)
                for name, q in stats:
                    target[name].append(percentile(ms, q))
    finally:
        await client.aclose()
    notes = (
        f"{n} jobs added one at a time 10 ms apart to one idle worker process; latency ="
        " start - add; lower is better; median over {runs} runs"
    )
    for name, _ in stats:
        rep.figure(
            "W4",
            f"lane_pg on Redis worker {name}",
            lane[name],
            "ms",
            raw=raw[name],
            digits=2,
            backend="redis",
            notes=f"{notes}; processed_at - created_at (both Redis TIME); the worker"
            " blocks in BZPOPMIN (poll 30 s)",
        )
        rep.figure(
            "W4",
            f"raw Redis worker {name}",
            raw[name],
            "ms",
            raw=None,
            digits=2,
            backend="redis",
            notes=f"{notes}; BLMOVE worker; times from the host clock",
        )


async def rw6(rep: Reporter, total: int, size: int) -> None:
    """Memory growth: ``total`` jobs added and drained in rounds of ``size`` on the shipped
    retention; Redis's used_memory after each round, as W6 reports table sizes."""
    progress(f"W6 on Redis: {total} jobs in rounds of {size}")
    client = Redis.from_url(REDIS_URL)
    prefix = _prefix()
    sizes: list[float] = []
    try:
        backend = RedisBackend(client, prefix=prefix, owns_client=False)
        before = await _memory(client)
        for _ in range(total // size):
            for start in range(0, size, 1000):
                await backend.jobs.add_jobs(
                    QUEUE, [JobSpec("noop", {"n": i}) for i in range(start, start + 1000)]
                )
            procs = [spawn(_worker("lane", prefix, burst=True))]
            await wait_all(procs, 600)
            sizes.append((await _memory(client) - before) / 1e6)
            progress(f"  round {len(sizes)}: +{sizes[-1]:.1f} MB")
    finally:
        await _drop(client, prefix)
        await client.aclose()
    rep.figure(
        "W6",
        "lane_pg on Redis memory after the last round",
        [sizes[-1]],
        "MB",
        raw=[sizes[0]],
        backend="redis",
        rounds=[round(s, 1) for s in sizes],
        notes=f"{total} jobs added and drained in rounds of {size}; used_memory growth"
        " over the server's at the start, per round (rounds); ratio = last / first round"
        " (bounded: the retention keeps a bounded number of finished jobs and events)",
    )
