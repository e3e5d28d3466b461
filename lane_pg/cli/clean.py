"""``python -m lane_pg clean QUEUE --state STATE --older-than DURATION [--limit N]``: remove
a queue's jobs of one state older than a duration (MGMT-18..20, CLI-12).

``lane.clean_jobs`` removes, oldest first, the jobs in ``--state`` whose time is older
than ``--older-than`` (``--grace`` is the same option): finished time for completed and
failed jobs, start time for active ones (only those whose lease has expired), add time
for waiting and delayed ones; never the current job of a repeat series. ``--limit N``
removes at most N (default: all). It writes one ``cleaned {count}`` event. Durations are
written ``500ms``, ``30s``, ``15m``, ``1h`` or ``7d``. Bad input is refused before
connecting.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import add_connection_arguments, parse_count, parse_duration
from lane_pg.cli.pause import open_backend
from lane_pg.types import validate_clean_state, validate_queue_name

HELP = "remove a queue's jobs of one state that are older than a duration"

STATES = ("completed", "failed", "active", "waiting", "delayed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument("--state", required=True, choices=STATES, help="the state to clean")
    parser.add_argument(
        "--older-than",
        "--grace",
        dest="older_than",
        required=True,
        metavar="DURATION",
        help="only jobs older than this: 500ms, 30s, 15m, 1h, 7d (default: any age)",
    )
    parser.add_argument(
        "--limit", default="0", metavar="N", help="remove at most N jobs (default: 0, all)"
    )
    add_connection_arguments(parser)


async def clean(
    queue: str, dsn: str | None, schema: str, state: str, older_than: str, limit: str
) -> str:
    """Clean ``queue``; returns the line reporting it."""
    validate_queue_name(queue)
    wanted = validate_clean_state(state)
    grace = parse_duration(older_than, "--older-than")
    most = parse_count(limit, "--limit", "a count, 0 for all,")
    async with open_backend(dsn, schema) as backend:
        removed = await backend.cleanup.clean_jobs(queue, wanted, grace, limit=most)
    return f"lane_pg: cleaned queue {queue!r}: removed {len(removed)} {state} job(s)"


def run(args: argparse.Namespace) -> int:
    line = asyncio.run(
        clean(args.queue, args.dsn, args.schema, args.state, args.older_than, args.limit)
    )
    print(line)
    return 0
