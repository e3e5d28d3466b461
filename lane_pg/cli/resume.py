"""``python -m lane_pg resume QUEUE``: let workers claim from a paused queue again (PAUSE-1).

Calls ``lane.resume_queue``, which clears the ``paused`` flag, writes a ``resumed`` event
and wakes the workers. The shared code is in ``lane_pg.cli.pause``.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.pause import add_arguments, set_paused

__all__ = ["HELP", "add_arguments", "run"]

HELP = "resume a paused queue: workers claim from it again"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(set_paused(args.queue, args.dsn, args.schema, paused=False)))
    return 0
