"""``python -m lane_pg jobs QUEUE [--state STATE ...] [--name NAME] [--limit N]
[--offset N] [--json]``: a queue's jobs, newest first.

One tab-separated line per job under a header: id, name, state, attempts (started/max),
created_at, available_or_finished_at (when a finished job finished, else when the job is or
was due) and the failure reason, cut to ``REASON_WIDTH`` characters. ``--json`` prints one
JSON object per job and line instead, the reason whole.

The backend's ``list_jobs`` orders by state before age, so the newest ``offset + limit`` of
each asked state are read (one call per state) and merged by creation time. ``--name`` is
not a filter of the contract: it keeps the matching jobs of the page read, so a page may
show fewer than ``--limit`` lines. When more jobs match than were shown, a note on stderr
gives the ``--offset`` of the next page (stdout stays a table, or JSON lines).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import sys
from collections.abc import Sequence

from lane_pg.backend.failed import MAX_PAGE
from lane_pg.cli.common import MAX_COUNT, CommandError, add_connection_arguments, parse_count
from lane_pg.cli.pause import open_backend
from lane_pg.types import ALL_STATES, JSON, JobRow, JobState, validate_queue_name

HELP = "list a queue's jobs, newest first (id, name, state, attempts, times, failure reason)"

HEADER = "id\tname\tstate\tattempts\tcreated_at\tavailable_or_finished_at\tfailed_reason"
REASON_WIDTH = 80
FINISHED_STATES = ("completed", "failed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="queue name")
    parser.add_argument(
        "--state",
        action="append",
        default=None,
        metavar="STATE",
        help=f"only jobs in STATE (repeat, or separate by commas, for several): one of"
        f" {', '.join(ALL_STATES)}; default: every state",
    )
    parser.add_argument(
        "--name",
        default=None,
        metavar="NAME",
        help="only jobs of this name; the filter applies to the page read (--limit jobs),"
        " so a page may show fewer lines",
    )
    parser.add_argument(
        "--limit", default="50", metavar="N", help=f"jobs per page, 1 to {MAX_PAGE} (default: 50)"
    )
    parser.add_argument(
        "--offset", default="0", metavar="N", help="skip the N newest jobs (default: 0)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per job and line")
    add_connection_arguments(parser)


def parse_states(given: Sequence[str] | None) -> list[JobState]:
    """The ``--state`` values (repeated or comma-separated), each once, in
    ``ALL_STATES`` order; every state when none is given."""
    if not given:
        return list(ALL_STATES)
    wanted = {word.strip() for text in given for word in text.split(",")}
    unknown = sorted(wanted.difference(ALL_STATES))
    if unknown:
        raise CommandError(
            f"--state {', '.join(map(repr, unknown))}: unknown state; use one of"
            f" {', '.join(ALL_STATES)}"
        )
    return [state for state in ALL_STATES if state in wanted]


def _when(job: JobRow) -> str:
    if job.state in FINISHED_STATES and job.finished_at is not None:
        return job.finished_at.isoformat()
    return job.available_at.isoformat()


def cell(text: str, width: int | None = None) -> str:
    """``text`` on one line (no tab or newline), cut to ``width`` with ``...``."""
    flat = " ".join(text.split())
    if width is not None and len(flat) > width:
        return flat[: width - 3] + "..."
    return flat


def line_of(job: JobRow) -> str:
    cells = (
        job.id,
        cell(job.name),
        job.state,
        f"{job.attempts_started}/{job.max_attempts}",
        job.created_at.isoformat(),
        _when(job),
        cell(job.failed_reason or "-", REASON_WIDTH),
    )
    return "\t".join(cells)


def document_of(job: JobRow) -> dict[str, JSON]:
    return {
        "id": job.id,
        "queue": job.queue,
        "name": job.name,
        "state": job.state,
        "priority": job.priority,
        "attempts_made": job.attempts_made,
        "attempts_started": job.attempts_started,
        "max_attempts": job.max_attempts,
        "created_at": job.created_at.isoformat(),
        "available_at": job.available_at.isoformat(),
        "processed_at": None if job.processed_at is None else job.processed_at.isoformat(),
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
        "failed_reason": job.failed_reason,
    }


async def newest_jobs(
    args: argparse.Namespace, states: Sequence[JobState], offset: int, limit: int
) -> tuple[list[JobRow], int]:
    """The page (``offset``, ``limit``) of the queue's jobs in ``states``, newest first,
    and how many jobs are in those states."""
    async with open_backend(args.dsn, args.schema) as backend:
        per_state = [
            await backend.reads.list_jobs(
                args.queue, [state], descending=True, offset=0, limit=offset + limit
            )
            for state in states
        ]
    # Each list is newest first already: merging keeps that order across the states.
    merged = heapq.merge(
        *(page.items for page in per_state), key=lambda job: job.created_at, reverse=True
    )
    jobs = list(merged)[offset : offset + limit]
    return jobs, sum(page.total for page in per_state)


async def listing(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The lines for stdout and the note for stderr (None when everything was shown)."""
    validate_queue_name(args.queue)
    states = parse_states(args.state)
    limit = parse_count(args.limit, "--limit", "a page size")
    if not 1 <= limit <= MAX_PAGE:
        raise CommandError(f"--limit {args.limit!r}: expected 1 to {MAX_PAGE}")
    offset = parse_count(args.offset, "--offset")
    if offset + limit > MAX_COUNT:
        raise CommandError(f"--offset {args.offset!r}: expected at most {MAX_COUNT - limit}")
    page, total = await newest_jobs(args, states, offset, limit)
    shown = [job for job in page if args.name is None or job.name == args.name]
    if args.json:
        lines = [json.dumps(document_of(job)) for job in shown]
    else:
        lines = [HEADER, *(line_of(job) for job in shown)]
    note = None
    if offset + len(page) < total:
        named = f" (--name kept {len(shown)} of them)" if args.name is not None else ""
        note = (
            f"lane_pg: jobs {offset + 1}-{offset + len(page)} of {total}{named};"
            f" next page: --offset {offset + len(page)}"
        )
    elif not page and offset == 0:
        which = "" if len(states) == len(ALL_STATES) else f" in state {', '.join(states)}"
        note = f"lane_pg: no jobs in queue {args.queue}{which}"
    return lines, note


def run(args: argparse.Namespace) -> int:
    lines, note = asyncio.run(listing(args))
    for line in lines:
        print(line)
    if note is not None:
        sys.stdout.flush()
        print(note, file=sys.stderr)
    return 0
