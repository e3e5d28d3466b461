"""What the dashboard's pages show, read only through the backend contract, so every
backend serves the dashboard (memory, PostgreSQL, Redis once it lands).

Every read is one of the contract's indexed reads: per-queue counts through the state
indexes (never a scan of the whole jobs table), pages of one queue's jobs in one state
in that state's index order (``search_jobs``), the last hour's per-minute buckets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.dashboard.search import JobSearch
from lane_pg.types import ALL_STATES, JSON, JobRow, JobState, WorkerInfo
from lane_pg.types.metrics import THROUGHPUT_WINDOW_MINUTES, MetricsState, ThroughputMinute
from lane_pg.types.workers import LIVE_AFTER, workers_per_queue

PAGE_SIZE = 50
MAX_SHOWN_CHARS = 10_000
"""Characters of a JSON value shown on a page; the rest is cut with a note (a huge return
value froze bull-board's job page)."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    paused: bool
    counts: dict[str, int]
    workers: int


async def live_workers(backend: JobQueueBackend) -> list[WorkerInfo]:
    return list(await backend.leader.list_workers(LIVE_AFTER))


async def queue_rows(backend: JobQueueBackend, workers: list[WorkerInfo]) -> list[QueueRow]:
    queues = sorted(await backend.queues.list_queues())
    served = workers_per_queue(workers, queues)
    rows = []
    for queue in queues:
        stats = await backend.reads.get_queue_stats(queue)
        counts = {str(state): count for state, count in stats.counts.items()}
        rows.append(QueueRow(queue, stats.paused, counts, served[queue]))
    return rows


async def overview_snapshot(backend: JobQueueBackend) -> dict[str, Any]:
    """The live part of every page: counts and pause flag per queue, live workers."""
    workers = await live_workers(backend)
    rows = await queue_rows(backend, workers)
    return {
        "queues": {
            row.name: {"paused": row.paused, "counts": row.counts, "workers": row.workers}
            for row in rows
        },
        "totals": {state: sum(row.counts.get(state, 0) for row in rows) for state in ALL_STATES},
        "workers": len(workers),
    }


# ------------------------------------------------------------------------------ charts


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG chart's geometry, drawn by the page template: bars per minute (completed
    over failed) and lines (wait and run p95), in a ``width`` x ``height`` box."""

    width: int
    height: int
    bars: list[dict[str, float]]
    lines: dict[str, str]
    max_count: int
    max_ms: float
    minutes: int
    first: str
    last: str


def chart_of(minutes: list[ThroughputMinute], now: datetime | None = None) -> Chart:
    """The last hour, one slot per minute (empty minutes included), oldest left."""
    width, height, span = 600, 120, THROUGHPUT_WINDOW_MINUTES
    end = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    by_minute = {m.minute.astimezone(UTC).replace(second=0, microsecond=0): m for m in minutes}
    slots = [end.timestamp() - 60 * (span - 1 - i) for i in range(span)]
    found = [by_minute.get(datetime.fromtimestamp(t, UTC)) for t in slots]
    max_count = max([(m.completed + m.failed) for m in found if m is not None] or [0])
    max_ms = max(
        [v for m in found if m is not None for v in (m.wait_p95_ms, m.run_p95_ms) if v is not None]
        or [0.0]
    )
    slot = width / span
    bars: list[dict[str, float]] = []
    wait_points: list[str] = []
    run_points: list[str] = []
    for i, m in enumerate(found):
        if m is None:
            continue
        x = i * slot
        scale = (height - 4) / max_count if max_count else 0
        done_h, failed_h = m.completed * scale, m.failed * scale
        bars.append(
            {
                "x": round(x + 1, 1),
                "w": round(max(slot - 2, 1), 1),
                "done_y": round(height - done_h, 1),
                "done_h": round(done_h, 1),
                "failed_y": round(height - done_h - failed_h, 1),
                "failed_h": round(failed_h, 1),
                "completed": m.completed,
                "failed": m.failed,
            }
        )
        center = round(x + slot / 2, 1)
        if max_ms:
            if m.wait_p95_ms is not None:
                wait_points.append(
                    f"{center},{round(height - m.wait_p95_ms / max_ms * (height - 4), 1)}"
                )
            if m.run_p95_ms is not None:
                run_points.append(
                    f"{center},{round(height - m.run_p95_ms / max_ms * (height - 4), 1)}"
                )
    return Chart(
        width,
        height,
        bars,
        {"wait": " ".join(wait_points), "run": " ".join(run_points)},
        max_count,
        round(max_ms, 1),
        span,
        datetime.fromtimestamp(slots[0], UTC).strftime("%H:%M"),
        datetime.fromtimestamp(slots[-1], UTC).strftime("%H:%M"),
    )


async def last_hour(backend: JobQueueBackend, queue: str) -> list[ThroughputMinute]:
    """The queue's last hour per minute, oldest first: how many jobs completed and failed
    from the terminal metrics (``get_metrics``: every job, also one removed on completion),
    with the wait and run percentiles of the retained ones (``get_throughput``)."""
    counts: dict[int, list[int]] = {}
    states: tuple[MetricsState, MetricsState] = ("completed", "failed")
    for column, state in enumerate(states):
        metrics = await backend.metrics.get_metrics(queue, state, 0, THROUGHPUT_WINDOW_MINUTES - 1)
        for back, count in enumerate(metrics.data):
            if count:
                minute_ms = metrics.prev_ts - back * 60_000
                counts.setdefault(minute_ms, [0, 0])[column] += count
    timed = {
        int(m.minute.timestamp() * 1000): m for m in await backend.metrics.get_throughput(queue)
    }
    minutes = []
    for minute_ms in sorted(counts.keys() | timed.keys()):
        completed, failed = counts.get(minute_ms, [0, 0])
        t = timed.get(minute_ms)
        minutes.append(
            ThroughputMinute(
                datetime.fromtimestamp(minute_ms / 1000, UTC),
                completed,
                failed,
                *(
                    (None,) * 6
                    if t is None
                    else (
                        t.wait_p50_ms,
                        t.wait_p95_ms,
                        t.wait_p99_ms,
                        t.run_p50_ms,
                        t.run_p95_ms,
                        t.run_p99_ms,
                    )
                ),
            )
        )
    return minutes


def summed(per_queue: list[list[ThroughputMinute]]) -> list[ThroughputMinute]:
    """Every queue's minutes added up (counts only: percentiles do not add)."""
    total: dict[datetime, list[int]] = {}
    for minutes in per_queue:
        for m in minutes:
            counts = total.setdefault(m.minute, [0, 0])
            counts[0] += m.completed
            counts[1] += m.failed
    return [
        ThroughputMinute(minute, c, f, None, None, None, None, None, None)
        for minute, (c, f) in sorted(total.items())
    ]


