"""``python -m lane_pg recover-stalled [QUEUE ...]``: recover the active jobs whose lease
has expired, now (STALL-1..3, CLI-12).

What the workers' maintenance leader does every few seconds (``lane.recover_stalled``): a
job whose lease ran out goes back to waiting, or fails for good once it stalled more than
``--max-stalled-count`` times (default 1). Without a queue, every queue. Prints one line
per recovered job and a summary.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import add_connection_arguments, parse_count
from lane_pg.cli.pause import open_backend
from lane_pg.types import DEFAULT_MAX_STALLED_COUNT, validate_queue_name

HELP = "move the active jobs whose lease expired back to waiting (or to failed)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "queues", nargs="*", metavar="QUEUE", help="queue names (default: every queue)"
    )
    parser.add_argument(
        "--max-stalled-count",
        default=str(DEFAULT_MAX_STALLED_COUNT),
        metavar="N",
        help="stalls a job may have before it fails for good"
        f" (default: {DEFAULT_MAX_STALLED_COUNT})",
    )
    add_connection_arguments(parser)


async def recover(
    queues: list[str], dsn: str | None, schema: str, max_stalled_count: str
) -> list[str]:
    """Recover; returns the lines reporting it."""
    names = [validate_queue_name(queue) for queue in queues] or None
    most = parse_count(max_stalled_count, "--max-stalled-count")
    async with open_backend(dsn, schema) as backend:
        outcomes = await backend.maintenance.recover_stalled(names, max_stalled_count=most)
    lines = [f"{o.queue}\t{o.id}\t{o.state}" for o in outcomes]
    waiting = sum(1 for o in outcomes if o.state == "waiting")
    lines.append(
        f"lane_pg: recovered {len(outcomes)} stalled job(s):"
        f" {waiting} back to waiting, {len(outcomes) - waiting} failed"
    )
    return lines


def run(args: argparse.Namespace) -> int:
    lines = asyncio.run(recover(args.queues, args.dsn, args.schema, args.max_stalled_count))
    print("\n".join(lines))
    return 0
