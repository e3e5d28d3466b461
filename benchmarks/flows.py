"""F1 (1,000 flows of 10 children) and F2 (one flow of 10,000 children), issue 11: flows
against the same number of plain jobs, in the same run, interleaved."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

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
    wait_all,
)
from benchmarks.processing import lane_prefill
from lane_pg import JobSpec
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types.flows import FlowJob

PARENT_QUEUE = "bench-parent"
"""F2's parent lives here, outside the workers' queue: after the drain it must still be
`waiting` (released once, not yet run), which is what F2 checks."""
PLAIN_QUEUE = "bench-plain"
"""F2's in-database loop: the plain jobs beside the children, claimed turn about."""
PROCESSES = 2
BATCH = 50
"""Jobs per claim and per lane.complete_jobs call in F2's in-database loop."""
PAGE_SIZES = (20, 1000)
PAGE_READS = 20
"""Timed reads per cursor position and page size (after one untimed warm-up read)."""
LEASE_MS = 600_000
KEEP_ALL_EVENTS = 2_147_483_647


# --------------------------------------------------------------------------- set-up


async def _keep_everything(conn: asyncpg.Connection, queue: str) -> None:
    """Keep every finished job (each is checked to have run once) and every event (the
    release events are read back; the default max_events of 10,000 trims them away
    during an 11,000-job drain). lane_pg has no setter for max_events, hence the UPDATE."""
    await conn.execute("SELECT lane.set_queue_retention($1, NULL, NULL)", queue)
    await conn.execute(
        "UPDATE lane.queues SET max_events = $2 WHERE name = $1", queue, KEEP_ALL_EVENTS
    )


def _flow_document(
    parent_queue: str, child_queue: str, children: int, tag: int = 0
) -> dict[str, Any]:
    """A parent with ``children`` no-op children; a child names its queue only when it
    is not the parent's."""
    child_queue_key = {} if child_queue == parent_queue else {"queue": child_queue}
    return {
        "queue": parent_queue,
        "name": "noop",
        "data": {"flow": tag},
        "children": [
            {"name": "noop", "data": {"n": i}, **child_queue_key} for i in range(children)
        ],
    }


async def _analyze(conn: asyncpg.Connection) -> None:
    await conn.execute("ANALYZE lane.jobs; ANALYZE lane.events; ANALYZE lane.flow_deps")


async def _drain(
    conn: asyncpg.Connection, queue: str, n: int, concurrency: int, where: str = "true"
) -> float:
    """Two burst worker processes on QUEUE until nothing is ready; returns ``n`` jobs
    (those of ``queue`` matching ``where``) over min(processed_at) .. max(finished_at),
    after checking that each of them completed exactly once."""
    procs = [spawn(lane_worker_args(concurrency, burst=True)) for _ in range(PROCESSES)]
    await wait_all(procs, limit_s=600)
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE state = 'completed') AS completed,"
        " count(*) FILTER (WHERE attempts_started = 1) AS once, count(*) AS total,"
        " extract(epoch FROM max(finished_at) - min(processed_at))::float8 AS seconds"
        f" FROM lane.jobs WHERE queue = $1 AND {where}",
        queue,
    )
    if not (row["completed"] == row["once"] == row["total"] == n):
        raise RuntimeError(f"expected {n} jobs completed once each, got {dict(row)}")
    return float(n / row["seconds"])


def _ratios(runs: list[float], plain: list[float]) -> list[float]:
    """Each run's ratio to the plain figure measured beside it."""
    return [round(a / b, 3) for a, b in zip(runs, plain, strict=True)]


def _median_ratio(runs: list[float], plain: list[float]) -> float:
    return round(statistics.median(runs) / statistics.median(plain), 3)


# --------------------------------------------------------------------------- F1

