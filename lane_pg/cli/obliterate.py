"""``python -m lane_pg obliterate QUEUE [--force] [--yes]``: delete a queue and everything
of it (MGMT-21, CLI-12).

The queue is paused first; while it has active jobs the command refuses (exit 1) and the
queue stays paused, so its workers finish what they hold and claim nothing new: run it
again then, or give ``--force`` to delete the active jobs too. Otherwise its jobs, logs,
events, dedup ids, repeat series, limits, settings and pause flag go
(``lane.obliterate_queue``). On a terminal it asks first (``--yes`` skips the question);
with input that is not a terminal (a script, a pipe) it asks nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.errors import JobStateConflict
from lane_pg.types import validate_queue_name

HELP = "delete a queue with all its jobs, events and settings (refused while jobs run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument("--force", action="store_true", help="delete the queue's active jobs too")
    parser.add_argument(
        "-y", "--yes", action="store_true", help="do not ask for confirmation on a terminal"
    )
    add_connection_arguments(parser)


def confirmed(queue: str) -> bool:
    """Ask on the terminal; anything but y or yes is a no."""
    answer = input(f"Obliterate queue {queue!r}: delete all its jobs, events and settings? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


async def obliterate(queue: str, dsn: str | None, schema: str, force: bool) -> str:
    """Obliterate ``queue``; returns the line reporting it."""
    validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        try:
            removed = await backend.cleanup.obliterate_queue(queue, force=force)
        except JobStateConflict as exc:
            raise CommandError(
                f"{exc}; queue {queue!r} is left paused (resume it with"
                f" `python -m lane_pg resume {queue}`)"
            ) from exc
    return f"lane_pg: obliterated queue {queue!r}: removed {removed} job(s)"


def run(args: argparse.Namespace) -> int:
    validate_queue_name(args.queue)
    if sys.stdin.isatty() and not args.yes and not confirmed(args.queue):
        print("lane_pg: nothing changed")
        return 1
    print(asyncio.run(obliterate(args.queue, args.dsn, args.schema, args.force)))
    return 0
