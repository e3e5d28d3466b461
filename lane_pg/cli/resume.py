"""``python -m lane_pg resume QUEUE | --all [--connection NAME]`` (alias ``continue``): let
workers claim from a paused queue again, or lift the connection-wide pause (PAUSE-1,
PAUSE-4, CLI-7).

``lane.resume_queue`` clears the ``paused`` flag, writes a ``resumed`` event and wakes the
workers; ``lane.resume_all`` lifts ``pause --all`` and leaves per-queue pauses as they are.
The shared code is in ``lane_pg.cli.pause``.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.pause import add_arguments, set_paused_for

__all__ = ["ALIASES", "HELP", "add_arguments", "run"]

HELP = "resume a paused queue (or --all): workers claim from it again"
ALIASES = ("continue",)


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(set_paused_for(args, paused=False)))
    return 0