# For every parent: its last child's finished_at, the created_at of its release event
# (`waiting` with prev `waiting-children`; lane.event_log gives one row per job of a
# batched event row), how many such events it has, and when a worker started it.
F1_RELEASES = """
WITH last_child AS (
    SELECT parent_queue, parent_id, max(finished_at) AS done
      FROM lane.jobs WHERE queue = $1 AND parent_id IS NOT NULL
     GROUP BY 1, 2
), released AS (
    SELECT job_id, min(created_at) AS at, count(*) AS n
      FROM lane.event_log
     WHERE queue = $1 AND event = 'waiting' AND data ->> 'prev' = 'waiting-children'
     GROUP BY 1
)
SELECT p.id, r.n AS releases,
       extract(epoch FROM r.at - c.done)::float8 * 1000 AS release_ms,
       extract(epoch FROM p.processed_at - c.done)::float8 * 1000 AS start_ms
  FROM lane.jobs p
  JOIN last_child c ON c.parent_queue = p.queue AND c.parent_id = p.id
  LEFT JOIN released r ON r.job_id = p.id
 WHERE p.queue = $1 AND p.deps_pending IS NOT NULL
"""


async def _f1_flows(
    conn: asyncpg.Connection, flows: int, children: int, concurrency: int
) -> tuple[float, list[float], list[float]]:
    """One run of the flow side: returns jobs/s, release gaps and parent start delays (ms)."""
    await reset(conn)
    await _keep_everything(conn, QUEUE)
    for f in range(flows):
        await conn.execute(
            "SELECT lane.add_flow($1::jsonb)", json.dumps(_flow_document(QUEUE, QUEUE, children, f))
        )
    await _analyze(conn)
    n = flows * (children + 1)
    rate = await _drain(conn, QUEUE, n, concurrency)
    rows = await conn.fetch(F1_RELEASES, QUEUE)
    unreleased = [r["id"] for r in rows if r["releases"] != 1]
    if len(rows) != flows or unreleased:
        raise RuntimeError(
            f"F1: {len(rows)} parents of {flows}; not released exactly once: {unreleased[:10]}"
        )
    release = [r["release_ms"] for r in rows]
    start = [r["start_ms"] for r in rows]
    progress(
        f"  flows: {rate:.0f} jobs/s; release gap p99 {percentile(release, 99):.2f} ms,"
        f" parent start p50 {percentile(start, 50):.0f} ms"
    )
    return rate, release, start


async def _plain(conn: asyncpg.Connection, n: int, concurrency: int) -> float:
    await reset(conn)
    await _keep_everything(conn, QUEUE)
    await lane_prefill(conn, n)
    await _analyze(conn)
    rate = await _drain(conn, QUEUE, n, concurrency)
    progress(f"  plain: {rate:.0f} jobs/s")
    return rate


STATS = (("p50", 50.0), ("p99", 99.0), ("max", 100.0))


