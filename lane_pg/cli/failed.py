"""``python -m lane_pg failed [--queue Q] [--job NAME] [--before DURATION] [--limit N]
[--after ID]``: list failed-job records, oldest first (CLI-8).

One line per record: the record id, the job's id (``retry`` and ``forget`` take either),
connection, queue, job name, failed at (UTC, ISO 8601) and the last line of the exception,
tab-separated under a header. ``--limit N`` (default 50) is the page size; when more
records match, a last line says how many and gives the ``--after ID`` that prints the next
page (a keyset page: records are never loaded all at once). ``--before 7d`` keeps records
that failed more than that long ago. With no failed-job store bound (any driver but
postgres) it exits 1 and says so (``failed_jobs``).
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.backend.failed import MAX_PAGE, FailedJobFilter, check_record_id, record_key
from lane_pg.cli.common import DURATION_EXAMPLES, CommandError, parse_count
from lane_pg.cli.failed_jobs import add_store_arguments, cutoff, open_failed_jobs
from lane_pg.types import validate_queue_name

HELP = "list failed-job records (id, job id, connection, queue, job name, failed at, exception)"

HEADER = "id\tjob_id\tconnection\tqueue\tjob_name\tfailed_at\texception"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", default=None, help="only records of this queue")
    parser.add_argument("--job", default=None, metavar="NAME", help="only this job name")
    parser.add_argument(
        "--older-than",
        "--before",
        dest="before",
        default=None,
        metavar="DURATION",
        help=f"only records that failed longer ago than this: {DURATION_EXAMPLES}"
        " (default: any age)",
    )
    parser.add_argument("--limit", default="50", metavar="N", help="records per page (default: 50)")
    parser.add_argument(
        "--after", default=None, metavar="ID", help="the page after this record's id"
    )
    add_store_arguments(parser)


def _cell(text: str) -> str:
    return " ".join(text.split())  # no tab or newline inside a column


async def listing(args: argparse.Namespace) -> list[str]:
    if args.queue is not None:
        validate_queue_name(args.queue)
    limit = parse_count(args.limit, "--limit", "a page size")
    if not 1 <= limit <= MAX_PAGE:
        raise CommandError(f"--limit {args.limit!r}: expected 1 to {MAX_PAGE}")
    where = FailedJobFilter(args.queue, args.job, cutoff(args.before, "--older-than"))
    after_id = None if args.after is None else check_record_id(args.after)
    async with open_failed_jobs(args.dsn, args.schema, args.connection) as (_, store):
        after = None
        if after_id is not None:
            start = await store.find(after_id)
            if start is None:
                raise CommandError(f"--after {args.after}: no failed job has this id")
            after = record_key(start)
        page = await store.page(where, after=after, limit=limit + 1)
        lines = [HEADER]
        for record in page[:limit]:
            cells = (
                record.id,
                record.job_id or "",
                record.connection,
                record.queue,
                record.job_name,
                record.failed_at.isoformat(),
                record.exception_summary,
            )
            lines.append("\t".join(_cell(cell) for cell in cells))
        if len(page) > limit:
            shown = page[limit - 1]
            total = await store.count(where)
            lines.append(
                f"lane_pg: more failed jobs ({total} match in all); next page: --after {shown.id}"
            )
        return lines


def run(args: argparse.Namespace) -> int:
    for line in asyncio.run(listing(args)):
        print(line)
    return 0
