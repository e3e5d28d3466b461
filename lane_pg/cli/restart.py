"""``python -m lane_pg restart [--connection NAME]``: ask every running worker to exit (CLI-6).

``lane.signal_restart`` stores the database's time in milliseconds in ``lane.settings``
(``restart_at``) and wakes idle workers. A worker compares it with the signal it read when
it started, at most once a second (or once per poll interval, if shorter), and exits 0
after its running jobs finish, emitting ``WorkerInterrupted``; a process manager then
starts it again with new code. A worker started after the command keeps running.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime

from lane_pg.cli.common import add_connection_arguments, add_connection_name_argument
from lane_pg.cli.pause import connection_backend

HELP = "signal running workers to exit once their jobs finish (restart them with new code)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_name_argument(parser)
    add_connection_arguments(parser)


async def _restart(args: argparse.Namespace) -> int:
    async with connection_backend(args) as backend:
        return await backend.queues.signal_restart()


def run(args: argparse.Namespace) -> int:
    stamp = asyncio.run(_restart(args))
    at = datetime.fromtimestamp(stamp / 1000, UTC).isoformat(" ", timespec="milliseconds")
    print(
        f"lane_pg: restart signal stored at {at.replace('+00:00', ' UTC')}; workers started"
        " before it exit once their running jobs finish"
    )
    return 0