async def f1(rep: Reporter, runs: int, flows: int, children: int, concurrency: int) -> None:
    n = flows * (children + 1)
    progress(f"F1: {flows} flows x {children} children ({n} jobs) vs {n} plain, x {runs} runs")
    conn = await asyncpg.connect(bench_dsn())
    flow_rates: list[float] = []
    plain_rates: list[float] = []
    release: dict[str, list[float]] = {name: [] for name, _ in STATS}
    start: dict[str, list[float]] = {name: [] for name, _ in STATS}
    try:
        for run in range(runs):
            # Interleaved, the order alternating per run so drift favours neither side.
            for side in ("flows", "plain") if run % 2 == 0 else ("plain", "flows"):
                if side == "plain":
                    plain_rates.append(await _plain(conn, n, concurrency))
                    continue
                rate, gaps, starts = await _f1_flows(conn, flows, children, concurrency)
                flow_rates.append(rate)
                for name, q in STATS:
                    release[name].append(percentile(gaps, q))
                    start[name].append(percentile(starts, q))
    finally:
        await conn.close()
    common = (
        f"{PROCESSES} worker processes (python -m lane_pg worker --burst --concurrency"
        f" {concurrency}) on one queue; jobs/s over min(processed_at) .. max(finished_at);"
        f" every job completed exactly once (attempts 1); median of {runs} runs, flows and"
        " plain interleaved per run"
    )
    rep.figure(
        "F1",
        f"lane_pg flows x{PROCESSES}",
        flow_rates,
        "jobs/s",
        raw=None,
        no_baseline=True,
        notes=f"{flows} flows of {children} no-op children each, parent and children in one"
        f" queue ({n} jobs), pre-enqueued with one SELECT lane.add_flow per flow; {common};"
        " ratio_to_plain against the plain line of the same runs (target >= 0.8)",
        concurrency=concurrency,
        ratio_to_plain=_median_ratio(flow_rates, plain_rates),
        ratio_runs=_ratios(flow_rates, plain_rates),
    )
    rep.figure(
        "F1",
        f"lane_pg plain x{PROCESSES}",
        plain_rates,
        "jobs/s",
        raw=None,
        no_baseline=True,
        notes=f"{n} plain no-op jobs (the W3 shape) pre-enqueued through lane.add_jobs,"
        f" 1,000 per call; {common}",
        concurrency=concurrency,
        ratio_to_plain=1.0,
    )
    for name, _ in STATS:
        rep.figure(
            "F1",
            f"lane_pg parent release after its last child, {name}",
            release[name],
            "ms",
            raw=None,
            no_baseline=True,
            digits=3,
            notes=f"per parent: created_at of its one `waiting` event with prev"
            " waiting-children (lane.event_log, batched rows unnested) minus max(finished_at)"
            " of its children; both are the p_now of the lane.complete_jobs call that"
            " completed the last child, so this is 0 by construction (the release commits"
            f" with that completion); each run's {name} over {flows} parents, median of"
            f" {runs} runs (target p99 <= 5 ms)",
        )
    for name, _ in STATS:
        rep.figure(
            "F1",
            f"lane_pg parent start after its last child, {name}",
            start[name],
            "ms",
            raw=None,
            no_baseline=True,
            digits=1,
            notes="per parent: its processed_at minus max(finished_at) of its children: the"
            " released parent takes a new enqueue sequence, so it starts behind every job"
            " still waiting in the queue (queueing, not release cost); each run's"
            f" {name}, median of {runs} runs",
        )


# --------------------------------------------------------------------------- F2


async def _timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def _f2_adds(
    conn: asyncpg.Connection, backend: PostgresBackend, children: int
) -> dict[str, float]:
    """One add of each kind, ms from the call to its answer (autocommit, so the commit is
    inside), each on an emptied database."""
    doc = json.dumps(_flow_document(PARENT_QUEUE, QUEUE, children))
    datas = [json.dumps({"n": i}) for i in range(children)]
    flow = FlowJob(
        "noop",
        {"flow": 0},
        queue=PARENT_QUEUE,
        children=[FlowJob("noop", {"n": i}, queue=QUEUE) for i in range(children)],
    )
    specs = [JobSpec("noop", {"n": i}) for i in range(children)]
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "sql_flow": lambda: conn.execute("SELECT lane.add_flow($1::jsonb)", doc),
        "sql_plain": lambda: conn.execute(
            "SELECT count(*) FROM lane.add_jobs($1, $2::text[], $3::text[]::jsonb[],"
            " $4::text[]::jsonb[])",
            QUEUE,
            ["noop"] * children,
            datas,
            ["{}"] * children,
        ),
        "backend_flow": lambda: backend.flows.add_flow(flow),
        "backend_plain": lambda: backend.jobs.add_jobs(QUEUE, specs),
    }
    ms: dict[str, float] = {}
    for key, call in calls.items():
        await reset(conn)
        await _keep_everything(conn, QUEUE)
        await _keep_everything(conn, PARENT_QUEUE)
        ms[key] = await _timed(call)
    progress("  add: " + ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items()))
    return ms


