"""``python -m lane_pg flush [--hours N]``: delete every failed-job record, or those that
failed more than N hours ago (CLI-10, FAIL-6)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta

from lane_pg.cli.common import parse_count
from lane_pg.cli.failed_jobs import add_store_arguments, before_now, open_failed_jobs

HELP = "delete failed-job records: all, or those older than --hours N"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hours", default=None, metavar="N", help="only records older than N hours"
    )
    add_store_arguments(parser)


async def flush(args: argparse.Namespace) -> str:
    hours = None if args.hours is None else parse_count(args.hours, "--hours", "hours")
    before = None if hours is None else before_now(timedelta(hours=hours), "--hours")
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (_, store):
        count = await store.flush(before)
    scope = "" if hours is None else f" older than {hours} hour(s)"
    return f"lane_pg: flushed {count} failed job(s){scope}"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(flush(args)))
    return 0
