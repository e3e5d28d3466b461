"""``python -m lane_pg drain QUEUE [--delayed]``: remove a queue's waiting jobs (MGMT-17,
CLI-12).

``lane.drain_jobs`` removes every waiting job of the queue, and with ``--delayed`` every
delayed one too, each as ``remove_job`` would (``removed`` events, logs, dedup ids). The
current job of each repeat series stays, so a drain never ends a series; active, finished
and waiting-children jobs stay. Jobs being claimed while it runs are left to their
claimers. Prints how many jobs went.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.types import validate_queue_name

HELP = "remove a queue's waiting (and with --delayed its delayed) jobs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument(
        "--delayed", action="store_true", help="remove the delayed jobs too (not repeat series)"
    )
    add_connection_arguments(parser)


async def drain(queue: str, dsn: str | None, schema: str, delayed: bool) -> str:
    """Drain ``queue``; returns the line reporting it."""
    validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        removed = await backend.cleanup.drain_jobs(queue, delayed=delayed)
    what = "waiting and delayed" if delayed else "waiting"
    return f"lane_pg: drained queue {queue!r}: removed {removed} {what} job(s)"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(drain(args.queue, args.dsn, args.schema, args.delayed)))
    return 0