async def _add_f2_flow(conn: asyncpg.Connection, children: int) -> str:
    """The F2 flow (parent in PARENT_QUEUE, children in QUEUE), not timed; its parent id."""
    doc = json.dumps(_flow_document(PARENT_QUEUE, QUEUE, children))
    parent_id: str = await conn.fetchval("SELECT lane.add_flow($1::jsonb)", doc)
    return parent_id


async def _parent_release(conn: asyncpg.Connection, parent_id: str) -> tuple[int, str]:
    """How many `waiting` events with prev waiting-children the parent has, and its state."""
    releases: int = await conn.fetchval(
        "SELECT count(*) FROM lane.event_log WHERE queue = $1 AND job_id = $2"
        " AND event = 'waiting' AND data ->> 'prev' = 'waiting-children'",
        PARENT_QUEUE,
        parent_id,
    )
    state: str = await conn.fetchval(
        "SELECT state FROM lane.jobs WHERE queue = $1 AND id = $2", PARENT_QUEUE, parent_id
    )
    return releases, state


async def _f2_worker_drains(
    conn: asyncpg.Connection, children: int, concurrency: int, plain_first: bool
) -> tuple[float, float, tuple[int, str]]:
    """The children drained by the workers, and as many plain jobs the same way."""
    rates: dict[str, float] = {}
    release = (0, "")
    for side in ("plain", "children") if plain_first else ("children", "plain"):
        await reset(conn)
        await _keep_everything(conn, QUEUE)
        await _keep_everything(conn, PARENT_QUEUE)
        if side == "plain":
            await lane_prefill(conn, children)
        else:
            parent_id = await _add_f2_flow(conn, children)
        await _analyze(conn)
        rates[side] = await _drain(conn, QUEUE, children, concurrency)
        if side == "children":
            release = await _parent_release(conn, parent_id)
    progress(
        f"  workers: children {rates['children']:.0f} jobs/s, plain {rates['plain']:.0f}"
        f" jobs/s; parent released {release[0]}x, now {release[1]}"
    )
    return rates["children"], rates["plain"], release


async def _claim(conn: asyncpg.Connection, queue: str) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await conn.fetch(
        "SELECT queue, id, lock_token FROM lane.claim_jobs('bench-loop', ARRAY[$1],"
        " ARRAY[$2::integer], $3)",
        queue,
        BATCH,
        LEASE_MS,
    )
    return rows


async def _complete(conn: asyncpg.Connection, claimed: list[asyncpg.Record]) -> None:
    done = await conn.fetchval(
        "SELECT count(*) FILTER (WHERE status = 'ok') FROM lane.complete_jobs($1::text[],"
        " $2::text[], $3::uuid[], $4::text[]::jsonb[])",
        [r["queue"] for r in claimed],
        [r["id"] for r in claimed],
        [r["lock_token"] for r in claimed],
        ["null"] * len(claimed),
    )
    if done != len(claimed):
        raise RuntimeError(f"F2: {done} of {len(claimed)} completions went through")


PAGE_SQL = "SELECT count(*) FROM lane.get_flow_dependency_page($1, $2, $3, $4, $5)"


