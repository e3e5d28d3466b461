"""W1 (enqueue one at a time), W2 (bulk enqueue) and D1 (deduplicated adds)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable

import asyncpg

from benchmarks import raw
from benchmarks.common import (
    QUEUE,
    QUIET_NOTE,
    Reporter,
    bench_dsn,
    progress,
    record_no_events,
    reset,
)
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JobSpec


def _payload(i: int) -> dict[str, int | str]:
    return {"n": i, "to": f"user{i}@example.com"}


async def _timed(label: str, n: int, body: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await body()
    elapsed = time.perf_counter() - started
    progress(f"  {label}: {n} jobs in {elapsed:.2f}s = {n / elapsed:.0f} jobs/s")
    return n / elapsed


async def _runs(
    admin: asyncpg.Connection, runs: int, n: int, bodies: dict[str, Callable[[], Awaitable[None]]]
) -> dict[str, list[float]]:
    """Each body ``runs`` times on emptied tables, interleaved; jobs/s per body. A body
    whose key ends in ``_quiet`` runs on a queue that records no events."""
    results: dict[str, list[float]] = {key: [] for key in bodies}
    for run in range(runs):
        for key, body in bodies.items():
            await reset(admin)
            if key.endswith("_quiet"):
                await record_no_events(admin)
            results[key].append(await _timed(f"run {run + 1} {key}", n, body))
    return results


async def w1(rep: Reporter, runs: int, n: int) -> None:
    """One client, one job per call, each its own transaction (autocommit)."""
    progress(f"W1 enqueue one at a time: {n} jobs x {runs} runs")
    admin = await asyncpg.connect(bench_dsn())
    backend = await PostgresBackend.connect(bench_dsn(), min_size=1, max_size=1)
    conn = await asyncpg.connect(bench_dsn())
    payloads = [json.dumps(_payload(i)) for i in range(n)]

    async def via_backend() -> None:
        for i in range(n):
            await backend.jobs.add_job(QUEUE, "noop", _payload(i))

    async def via_sql() -> None:
        for p in payloads:
            await conn.execute("SELECT lane.add_job($1, 'noop', $2::jsonb)", QUEUE, p)

    async def via_raw() -> None:
        for p in payloads:
            await raw.insert_one(conn, QUEUE, p, notify=False)

    bodies = {
        "backend": via_backend,
        "sql": via_sql,
        "sql_quiet": via_sql,
        "raw": via_raw,
    }
    try:
        results = await _runs(admin, runs, n, bodies)
    finally:
        await backend.close()
        await conn.close()
        await admin.close()
    base = results["raw"]
    common = f"{n} jobs, one client, one autocommit call per job; median of {runs} runs"
    rep.figure(
        "W1",
        "lane_pg PostgresBackend.add_job",
        results["backend"],
        "jobs/s",
        raw=base,
        notes=f"{common}; includes Python-side validation and JobRow decoding",
    )
    rep.figure(
        "W1",
        "lane_pg SELECT lane.add_job (asyncpg)",
        results["sql"],
        "jobs/s",
        raw=base,
        notes=f"{common}; plain asyncpg execute of the stored function",
    )
    rep.figure(
        "W1",
        "lane_pg SELECT lane.add_job (asyncpg), events off",
        results["sql_quiet"],
        "jobs/s",
        raw=base,
        notes=f"{common}; as above on a queue that records no events ({QUIET_NOTE})",
    )
    rep.figure(
        "W1",
        "raw INSERT",
        base,
        "jobs/s",
        raw=None,
        notes=f"{common}; baseline: one plain INSERT per job, no NOTIFY",
    )


async def d1(rep: Reporter, runs: int, n: int) -> None:
    """W1 with a deduplication id: every add a new id (each becomes an owner), and every
    add the same id (each after the first is a duplicate), next to plain W1 adds and the
    raw INSERT in the same run. Target: >= 0.8x plain W1 (issue 10)."""
    progress(f"D1 deduplicated adds one at a time: {n} jobs x {runs} runs")
    admin = await asyncpg.connect(bench_dsn())
    backend = await PostgresBackend.connect(bench_dsn(), min_size=1, max_size=1)
    conn = await asyncpg.connect(bench_dsn())
    payloads = [json.dumps(_payload(i)) for i in range(n)]
    fresh = [json.dumps({"deduplication": {"id": f"acct:{i}"}}) for i in range(n)]
    same = json.dumps({"deduplication": {"id": "acct:0"}})

    async def plain() -> None:
        for p in payloads:
            await conn.execute("SELECT lane.add_job($1, 'noop', $2::jsonb)", QUEUE, p)

    async def new_ids() -> None:
        for p, options in zip(payloads, fresh, strict=True):
            await conn.execute(
                "SELECT lane.add_job($1, 'noop', $2::jsonb, $3::jsonb)", QUEUE, p, options
            )

    async def duplicates() -> None:
        for p in payloads:
            await conn.execute(
                "SELECT lane.add_job($1, 'noop', $2::jsonb, $3::jsonb)", QUEUE, p, same
            )

    async def via_backend() -> None:
        for i in range(n):
            await backend.jobs.add_job(
                QUEUE, "noop", _payload(i), {"deduplication": {"id": f"acct:{i}"}}
            )

    async def via_backend_plain() -> None:
        for i in range(n):
            await backend.jobs.add_job(QUEUE, "noop", _payload(i))

    async def via_raw() -> None:
        for p in payloads:
            await raw.insert_one(conn, QUEUE, p, notify=False)

    bodies = {
        "plain": plain,
        "new": new_ids,
        "duplicate": duplicates,
        "backend_plain": via_backend_plain,
        "backend_new": via_backend,
        "raw": via_raw,
    }
    try:
        results = await _runs(admin, runs, n, bodies)
    finally:
        await backend.close()
        await conn.close()
        await admin.close()
    base = results["raw"]
    common = f"{n} adds, one client, one autocommit call each; median of {runs} runs"
    for key, plain_key, subject, what in (
        ("plain", "plain", "SELECT lane.add_job, no deduplication (W1)", "the plain path"),
        ("new", "plain", "SELECT lane.add_job, a new deduplication id each", "each owns its id"),
        ("duplicate", "plain", "SELECT lane.add_job, one deduplication id", "all but one dedup"),
        ("backend_plain", "backend_plain", "PostgresBackend.add_job, no deduplication (W1)", "-"),
        ("backend_new", "backend_plain", "PostgresBackend.add_job, a new id each", "backend"),
    ):
        ratio = statistics.median(results[key]) / statistics.median(results[plain_key])
        rep.figure(
            "D1",
            subject,
            results[key],
            "jobs/s",
            raw=base,
            notes=f"{common}; {what}; {ratio:.2f}x the same caller's plain W1 of this run",
            ratio_to_plain=round(ratio, 3),
        )


async def w2(rep: Reporter, runs: int, n: int, chunk: int) -> None:
    """Bulk enqueue, ``chunk`` jobs per call (each call its own transaction)."""
    progress(f"W2 bulk enqueue: {n} jobs in calls of {chunk} x {runs} runs")
    admin = await asyncpg.connect(bench_dsn())
    backend = await PostgresBackend.connect(bench_dsn(), min_size=1, max_size=1)
    conn = await asyncpg.connect(bench_dsn())
    specs = [JobSpec("noop", _payload(i)) for i in range(n)]
    payloads = [json.dumps(_payload(i)) for i in range(n)]

    async def via_lane() -> None:
        for start in range(0, n, chunk):
            await backend.jobs.add_jobs(QUEUE, specs[start : start + chunk])

    async def via_raw() -> None:
        for start in range(0, n, chunk):
            await raw.insert_many(conn, QUEUE, payloads[start : start + chunk])

    async def via_copy() -> None:
        for start in range(0, n, chunk):
            await raw.copy_many(conn, QUEUE, payloads[start : start + chunk])

    bodies = {"lane": via_lane, "lane_quiet": via_lane, "raw": via_raw, "copy": via_copy}
    try:
        results = await _runs(admin, runs, n, bodies)
    finally:
        await backend.close()
        await conn.close()
        await admin.close()
    common = f"{n} jobs, {chunk} per call, one client; median of {runs} runs"
    rep.figure(
        "W2",
        "lane_pg PostgresBackend.add_jobs",
        results["lane"],
        "jobs/s",
        raw=results["raw"],
        notes=f"{common}; lane.add_jobs, rows returned and decoded",
    )
    rep.figure(
        "W2",
        "lane_pg PostgresBackend.add_jobs, events off",
        results["lane_quiet"],
        "jobs/s",
        raw=results["raw"],
        notes=f"{common}; as above on a queue that records no events ({QUIET_NOTE})",
    )
    rep.figure(
        "W2",
        "raw INSERT ... SELECT FROM unnest",
        results["raw"],
        "jobs/s",
        raw=None,
        notes=f"{common}; baseline",
    )
    rep.figure(
        "W2",
        "raw COPY",
        results["copy"],
        "jobs/s",
        raw=results["raw"],
        notes=f"{common}; extra reference (asyncpg copy_records_to_table); ratio is to raw unnest",
    )
