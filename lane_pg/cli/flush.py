"""``python -m lane_pg flush [--older-than DURATION]``: delete every failed-job record, or
those that failed longer ago than DURATION (CLI-10, FAIL-6). ``--hours N``, the older
spelling, is ``--older-than Nh``."""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta

from lane_pg.cli.common import DURATION_EXAMPLES, format_duration, parse_count, parse_duration
from lane_pg.cli.failed_jobs import add_store_arguments, before_now, open_failed_jobs

HELP = "delete failed-job records: all, or those older than --older-than DURATION"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    age = parser.add_mutually_exclusive_group()
    age.add_argument(
        "--older-than",
        "--before",
        dest="older_than",
        default=None,
        metavar="DURATION",
        help=f"only records that failed longer ago than this: {DURATION_EXAMPLES}"
        " (default: every record)",
    )
    age.add_argument(
        "--hours",
        default=None,
        metavar="N",
        help="only records older than N hours: the older spelling of --older-than Nh"
        " (default: every record)",
    )
    add_store_arguments(parser)


def _age(args: argparse.Namespace) -> tuple[timedelta, str] | None:
    """How old a record must be to go, and the option that said so (None: every record)."""
    if args.hours is not None:
        return timedelta(hours=parse_count(args.hours, "--hours", "hours")), "--hours"
    if args.older_than is not None:
        return parse_duration(args.older_than, "--older-than"), "--older-than"
    return None


async def flush(args: argparse.Namespace) -> str:
    age = _age(args)
    before = None if age is None else before_now(*age)
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (_, store):
        count = await store.flush(before)
    shown = "" if age is None else format_duration(age[0] // timedelta(milliseconds=1))
    return f"lane_pg: flushed {count} failed job(s){shown and f' older than {shown}'}"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(flush(args)))
    return 0
