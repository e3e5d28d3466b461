"""``python -m lane_pg retry ID... | all [--queue Q] [--before DURATION]``: push failed jobs
again and delete their records (CLI-9, FAIL-4, FAIL-5).

Each ID goes through ``Q.retry_failed``: the job goes back to the connection and queue it
failed on (``retry_job`` while its row is retained, else its stored record is pushed). An
ID that is not a UUID, names no record, or whose record cannot be pushed (a connection
this command does not know, an envelope that does not decode) is reported on stderr and
the command goes on with the others, then exits 1. ``all`` is ``Q.retry_all_failed``,
page by page; ``--queue`` and ``--before 7d`` narrow it (records it cannot push are kept,
with a warning). The database is the one of ``--dsn`` (``lane_pg.cli.failed_jobs``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from lane_pg.cli.common import CommandError
from lane_pg.cli.failed_jobs import add_store_arguments, cutoff, open_failed_jobs
from lane_pg.errors import ConfigurationError, InvalidOptions
from lane_pg.failed import FailedJobFilter, UndecodableFailedJob, check_record_id
from lane_pg.types import validate_queue_name

HELP = "push failed jobs again (by record id, or all) and delete their records"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="+", metavar="ID", help="failed-job ids, or: all")
    parser.add_argument("--queue", default=None, help="with all: only records of this queue")
    parser.add_argument(
        "--before", default=None, metavar="DURATION", help="with all: only older records (7d)"
    )
    add_store_arguments(parser)


async def retry(args: argparse.Namespace) -> int:
    every = "all" in args.ids
    if every and len(args.ids) > 1:
        raise CommandError("retry takes record ids or all, not both")
    if not every and (args.queue is not None or args.before is not None):
        raise CommandError("--queue and --before go with retry all")
    if args.queue is not None:
        validate_queue_name(args.queue)
    before = cutoff(args.before, "--before")
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (facade, _):
        if every:
            count = await facade.retry_all_failed(where=FailedJobFilter(args.queue, None, before))
            print(f"lane_pg: retried {count} failed job(s)")
            return 0
        failed = 0
        for text in args.ids:
            try:
                record_id = check_record_id(text)
                if await facade.retry_failed(record_id):
                    print(f"lane_pg: retried failed job {record_id}")
                    continue
                problem = "no failed job has this id"
            except InvalidOptions:
                problem = "not a UUID"
            except (ConfigurationError, UndecodableFailedJob) as exc:
                problem = str(exc)
            failed += 1
            print(f"lane_pg retry: {text}: {problem}", file=sys.stderr)
        return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(retry(args))
