"""``python -m lane_pg top [--interval 2] [--once] [--queue NAME]``: a refreshing view of
the queues, one line per queue.

Each line shows the queue's name, ``yes`` when it is paused, its waiting, delayed, active
and failed jobs, its completions and terminal failures per minute, its wait p95, the live
workers that serve it and, while it drains, a progress bar. Everything is read through the backend
contract (``get_queue_stats``, ``metrics.get_metrics``, ``metrics.get_throughput``,
``leader.list_workers``), so a
``memory://`` backend shows the same columns as PostgreSQL.

* ``done/min`` and ``failed/min``: the jobs that ended in the last 60 seconds, from the
  backend's per-minute terminal metrics (``get_metrics``): the current minute's count
  plus the previous minute's count weighted by the part of it still inside the last 60
  seconds (the minutes are the backend's, their clock the same as this machine's within
  a second or so). They count every terminal write of the queue, whatever worker made it.
* ``workers``: workers whose heartbeat is at most 15 seconds old serving the queue (one
  of every queue counts for each); as ``python -m lane_pg workers`` lists them.
* ``progress``: shown once the queue's waiting + delayed count fell since the previous
  refresh: ``[#####-----] 50% 5/10``, the jobs gone since the refresh before that fall
  (``done``) out of the count then (``started``). The bar stays while the count does not
  grow (a paused drain keeps its bar) and ends when it grows; with ``--once`` there is no
  previous refresh, so no bar.

* ``wait-p95``: how long the jobs that finished in the newest minute of the last five
  waited from due to started, 95th percentile (``metrics.get_throughput``, the rows of
  ``lane.v_throughput`` on PostgreSQL, from the retained finished jobs: jobs removed on
  completion are not in it). It reads each queue's last hour of finished jobs, so it is
  read again at most every ``THROUGHPUT_EVERY`` seconds, not at every refresh.

Refreshes every ``--interval`` seconds (2 by default) until Ctrl-C (exit 0); the screen
is cleared between frames only when stdout is a terminal, otherwise frames follow each
other separated by a blank line. ``--once`` prints one frame and exits, for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lane_pg.backend import JobQueueBackend
from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.types import validate_queue_name
from lane_pg.types.workers import LIVE_AFTER, workers_per_queue

HELP = "a refreshing view of the queues: counts, done and failed per minute, workers, drains"

THROUGHPUT_EVERY = 10.0
"""Seconds between two reads of a queue's wait percentile."""
BAR_WIDTH = 10
CLEAR = "\x1b[H\x1b[2J"
"""ANSI: cursor home, clear the screen."""
HEADINGS = (
    "queue",
    "paused",
    "waiting",
    "delayed",
    "active",
    "failed",
    "done/min",
    "failed/min",
    "wait-p95",
    "workers",
    "progress",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds between refreshes (default: 2)",
    )
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument(
        "--queue",
        action="append",
        default=None,
        metavar="NAME",
        help="only this queue (repeat for several); default: every queue",
    )
    add_connection_arguments(parser)


@dataclass
class QueueLine:
    """One queue as a frame shows it."""

    queue: str
    paused: bool
    waiting: int
    delayed: int
    active: int
    failed: int
    completed_per_minute: float
    failed_per_minute: float
    workers: int
    wait_p95_ms: float | None = None
    progress: tuple[int, int] | None = None
    """``(done, started)`` while the queue drains."""