def recent(minutes: list[ThroughputMinute], now: datetime | None = None) -> dict[str, Any]:
    """The last five minutes of a queue: jobs finished per minute, and the wait and run
    p95 of the newest of them with retained jobs to measure."""
    end = (now or datetime.now(UTC)).timestamp()
    last5 = [m for m in minutes if end - m.minute.timestamp() < 5 * 60]
    timed = [m for m in last5 if m.wait_p95_ms is not None or m.run_p95_ms is not None]
    newest = timed[-1] if timed else None
    return {
        "per_minute": round(sum(m.completed + m.failed for m in last5) / 5, 1),
        "wait_p95_ms": None if newest is None else newest.wait_p95_ms,
        "run_p95_ms": None if newest is None else newest.run_p95_ms,
    }


# ------------------------------------------------------------------------------- jobs


async def search_jobs(
    backend: JobQueueBackend,
    queues: list[str],
    state: JobState,
    search: JobSearch,
    offset: int,
    limit: int = PAGE_SIZE,
) -> tuple[list[JobRow], bool]:
    """A page of the jobs in ``state`` of ``queues`` that match ``search``; whether more
    match. With an id term each queue is asked for that one job (its primary key)."""
    if search.job_id is not None:
        found = []
        for queue in queues:
            job = await backend.jobs.get_job(queue, search.job_id)
            if job is not None and job.state == state:
                found.append(job)
        return found[offset : offset + limit], len(found) > offset + limit
    if len(queues) == 1:
        page = await backend.reads.search_jobs(
            queues[0],
            state,
            name=search.name,
            data_path=search.data_path,
            data_value=search.data_value,
            offset=offset,
            limit=limit,
        )
        return list(page.items), page.has_more
    # Across queues: each queue's first offset + limit matches in its state's order, queue
    # after queue, until the page is full (a page deep into many queues reads more).
    jobs: list[JobRow] = []
    more = False
    for queue in queues:
        page = await backend.reads.search_jobs(
            queue,
            state,
            name=search.name,
            data_path=search.data_path,
            data_value=search.data_value,
            offset=0,
            limit=min(offset + limit, 500),
        )
        jobs.extend(page.items)
        if page.has_more or len(jobs) > offset + limit:
            more = True
            break
    return jobs[offset : offset + limit], more or len(jobs) > offset + limit


def shown_json(value: JSON) -> tuple[str, int | None]:
    """The value pretty-printed, cut to ``MAX_SHOWN_CHARS``; and its full length when cut."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > MAX_SHOWN_CHARS:
        return text[:MAX_SHOWN_CHARS], len(text)
    return text, None
