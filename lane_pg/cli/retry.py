"""``python -m lane_pg retry ID... [--queue Q] | all [--queue Q] [--before DURATION]``: push
failed jobs again and delete their records (CLI-9, FAIL-4, FAIL-5).

An ID is a failed-record id (the UUID ``failed`` lists) or the job's own id; a job id that
several records carry (the same id in two queues) is narrowed by ``--queue``, else refused
with the candidates listed. Each record goes through ``Q.retry_failed``: the job goes back
to the store of the connection it failed on (``retry_job`` while its row is retained, else
its stored record is pushed). An ID that names no record, or whose record cannot be pushed
(a connection this configuration does not know, an envelope that does not decode) is
reported on stderr and the command goes on with the others, then exits 1. ``all`` is
``Q.retry_all_failed``, page by page; ``--queue`` and ``--before 7d`` narrow it (records it
cannot push are kept, with a warning). Connections come from the boot configuration
(``lane_pg.cli.failed_jobs``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from lane_pg.backend.failed import (
    LIST_HINT,
    AmbiguousFailedJob,
    FailedJobFilter,
    FailedJobNotFound,
    UndecodableFailedJob,
    find_failed,
)
from lane_pg.cli.common import CommandError
from lane_pg.cli.failed_jobs import add_store_arguments, cutoff, open_failed_jobs
from lane_pg.errors import ConfigurationError
from lane_pg.types import validate_queue_name

HELP = "push failed jobs again (by record id or job id, or all) and delete their records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="failed-record ids (UUIDs, as `failed` lists them) or job ids, or: all",
    )
    parser.add_argument(
        "--queue",
        default=None,
        help="only records of this queue (with all; with job ids: the queue the id is in)",
    )
    parser.add_argument(
        "--before",
        default=None,
        metavar="DURATION",
        help="with all: only records that failed longer ago than this (30s, 15m, 1h, 7d)",
    )
    add_store_arguments(parser)


async def retry(args: argparse.Namespace) -> int:
    every = "all" in args.ids
    if every and len(args.ids) > 1:
        raise CommandError("retry takes record ids or all, not both")
    if not every and args.before is not None:
        raise CommandError("--before goes with retry all")
    if args.queue is not None:
        validate_queue_name(args.queue)
    before = cutoff(args.before, "--before")
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (facade, store):
        if every:
            count = await facade.retry_all_failed(where=FailedJobFilter(args.queue, None, before))
            print(f"lane_pg: retried {count} failed job(s)")
            return 0
        failed = 0
        for text in args.ids:
            try:
                record = await find_failed(store, text, args.queue)
                if await facade.retry_failed(record.id):
                    print(f"lane_pg: retried failed job {record.id} (job {record.job_id})")
                    continue
                problem = f"no failed job has this id any more; {LIST_HINT}"
            except (
                FailedJobNotFound,
                AmbiguousFailedJob,
                ConfigurationError,
                UndecodableFailedJob,
            ) as exc:
                problem = str(exc)
            failed += 1
            print(f"lane_pg retry: {text}: {problem}", file=sys.stderr)
        return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(retry(args))
