"""``python -m lane_pg forget ID [--queue Q]``: delete one failed-job record (CLI-10,
FAIL-6). ID is the record id (a UUID, as ``failed`` lists it) or the job's own id
(``--queue`` narrows a job id that two queues share); exit 1 when no record, or more than
one, answers to it (the candidates are listed)."""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.backend.failed import LIST_HINT, AmbiguousFailedJob, FailedJobNotFound, find_failed
from lane_pg.cli.common import CommandError
from lane_pg.cli.failed_jobs import add_store_arguments, open_failed_jobs
from lane_pg.types import validate_queue_name

HELP = "delete one failed-job record (by record id or job id)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "id", metavar="ID", help="failed-record id (a UUID, as `failed` lists it) or job id"
    )
    parser.add_argument("--queue", default=None, help="the queue a job id is in")
    add_store_arguments(parser)


async def forget(args: argparse.Namespace) -> str:
    if args.queue is not None:
        validate_queue_name(args.queue)
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (_, store):
        try:
            record = await find_failed(store, args.id, args.queue)
        except (FailedJobNotFound, AmbiguousFailedJob) as exc:
            raise CommandError(str(exc)) from None
        if not await store.forget(record.id):
            raise CommandError(f"no failed job has id {record.id} any more; {LIST_HINT}")
    return f"lane_pg: forgot failed job {record.id} (job {record.job_id})"


def run(args: argparse.Namespace) -> int:
    print(asyncio.run(forget(args)))
    return 0
