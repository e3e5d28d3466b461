"""``python -m lane_pg repeats [QUEUE]`` lists repeat series with their next run;
``python -m lane_pg repeats remove QUEUE KEY`` ends one (REP-10, REP-11).

The list shows every live series of QUEUE (or of every queue), latest next run first: its
key, when its owner occurrence is due, the owner's job id, how many occurrences there were
(and the limit) and the schedule. ``remove`` ends the series and removes its owner
(``lane.remove_repeat``); it refuses, exit code 1, while the owner runs under a valid lease.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.types import RepeatInfo, validate_queue_name

HELP = "list repeat series and their next run, or remove one (repeats remove QUEUE KEY)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[QUEUE | remove QUEUE KEY]",
        help="a queue to list (default: every queue), or: remove QUEUE KEY",
    )
    add_connection_arguments(parser)


def schedule_of(info: RepeatInfo) -> str:
    if info.every_ms is not None:
        return f"every {info.every_ms} ms"
    return f"cron {info.pattern!r}" + ("" if info.tz is None else f" {info.tz}")


def describe(queue: str, info: RepeatInfo) -> str:
    runs = f"{info.count}" + ("" if info.limit is None else f"/{info.limit}")
    return (
        f"{queue}\t{info.key}\tnext {info.next_at.isoformat()}\tjob {info.job_id}"
        f"\truns {runs}\t{schedule_of(info)}"
    )


async def list_series(queue: str | None, dsn: str | None, schema: str) -> list[str]:
    if queue is not None:
        validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        queues = [queue] if queue is not None else await backend.list_queues()
        lines = [
            describe(name, info) for name in queues for info in await backend.list_repeats(name)
        ]
    return lines or [f"lane_pg: no repeat series{'' if queue is None else f' in {queue!r}'}"]


async def remove_series(queue: str, key: str, dsn: str | None, schema: str) -> str:
    validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        removed = await backend.remove_repeat(queue, key)
    if removed is None:
        raise CommandError(f"queue {queue!r} has no repeat series {key!r}")
    return f"lane_pg: removed repeat series {key!r} of queue {queue!r} (its job {removed})"


def run(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    if len(words) == 3 and words[0] == "remove":
        print(asyncio.run(remove_series(words[1], words[2], args.dsn, args.schema)))
        return 0
    if len(words) > 1:
        raise CommandError(
            f"unexpected arguments {' '.join(words)!r}: use `repeats [QUEUE]` or"
            " `repeats remove QUEUE KEY`"
        )
    for line in asyncio.run(list_series(words[0] if words else None, args.dsn, args.schema)):
        print(line)
    return 0