async def _page_reads(
    conn: asyncpg.Connection, parent_id: str, bucket: str, count: int
) -> dict[str, list[float]]:
    """ms per read (client round trip on this host) at the first page, the middle of the
    bucket and its last full page; PAGE_READS reads at each after one warm-up read."""
    seqs = [
        r["seq"]
        for r in await conn.fetch(
            "SELECT seq FROM lane.get_flow_dependencies($1, $2) WHERE bucket = $3 ORDER BY seq",
            PARENT_QUEUE,
            parent_id,
            bucket,
        )
    ]
    cursors = {"first": 0}
    if seqs:
        cursors["middle"] = seqs[len(seqs) // 2 - 1] if len(seqs) > 1 else 0
        cursors["last"] = seqs[len(seqs) - count - 1] if len(seqs) > count else 0
    await conn.fetchval(PAGE_SQL, PARENT_QUEUE, parent_id, bucket, 0, count)
    reads: dict[str, list[float]] = {}
    for where, cursor in cursors.items():
        reads[where] = []
        for _ in range(PAGE_READS):
            started = time.perf_counter()
            got = await conn.fetchval(PAGE_SQL, PARENT_QUEUE, parent_id, bucket, cursor, count)
            reads[where].append((time.perf_counter() - started) * 1000)
            if seqs and got != min(count, len([s for s in seqs if s > cursor])):
                raise RuntimeError(f"F2: page of {bucket} after {cursor} gave {got} rows")
    return reads


PageReads = dict[tuple[str, int], dict[str, list[float]]]


async def _f2_loop(
    conn: asyncpg.Connection, children: int
) -> tuple[list[float], list[float], list[float], list[float], tuple[int, str], PageReads]:
    """Claim BATCH / complete BATCH over asyncpg, children and plain jobs turn about, each
    call its own transaction; the dependency pages read before (unprocessed) and after
    (processed), and an empty bucket (failed) that every page read steps through."""
    await reset(conn)
    for queue in (QUEUE, PARENT_QUEUE, PLAIN_QUEUE):
        await _keep_everything(conn, queue)
    parent_id = await _add_f2_flow(conn, children)
    await lane_prefill(conn, children, queue=PLAIN_QUEUE)
    await _analyze(conn)
    pages: PageReads = {}
    for count in PAGE_SIZES:
        pages[("unprocessed", count)] = await _page_reads(conn, parent_id, "unprocessed", count)
    claims: dict[str, list[float]] = {QUEUE: [], PLAIN_QUEUE: []}
    completes: dict[str, list[float]] = {QUEUE: [], PLAIN_QUEUE: []}
    left = {QUEUE: children, PLAIN_QUEUE: children}
    half_read = False
    while any(left.values()):
        for queue in (QUEUE, PLAIN_QUEUE):
            if not left[queue]:
                continue
            started = time.perf_counter()
            claimed = await _claim(conn, queue)
            claims[queue].append((time.perf_counter() - started) * 1000)
            if not claimed:
                raise RuntimeError(f"F2: nothing to claim in {queue}, {left[queue]} left")
            started = time.perf_counter()
            await _complete(conn, claimed)
            completes[queue].append((time.perf_counter() - started) * 1000)
            left[queue] -= len(claimed)
            if queue == QUEUE and not half_read and left[queue] <= children // 2:
                half_read = True
                # Half the children done: a page of one bucket now steps over the other
                # bucket's rows that sort before it (a dashboard reading a running flow).
                for count in PAGE_SIZES:
                    for bucket in ("unprocessed", "processed"):
                        pages[(f"{bucket}, half drained", count)] = await _page_reads(
                            conn, parent_id, bucket, count
                        )
    release = await _parent_release(conn, parent_id)
    # A new session's first page: the statistics are those of the ANALYZE above (every
    # dependency unprocessed) and its first calls are planned with the bucket's value.
    fresh = await asyncpg.connect(bench_dsn())
    try:
        first_read = await _timed(
            lambda: fresh.fetchval(PAGE_SQL, PARENT_QUEUE, parent_id, "processed", 0, PAGE_SIZES[0])
        )
    finally:
        await fresh.close()
    pages[("processed, a new session's first read", PAGE_SIZES[0])] = {"first": [first_read]}
    for count in PAGE_SIZES:
        pages[("processed", count)] = await _page_reads(conn, parent_id, "processed", count)
        pages[("failed (empty)", count)] = await _page_reads(conn, parent_id, "failed", count)
    progress(
        f"  loop: complete {BATCH} children {statistics.median(completes[QUEUE]):.2f} ms,"
        f" plain {statistics.median(completes[PLAIN_QUEUE]):.2f} ms (medians); parent"
        f" released {release[0]}x, now {release[1]}"
    )
    return (
        completes[QUEUE],
        completes[PLAIN_QUEUE],
        claims[QUEUE],
        claims[PLAIN_QUEUE],
        release,
        pages,
    )


async def f2(rep: Reporter, runs: int, children: int, concurrency: int) -> None:
    progress(f"F2: one flow of {children} children vs {children} plain jobs, x {runs} runs")
    conn = await asyncpg.connect(bench_dsn())
    backend = await PostgresBackend.connect(bench_dsn(), min_size=1, max_size=1)
    adds: dict[str, list[float]] = {}
    drained: dict[str, list[float]] = {"children": [], "plain": []}
    batch_ms: dict[str, list[float]] = {
        "complete children": [],
        "complete plain": [],
        "claim children": [],
        "claim plain": [],
    }
    releases: list[tuple[str, int, str]] = []
    pages: dict[tuple[str, int], dict[str, list[float]]] = {}
    page_run_worst: dict[tuple[str, int], list[float]] = {}
    try:
        for run in range(runs):
            for key, ms in (await _f2_adds(conn, backend, children)).items():
                adds.setdefault(key, []).append(ms)
            rate_children, rate_plain, release = await _f2_worker_drains(
                conn, children, concurrency, plain_first=run % 2 == 1
            )
            drained["children"].append(rate_children)
            drained["plain"].append(rate_plain)
            releases.append(("workers", *release))
            done_c, done_p, claim_c, claim_p, release, run_pages = await _f2_loop(conn, children)
            for key, values in (
                ("complete children", done_c),
                ("complete plain", done_p),
                ("claim children", claim_c),
                ("claim plain", claim_p),
            ):
                batch_ms[key].append(statistics.median(values))
            releases.append(("loop", *release))
            for page_key, by_cursor in run_pages.items():
                merged = pages.setdefault(page_key, {})
                for where, values in by_cursor.items():
                    merged.setdefault(where, []).extend(values)
                # The slowest cursor's median: a page must be cheap wherever it starts.
                page_run_worst.setdefault(page_key, []).append(
                    max(statistics.median(vs) for vs in by_cursor.values())
                )
    finally:
        await backend.close()
        await conn.close()
    each = f"median of {runs} runs"
    for key, plain_key, subject, what in (
        ("sql_flow", "sql_plain", "SELECT lane.add_flow", f"one parent, {children} children"),
        ("sql_plain", "sql_plain", "SELECT lane.add_jobs", f"{children} plain jobs, one call"),
        ("backend_flow", "backend_plain", "PostgresBackend.add_flow", "FlowJob tree"),
        ("backend_plain", "backend_plain", "PostgresBackend.add_jobs", "JobSpecs"),
    ):
        rep.figure(
            "F2",
            f"lane_pg add, {subject}",
            adds[key],
            "ms",
            raw=None,
            no_baseline=True,
            notes=f"{what}; ms from the autocommit call to its answer (the commit inside),"
            f" each on an emptied database, the four interleaved per run; {each};"
            " ratio_to_plain = this / the same caller's plain add of the same size",
            ratio_to_plain=_median_ratio(adds[key], adds[plain_key]),
            ratio_runs=_ratios(adds[key], adds[plain_key]),
        )
    worker_notes = (
        f"{PROCESSES} worker processes (python -m lane_pg worker --burst --concurrency"
        f" {concurrency}) on the children's queue; jobs/s over min(processed_at) .."
        f" max(finished_at) of those {children} jobs, each completed exactly once; {each},"
        " children and plain interleaved per run"
    )
    rep.figure(
        "F2",
        f"lane_pg flow children drained x{PROCESSES}",
        drained["children"],
        "jobs/s",
        raw=None,
        no_baseline=True,
        notes=f"the {children} children of one flow (the parent in another queue, which the"
        f" workers do not serve); {worker_notes}; target ratio_to_plain >= 1/1.2 = 0.833",
        concurrency=concurrency,
        ratio_to_plain=_median_ratio(drained["children"], drained["plain"]),
        ratio_runs=_ratios(drained["children"], drained["plain"]),
    )
    rep.figure(
        "F2",
        f"lane_pg plain drained x{PROCESSES}",
        drained["plain"],
        "jobs/s",
        raw=None,
        no_baseline=True,
        notes=f"{children} plain jobs through lane.add_jobs, 1,000 per call; {worker_notes}",
        concurrency=concurrency,
        ratio_to_plain=1.0,
    )
    loop_notes = (
        f"one asyncpg connection: SELECT lane.claim_jobs of {BATCH}, then SELECT"
        f" lane.complete_jobs of those {BATCH}, each autocommit (its own transaction), a"
        " batch of children and one of plain jobs turn about (both queues filled"
        f" beforehand, {children} each); ms per call as the client sees it; each run's"
        f" median over its {children // BATCH} batches, {each}"
    )
    for what in ("complete", "claim"):
        for side in ("children", "plain"):
            key = f"{what} {side}"
            rep.figure(
                "F2",
                f"lane_pg in-database {what} of {BATCH}, {side}",
                batch_ms[key],
                "ms",
                raw=None,
                no_baseline=True,
                digits=3,
                notes=f"{loop_notes}; lower is better"
                + ("; target ratio_to_plain <= 1.2" if key == "complete children" else ""),
                ratio_to_plain=_median_ratio(batch_ms[key], batch_ms[f"{what} plain"]),
                ratio_runs=_ratios(batch_ms[key], batch_ms[f"{what} plain"]),
            )
    counts = [float(n) for _, n, _ in releases]
    states = sorted({f"{where}: {state}" for where, _, state in releases})
    rep.figure(
        "F2",
        "lane_pg parent releases",
        counts,
        "events",
        raw=None,
        no_baseline=True,
        digits=0,
        notes="`waiting` events with prev waiting-children of the parent (lane.event_log),"
        " after the worker drain and after the in-database loop of each run (must be 1"
        " each); the parent's state then: " + ", ".join(states) + " (must be waiting)",
        exactly_once=all(n == 1 for n in counts),
        states=states,
    )
    for (bucket, count), by_cursor in sorted(pages.items(), key=lambda kv: kv[0]):
        when = (
            "half-way through the drain (by the loop below)"
            if "half" in bucket
            else "before the drain"
            if bucket == "unprocessed"
            else "after the drain"
        )
        empty = bucket.startswith("failed")
        fresh_session = "new session" in bucket
        all_reads = [v for values in by_cursor.values() for v in values]
        rep.figure(
            "F2",
            f"lane_pg get_flow_dependency_page {bucket}, {count} a page",
            page_run_worst[(bucket, count)],
            "ms",
            raw=None,
            no_baseline=True,
            digits=3,
            notes=f"SELECT FROM lane.get_flow_dependency_page over asyncpg, {when}, the"
            f" bucket of one parent with {children} dependencies; "
            + (
                "an empty bucket, read from the start: the page index holds no bucket, so"
                " the read steps over every row of the parent (the worst case of a page)"
                if empty
                else "the first page"
                if fresh_session
                else "cursors at the first page, the middle of the bucket and its last full page"
            )
            + (
                "; one read, the first of a new connection (its backend's catalog caches"
                " cold too), with the statistics of the ANALYZE taken before the drain"
                " (autovacuum is off on this server)"
                if fresh_session
                else f"; {PAGE_READS} reads at each cursor after one warm-up read"
            )
            + "; value = each run's"
            " median at its slowest cursor, max_ms the slowest read of any run (target < 10"
            f" ms at any cursor); {each}",
            max_ms=round(max(all_reads), 3),
            by_cursor={
                where: {
                    "median": round(statistics.median(values), 3),
                    "max": round(max(values), 3),
                }
                for where, values in by_cursor.items()
            },
        )
