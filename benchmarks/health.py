"""W6: table health over many processed jobs, with and without finished-job retention, and
optionally while another session holds a snapshot open (``--w6-hold-snapshot``)."""

from __future__ import annotations

import asyncio
import contextlib
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


HOLD_QUERY = "SELECT count(*) FROM lane.jobs"
"""The held transaction's first read, which takes its snapshot (``--w6-hold-query``): it
also holds an ACCESS SHARE lock on lane.jobs until the end, as a report or pg_dump would."""
SAMPLE_EVERY = 5.0
"""Seconds between two size samples while a snapshot hold is watched."""
NORMAL = 1.3
"""After a hold, a round is back to normal once its heap and indexes are within this of
round 1's (the bound W6 is held to)."""
SAMPLE_SQL = """
SELECT pg_total_relation_size('lane.jobs') AS total, pg_relation_size('lane.jobs') AS heap,
       pg_indexes_size('lane.jobs') AS indexes, pg_total_relation_size('lane.events') AS events,
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'lane.jobs'::regclass)
           AS n_dead_tup,
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'lane.events'::regclass)
           AS events_n_dead_tup
"""


class SnapshotHold:
    """Another session's REPEATABLE READ snapshot, taken by ``query`` at the start of round
    ``start_round`` and held ``seconds`` while the rounds go on: no VACUUM can remove a row
    version that snapshot may still see. The sizes are sampled every ``SAMPLE_EVERY`` s
    from round 1 to the last round, each sample tagged before / held / after."""

    def __init__(self, seconds: float, start_round: int, query: str = HOLD_QUERY) -> None:
        self.seconds = seconds
        self.start_round = start_round
        self.query = query
        self.samples: list[dict[str, Any]] = []
        self.started_at: float | None = None
        self.released_at: float | None = None
        self._zero = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []
        self._conns: list[asyncpg.Connection] = []

    def phase(self) -> str:
        if self.started_at is None:
            return "before"
        return "held" if self.released_at is None else "after"

    def held_between(self, t0: float, t1: float) -> bool:
        return (
            self.started_at is not None
            and self.started_at < t1
            and (self.released_at is None or self.released_at > t0)
        )

    async def start_sampling(self) -> None:
        probe = await asyncpg.connect(bench_dsn())
        self._conns.append(probe)
        self._tasks.append(asyncio.create_task(self._sample(probe)))

    async def take(self) -> None:
        """Take the snapshot (the transaction's first query does) and release it later."""
        holder = await asyncpg.connect(bench_dsn())
        self._conns.append(holder)
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        seen = await holder.fetchval(self.query)
        self.started_at = time.monotonic()
        progress(f"  snapshot taken ({self.query}: {seen}), held for {self.seconds:g}s")
        self._tasks.append(asyncio.create_task(self._release(holder)))

    async def _release(self, holder: asyncpg.Connection) -> None:
        await asyncio.sleep(self.seconds)
        await holder.execute("COMMIT")
        self.released_at = time.monotonic()
        progress("  snapshot released")

    async def _sample(self, probe: asyncpg.Connection) -> None:
        while True:
            now = time.monotonic()
            try:
                row = await probe.fetchrow(SAMPLE_SQL)
            except asyncpg.PostgresError as exc:  # an index dropped under the probe, say
                progress(f"  sample skipped: {exc}")
            else:
                self.samples.append(
                    {"t_s": round(now - self._zero, 1), "phase": self.phase(),
                     "total_mb": round(row["total"] / MB, 2),
                     "heap_mb": round(row["heap"] / MB, 2),
                     "indexes_mb": round(row["indexes"] / MB, 2),
                     "n_dead_tup": row["n_dead_tup"],
                     "events_total_mb": round(row["events"] / MB, 2),
                     "events_n_dead_tup": row["events_n_dead_tup"]}
                )  # fmt: skip
            await asyncio.sleep(SAMPLE_EVERY)

    async def close(self) -> None:
        """Stop sampling; a snapshot still held goes with its connection."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for conn in self._conns:
            await conn.close()

    def peaks(self, phase: str) -> dict[str, float]:
        keys = ("total_mb", "heap_mb", "indexes_mb", "n_dead_tup", "events_total_mb")
        chosen = [s for s in self.samples if s["phase"] == phase]
        return {k: max(s[k] for s in chosen) for k in keys} if chosen else {}


async def _lane_rounds(
    conn: asyncpg.Connection,
    total: int,
    size: int,
    options: str,
    concurrency: int,
    hold: SnapshotHold | None = None,
) -> list[dict[str, Any]]:
    await reset(conn)
    # TRUNCATE keeps the cumulative counters; start each variant from zero.
    await conn.execute("SELECT pg_stat_reset_single_table_counters('lane.jobs'::regclass)")
    out = []
    for number, done in enumerate(range(size, total + size, size), start=1):
        if hold and number == hold.start_round:
            await hold.take()
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
        if hold:
            out[-1]["snapshot_held"] = hold.held_between(t0, t2)
            if hold.released_at is not None:
                out[-1]["s_after_release"] = round(t2 - hold.released_at, 1)
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
    rep: Reporter,
    total: int,
    size: int,
    concurrency: int,
    with_raw: bool,
    all_variants: bool,
    hold_seconds: float | None = None,
    hold_round: int = 2,
    hold_query: str = HOLD_QUERY,
) -> None:
    progress(f"W6 table health: {total} jobs per variant in rounds of {size}")
    if hold_seconds and not 2 <= hold_round <= -(-total // size):
        raise ValueError(f"W6: no round {hold_round} after the first to hold a snapshot in")
    conn = await asyncpg.connect(bench_dsn())
    try:
        for label, options, delete in VARIANTS if all_variants else VARIANTS[:1]:
            hold = SnapshotHold(hold_seconds, hold_round, hold_query) if hold_seconds else None
            if hold:
                await hold.start_sampling()
            try:
                lane = await _lane_rounds(conn, total, size, options, concurrency, hold)
            finally:
                if hold:
                    await hold.close()
            base = await _raw_rounds(conn, total, size, delete) if with_raw else []
            setup = (
                f"{label}: rounds of {size} jobs (lane.add_jobs 1000 per call, then drained by"
                f" {WORKERS} worker processes --burst --concurrency {concurrency}), {total}"
                " jobs in all (--w6-total and --w6-round set them)"
            )
            common = (
                f"{setup}; value = pg_total_relation_size of lane.jobs (heap + indexes +"
                " toast) after the round; n_dead_tup from pg_stat_user_tables; autovacuum as"
                " shipped plus lane.jobs' own reloptions; one pass, no repeats"
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
            if hold:
                _report_hold(rep, f"lane_pg {label}", setup, hold, lane)
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


def _report_hold(
    rep: Reporter, subject: str, setup: str, hold: SnapshotHold, rounds: list[dict[str, Any]]
) -> None:
    """Two figures: the peak sizes while the snapshot was held against the peaks of the
    rounds before it, and the last round's sizes with the first round after the release
    whose heap and indexes were back within ``NORMAL`` of round 1's."""
    notes = (
        f"{setup}; another session held a REPEATABLE READ snapshot (BEGIN; {hold.query})"
        f" for {hold.seconds:g}s from the start of round {hold.start_round}"
        f" while the rounds went on; lane.jobs and lane.events sampled every {SAMPLE_EVERY:g}s"
        " (samples; n_dead_tup from pg_stat_user_tables); one pass, no repeats"
    )
    peak, before = hold.peaks("held"), hold.peaks("before")
    rep.figure(
        "W6", f"{subject}, snapshot held {hold.seconds:g}s: peak during the hold",
        [peak.get("total_mb", 0.0)], "MB", raw=None, no_baseline=True, digits=2,
        notes=f"{notes}; value = the largest pg_total_relation_size of lane.jobs sampled"
        " while held; peak_before = the largest of each sampled before the hold; round_before ="
        " the sizes after the last round before it",
        peak=peak, peak_before=before, round_before=rounds[hold.start_round - 2],
        samples=hold.samples,
    )  # fmt: skip
    first = rounds[0]
    after = [
        (i + 1, r) for i, r in enumerate(rounds)
        if "s_after_release" in r and not r["snapshot_held"]
    ]  # fmt: skip
    normal = [
        (n, r) for n, r in after
        if r["heap_mb"] <= NORMAL * first["heap_mb"]
        and r["indexes_mb"] <= NORMAL * first["indexes_mb"]
    ]  # fmt: skip
    last = rounds[-1]
    rep.figure(
        "W6", f"{subject}, snapshot held {hold.seconds:g}s: {len(after)} rounds after the release",
        [last["total_mb"]], "MB", raw=None, no_baseline=True, digits=2,
        notes=f"{notes}; value = pg_total_relation_size of lane.jobs after the last round;"
        f" normal_round = the first round after the release whose heap and indexes are within"
        f" {NORMAL}x of round 1's, normal_s_after_release = its end after the release",
        rounds_after_release=len(after),
        heap_ratio=round(last["heap_mb"] / first["heap_mb"], 2),
        indexes_ratio=round(last["indexes_mb"] / first["indexes_mb"], 2),
        normal_round=normal[0][0] if normal else None,
        normal_s_after_release=normal[0][1]["s_after_release"] if normal else None,
    )  # fmt: skip
