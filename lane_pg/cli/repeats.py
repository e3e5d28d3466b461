"""``python -m lane_pg repeats [QUEUE]`` lists repeat series with their next run;
``python -m lane_pg repeats remove QUEUE KEY`` ends one (REP-10, REP-11).

The list shows every live series of QUEUE (or of every queue), under a header, one
tab-separated line each: its queue and key, when its owner occurrence is due, the owner's
job id, how many occurrences ran before it (and the limit) and the schedule. ``remove``
ends the series and removes its owner (``lane.remove_repeat``); it refuses, exit code 1,
while the owner runs under a valid lease.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import CommandError, add_connection_arguments, format_duration
from lane_pg.cli.pause import open_backend
from lane_pg.types import RepeatInfo, validate_queue_name

HELP = "list repeat series and their next run, or remove one (repeats remove QUEUE KEY)"


HEADER = "queue\tkey\tnext_run\tjob\truns\tschedule"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [-h] [--dsn DSN] [--schema SCHEMA] [QUEUE | remove QUEUE KEY]"
    parser.add_argument(
        "words",
        nargs="*",
        metavar="QUEUE | remove QUEUE KEY",
        help="a queue to list (default: every queue), or: remove QUEUE KEY",
    )
    add_connection_arguments(parser)


def schedule_of(info: RepeatInfo) -> str:
    if info.every_ms is not None:
        return f"every {format_duration(info.every_ms)}"
    return f"cron {info.pattern!r}" + ("" if info.tz is None else f" {info.tz}")


def describe(queue: str, info: RepeatInfo) -> str:
    # count includes the owner, the occurrence still to run: the ones that ran are before it.
    ran = max(info.count - 1, 0)
    runs = f"{ran}" + ("" if info.limit is None else f"/{info.limit}")
    return (
        f"{queue}\t{info.key}\t{info.next_at.isoformat()}\t{info.job_id}"
        f"\t{runs}\t{schedule_of(info)}"
    )


async def list_series(queue: str | None, dsn: str | None, schema: str) -> list[str]:
    if queue is not None:
        validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        queues = [queue] if queue is not None else await backend.queues.list_queues()
        lines = [
            describe(name, info)
            for name in queues
            for info in await backend.repeats.list_repeats(name)
        ]
    if not lines:
        return [f"lane_pg: no repeat series{'' if queue is None else f' in {queue!r}'}"]
    return [HEADER, *lines]


async def remove_series(queue: str, key: str, dsn: str | None, schema: str) -> str:
    validate_queue_name(queue)
    async with open_backend(dsn, schema) as backend:
        removed = await backend.repeats.remove_repeat(queue, key)
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