def per_minute(prev_ts: int, data: Sequence[int], now: float) -> float:
    """Jobs in the 60 seconds before ``now`` (epoch seconds), estimated from per-minute
    counts: ``data[0]`` is the minute starting at ``prev_ts`` (epoch ms), ``data[1]`` the
    one before. The current minute counts whole, the previous one by the share of it that
    is still inside the window."""
    if prev_ts <= 0 or not data:
        return 0.0
    newest = prev_ts // 60_000
    minute = max(int(now // 60), newest)  # a backend clock a little ahead: its minute
    elapsed = min(max(now / 60 - minute, 0.0), 1.0)
    current = data[0] if newest == minute else 0
    if newest == minute:
        previous = data[1] if len(data) > 1 else 0
    elif newest == minute - 1:
        previous = data[0]
    else:
        previous = 0
    return current + previous * (1.0 - elapsed)


def bar(done: int, started: int) -> str:
    """``[#####-----] 50% 5/10``."""
    share = 0.0 if started <= 0 else min(max(done / started, 0.0), 1.0)
    filled = round(share * BAR_WIDTH)
    return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {share:.0%} {done}/{started}"


def rate(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


class TopView:
    """The frames of one ``top`` session: the pending count each queue had at the last
    refresh and the drains under way, kept between ``frame`` calls."""

    def __init__(self, queues: Sequence[str] | None = None) -> None:
        self.queues = None if queues is None else sorted({validate_queue_name(q) for q in queues})
        self._pending: dict[str, int] = {}
        """Waiting + delayed at the previous refresh."""
        self._drains: dict[str, int] = {}
        """The pending count when the drain began (``started``), by queue."""
        self._waits: dict[str, tuple[float, float | None]] = {}
        """Per queue: when its wait p95 was read (monotonic) and the value."""

    async def read(self, backend: JobQueueBackend, now: float | None = None) -> list[QueueLine]:
        """Every queue's line (``now``: epoch seconds, default this machine's clock)."""
        at = time.time() if now is None else now
        names = self.queues
        if names is None:
            names = sorted(await backend.queues.list_queues())
        workers = workers_per_queue(await backend.leader.list_workers(LIVE_AFTER), names)
        lines = []
        for queue in names:
            stats = await backend.reads.get_queue_stats(queue)
            counts = stats.counts
            done = await backend.metrics.get_metrics(queue, "completed", 0, 1)
            failed = await backend.metrics.get_metrics(queue, "failed", 0, 1)
            line = QueueLine(
                queue=queue,
                paused=stats.paused,
                waiting=counts.get("waiting", 0),
                delayed=counts.get("delayed", 0),
                active=counts.get("active", 0),
                failed=counts.get("failed", 0),
                completed_per_minute=per_minute(done.prev_ts, done.data, at),
                failed_per_minute=per_minute(failed.prev_ts, failed.data, at),
                workers=workers[queue],
                wait_p95_ms=await self._wait_p95(backend, queue, at),
            )
            line.progress = self._progress(queue, line.waiting + line.delayed)
            lines.append(line)
        return lines

    async def _wait_p95(self, backend: JobQueueBackend, queue: str, now: float) -> float | None:
        read_at, value = self._waits.get(queue, (float("-inf"), None))
        if time.monotonic() - read_at < THROUGHPUT_EVERY:
            return value
        minutes = [
            m
            for m in await backend.metrics.get_throughput(queue)
            if now - m.minute.timestamp() < 5 * 60 and m.wait_p95_ms is not None
        ]
        value = minutes[-1].wait_p95_ms if minutes else None
        self._waits[queue] = (time.monotonic(), value)
        return value

    def _progress(self, queue: str, pending: int) -> tuple[int, int] | None:
        previous = self._pending.get(queue)
        self._pending[queue] = pending
        if previous is None:
            return None
        started = self._drains.get(queue)
        if pending > previous:  # it grows: whatever drain there was is over
            self._drains.pop(queue, None)
            return None
        if started is None:
            if pending == previous:
                return None
            started = self._drains[queue] = previous  # the first fall seen
        return started - pending, started

    async def frame(self, backend: JobQueueBackend, now: float | None = None) -> str:
        """One frame: a title line, then the aligned table (read now)."""
        lines = await self.read(backend, now)
        at = datetime.fromtimestamp(time.time() if now is None else now, UTC)
        title = f"lane_pg top: {len(lines)} queue(s) at {at:%Y-%m-%d %H:%M:%S} UTC"
        return "\n".join([title, *format_table(lines)])


def format_table(lines: Sequence[QueueLine]) -> list[str]:
    """The aligned table: names and bars left-aligned, numbers right-aligned."""
    cells = [
        [
            line.queue,
            "yes" if line.paused else "no",
            str(line.waiting),
            str(line.delayed),
            str(line.active),
            str(line.failed),
            rate(line.completed_per_minute),
            rate(line.failed_per_minute),
            "-" if line.wait_p95_ms is None else f"{line.wait_p95_ms:.0f}ms",
            str(line.workers),
            "" if line.progress is None else bar(*line.progress),
        ]
        for line in lines
    ]
    rows = [list(HEADINGS), *cells]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADINGS))]

    def render(values: Sequence[str]) -> str:
        middle = (
            value.rjust(width) for value, width in zip(values[1:-1], widths[1:-1], strict=True)
        )
        return "  ".join([values[0].ljust(widths[0]), *middle, values[-1]]).rstrip()

    return [render(row) for row in rows]


async def watch(args: argparse.Namespace) -> None:
    if not args.interval > 0:
        raise CommandError(f"--interval {args.interval}: expected a number of seconds above 0")
    view = TopView(args.queue)
    tty = sys.stdout.isatty()
    async with open_backend(args.dsn, args.schema) as backend:
        first = True
        while True:
            text = await view.frame(backend)
            if tty:
                sys.stdout.write(CLEAR + text + "\n")
            else:
                sys.stdout.write(("" if first else "\n") + text + "\n")
            sys.stdout.flush()
            if args.once:
                return
            first = False
            await asyncio.sleep(args.interval)


def run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(watch(args))
    except KeyboardInterrupt:  # Ctrl-C: the way to leave, not an error
        return 0
    return 0
