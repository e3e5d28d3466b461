"""``python -m lane_pg retention QUEUE``: show or set how many finished jobs a queue keeps.

Every queue keeps its newest ``keep_completed`` completed (default 10,000) and
``keep_failed`` failed (default 100,000) jobs; the workers' maintenance leader deletes older
ones in the background (``lane.prune_finished``). Without options the command prints the
queue's bounds (the defaults for a queue that does not exist yet). ``--keep-completed``
and ``--keep-failed`` take a count or ``all`` (keep every finished job of that state,
RET-1's behaviour); an option left out keeps its current value. Setting creates the queue
when it is missing, as ``lane.set_queue_retention`` does.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import CommandError, add_connection_arguments, warn_if_new_queue
from lane_pg.cli.pause import open_backend
from lane_pg.types import QueueRetention, validate_queue_name

HELP = "show or set how many completed and failed jobs a queue keeps"

KEEP_ALL = "all"
MAX_KEEP = 2**31 - 1  # an integer column


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument(
        "--keep-completed",
        default=None,
        metavar="N|all",
        help="keep the newest N completed jobs, or all of them (default for a queue: 10000)",
    )
    parser.add_argument(
        "--keep-failed",
        default=None,
        metavar="N|all",
        help="keep the newest N failed jobs, or all of them (default for a queue: 100000)",
    )
    add_connection_arguments(parser)


def parse_keep(option: str, text: str) -> int | None:
    """``N`` (a count >= 0) or ``all`` (None: keep every finished job)."""
    value = text.strip()
    if value.lower() == KEEP_ALL:
        return None
    if not value.isascii() or not value.isdigit() or int(value) > MAX_KEEP:
        raise CommandError(f"{option} {text!r}: expected a count (0 to {MAX_KEEP}) or {KEEP_ALL!r}")
    return int(value)


def describe(queue: str, retention: QueueRetention) -> str:
    """``queue 'q': keep completed 10000, keep failed all``."""

    def shown(value: int | None) -> str:
        return KEEP_ALL if value is None else str(value)

    return (
        f"queue {queue!r}: keep completed {shown(retention.keep_completed)},"
        f" keep failed {shown(retention.keep_failed)}"
    )


async def show_or_set(
    queue: str,
    dsn: str | None,
    schema: str,
    keep_completed: str | None = None,
    keep_failed: str | None = None,
) -> str:
    """Set the given bounds (if any) and return the line describing the queue's bounds."""
    validate_queue_name(queue)
    completed = None if keep_completed is None else parse_keep("--keep-completed", keep_completed)
    failed = None if keep_failed is None else parse_keep("--keep-failed", keep_failed)
    changing = keep_completed is not None or keep_failed is not None
    if changing:  # refuse bad values before connecting
        QueueRetention(completed, failed)
    async with open_backend(dsn, schema) as backend:
        current = await backend.queues.get_queue_retention(queue)
        if not changing:
            return f"lane_pg: {describe(queue, current)}"
        await warn_if_new_queue(backend, queue, "retention set ahead of time")
        wanted = QueueRetention(
            completed if keep_completed is not None else current.keep_completed,
            failed if keep_failed is not None else current.keep_failed,
        )
        await backend.queues.set_queue_retention(
            queue, keep_completed=wanted.keep_completed, keep_failed=wanted.keep_failed
        )
        stored = await backend.queues.get_queue_retention(queue)
    return f"lane_pg: set {describe(queue, stored)}"


def run(args: argparse.Namespace) -> int:
    line = asyncio.run(
        show_or_set(args.queue, args.dsn, args.schema, args.keep_completed, args.keep_failed)
    )
    print(line)
    return 0
