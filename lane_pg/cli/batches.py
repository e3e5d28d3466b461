"""``python -m lane_pg batches`` lists batches with their progress; ``batches show ID``
shows one; ``batches cancel ID [--remove-waiting]`` cancels one; ``batches prune
--older-than 24h [--unfinished-older-than 72h]`` deletes old ones.

The list is one tab-separated line per batch, newest first, under a header: id, name,
state (pending, finished, cancelled), settled/total, failed, percent done and creation
time; ``--state`` keeps one state, ``--json`` prints the batches as JSON objects instead.
Counts come from the jobs' settlements, as ``lane.find_batch`` derives them in SQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from lane_pg.cli.common import CommandError, add_connection_arguments, parse_count, parse_duration
from lane_pg.cli.pause import open_backend
from lane_pg.errors import BatchNotFound
from lane_pg.types import BATCH_STATES, Batch

HELP = "list batches and their progress, or show, cancel or prune them"

HEADER = "id\tname\tstate\tsettled\tfailed\tdone\tcreated_at"
USAGE = (
    "%(prog)s [-h] [--dsn DSN] [--schema SCHEMA] [list | show ID | cancel ID | prune]"
    " [--state STATE] [--limit N] [--json] [--remove-waiting] [--older-than DURATION]"
    " [--unfinished-older-than DURATION]"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = USAGE
    parser.add_argument(
        "words",
        nargs="*",
        metavar="list | show ID | cancel ID | prune",
        help="what to do (default: list)",
    )
    parser.add_argument("--state", choices=BATCH_STATES, help="list: only batches in STATE")
    parser.add_argument("--limit", default="50", help="list: the newest N batches (default 50)")
    parser.add_argument("--json", action="store_true", help="list, show: print JSON")
    parser.add_argument(
        "--remove-waiting",
        action="store_true",
        help="cancel: also remove the batch's jobs that have not started",
    )
    parser.add_argument(
        "--older-than",
        default="24h",
        help="prune: delete batches that finished longer ago than this (default 24h)",
    )
    parser.add_argument(
        "--unfinished-older-than",
        metavar="DURATION",
        help="prune: also delete unfinished batches created longer ago than this (e.g. 72h;"
        " default: keep them)",
    )
    add_connection_arguments(parser)


def state_of(batch: Batch) -> str:
    if batch.finished:
        return "finished"
    return "cancelled" if batch.cancelled else "pending"


def line_of(batch: Batch) -> str:
    return (
        f"{batch.id}\t{batch.name or '-'}\t{state_of(batch)}"
        f"\t{batch.processed_jobs()}/{batch.total_jobs}\t{batch.failed_jobs}"
        f"\t{batch.progress()}%\t{batch.created_at.isoformat()}"
    )


def document_of(batch: Batch) -> dict[str, object]:
    return {
        "id": batch.id,
        "name": batch.name,
        "state": state_of(batch),
        "total_jobs": batch.total_jobs,
        "pending_jobs": batch.pending_jobs,
        "processed_jobs": batch.processed_jobs(),
        "failed_jobs": batch.failed_jobs,
        "failed_job_ids": list(batch.failed_job_ids),
        "progress": batch.progress(),
        "options": batch.options,
        "created_at": batch.created_at.isoformat(),
        "cancelled_at": None if batch.cancelled_at is None else batch.cancelled_at.isoformat(),
        "finished_at": None if batch.finished_at is None else batch.finished_at.isoformat(),
    }


def bar(percent: int, width: int = 30) -> str:
    filled = percent * width // 100
    return "[" + "#" * filled + "." * (width - filled) + f"] {percent}%"


def shown(batch: Batch) -> list[str]:
    callbacks = ", ".join(
        f"{kind} {batch.options[kind]}"
        for kind in ("then", "catch", "finally")
        if isinstance(batch.options.get(kind), str)
    )
    failed = ", ".join(batch.failed_job_ids) or "-"
    return [
        f"batch {batch.id} {batch.name!r}: {state_of(batch)}",
        f"  progress  {bar(batch.progress())}",
        f"  jobs      {batch.total_jobs} total, {batch.pending_jobs} pending,"
        f" {batch.processed_jobs()} settled, {batch.failed_jobs} failed",
        f"  failed    {failed}",
        f"  callbacks {callbacks or '-'} (jobs on queue {batch.options.get('callback_queue')})",
        f"  failures  {'allowed' if batch.options.get('allow_failures') else 'cancel the batch'}",
        f"  created   {batch.created_at.isoformat()}",
        f"  cancelled {'-' if batch.cancelled_at is None else batch.cancelled_at.isoformat()}",
        f"  finished  {'-' if batch.finished_at is None else batch.finished_at.isoformat()}",
    ]


async def list_batches(args: argparse.Namespace) -> list[str]:
    limit = parse_count(args.limit, "--limit")
    if limit < 1:
        raise CommandError(f"--limit {args.limit!r}: expected a positive count")
    async with open_backend(args.dsn, args.schema) as backend:
        batches = await backend.batches.list_batches(limit, args.state)
    if args.json:
        return [json.dumps(document_of(batch)) for batch in batches]
    if not batches:
        return ["lane_pg: no batches" + ("" if args.state is None else f" {args.state}")]
    return [HEADER, *(line_of(batch) for batch in batches)]


async def show_batch(batch_id: str, args: argparse.Namespace) -> list[str]:
    async with open_backend(args.dsn, args.schema) as backend:
        batch = await backend.batches.find_batch(batch_id)
    if batch is None:
        raise CommandError(f"batch {batch_id!r} not found")
    return [json.dumps(document_of(batch))] if args.json else shown(batch)


async def cancel_batch(batch_id: str, args: argparse.Namespace) -> str:
    async with open_backend(args.dsn, args.schema) as backend:
        try:
            cancelled = await backend.batches.cancel_batch(
                batch_id, remove_waiting=args.remove_waiting
            )
        except BatchNotFound:
            raise CommandError(f"batch {batch_id!r} not found") from None
        batch = await backend.batches.find_batch(batch_id)
    what = "cancelled" if cancelled else "was cancelled already"
    left = "" if batch is None else f"; {batch.pending_jobs} of {batch.total_jobs} jobs pending"
    removed = " (its waiting jobs removed)" if args.remove_waiting else ""
    return f"lane_pg: batch {batch_id} {what}{removed}{left}"


async def prune_batches(args: argparse.Namespace) -> str:
    finished = parse_duration(args.older_than, "--older-than")
    unfinished = (
        None
        if args.unfinished_older_than is None
        else parse_duration(args.unfinished_older_than, "--unfinished-older-than")
    )
    async with open_backend(args.dsn, args.schema) as backend:
        count = await backend.batches.prune_batches(finished, unfinished_older_than=unfinished)
    return f"lane_pg: pruned {count} batch{'es' if count != 1 else ''}"


def run(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    action = words[0] if words else "list"
    if action == "list" and len(words) <= 1:
        lines = asyncio.run(list_batches(args))
    elif action == "show" and len(words) == 2:
        lines = asyncio.run(show_batch(words[1], args))
    elif action == "cancel" and len(words) == 2:
        lines = [asyncio.run(cancel_batch(words[1], args))]
    elif action == "prune" and len(words) == 1:
        lines = [asyncio.run(prune_batches(args))]
    else:
        raise CommandError(
            f"unexpected arguments {' '.join(words)!r}: use `batches [list]`, `batches show ID`,"
            " `batches cancel ID` or `batches prune`"
        )
    for line in lines:
        print(line)
    return 0
