"""``python -m lane_pg forget ID``: delete one failed-job record (CLI-10, FAIL-6); exit 1
when no record has that id (or it is not a UUID)."""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.cli.common import CommandError
from lane_pg.cli.failed_jobs import add_store_arguments, open_failed_jobs
from lane_pg.failed import check_record_id

HELP = "delete one failed-job record"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="failed-job id (a UUID)")
    add_store_arguments(parser)


async def forget(args: argparse.Namespace) -> str:
    record_id = check_record_id(args.id)
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (_, store):
        if not await store.forget(record_id):
            raise CommandError(f"no failed job has id {record_id}")
    return f"lane_pg: forgot failed job {record_id}"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(forget(args)))
    return 0
