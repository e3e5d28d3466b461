"""``python -m lane_pg jobs QUEUE [--state STATE ...] [--name NAME] [--data PATH=VALUE]
[--limit N] [--offset N] [--json]``: a queue's jobs, newest first.

One tab-separated line per job under a header: id, name, state, attempts (started/max),
created_at, available_or_finished_at (when a finished job finished, else when the job is or
was due) and the failure reason, cut to ``REASON_WIDTH`` characters. ``--json`` prints one
JSON object per job and line instead, the reason whole.

The backend's ``list_jobs`` orders by state before age, so the newest ``offset + limit`` of
each asked state are read (one call per state) and merged by creation time. When more jobs
match than were shown, a note on stderr gives the ``--offset`` of the next page (stdout
stays a table, or JSON lines).

``--name`` and ``--data`` search: ``search_jobs`` finds the matching jobs of one state
at a time, in that state's own order (the order of its index, so a page stops early), and
has no total. So a search lists state by state (the ``ALL_STATES`` order): waiting jobs in
the order they will run, delayed ones by due time, active ones oldest first, the others
newest first (waiting-children by creation, completed and failed by when they finished).
Its page holds ``--limit`` matching jobs: the first ``offset + limit + 1`` matches are read
(the one past the page says whether a next page exists, and the note gives its offset),
so ``--offset`` plus ``--limit`` is at most ``MAX_SEARCH_OFFSET``.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import sys
from collections.abc import Sequence

from lane_pg.backend.failed import MAX_PAGE
from lane_pg.backend.reads import MAX_SEARCH_LIMIT, MAX_SEARCH_OFFSET
from lane_pg.cli.common import MAX_COUNT, CommandError, add_connection_arguments, parse_count
from lane_pg.cli.pause import open_backend
from lane_pg.types import ALL_STATES, JSON, JobRow, JobState, validate_queue_name

HELP = (
    "list a queue's jobs, newest first, or search them by name and data (id, name, state,"
    " attempts, times, failure reason)"
)

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
        help="only jobs of this name; a search (with --name or --data) lists state by state,"
        " each state in its own order: waiting in run order, delayed by due time, active"
        " oldest first, the others newest first",
    )
    parser.add_argument(
        "--data",
        default=None,
        metavar="PATH=VALUE",
        help="only jobs whose data holds VALUE at PATH: dotted keys (an array element by its"
        " index), VALUE read as JSON when it is JSON, else as a string (user.id=42 matches"
        ' the number 42, user.id=\'"42"\' the string, user.name=ann the string "ann")',
    )
    parser.add_argument(
        "--limit", default="50", metavar="N", help=f"jobs per page, 1 to {MAX_PAGE} (default: 50)"
    )
    parser.add_argument(
        "--offset",
        default="0",
        metavar="N",
        help="skip the first N jobs of the listing (the N newest without a search; default: 0)",
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


def _not_json(word: str) -> float:
    raise ValueError(f"{word} is not JSON")


def parse_data(text: str) -> tuple[list[str], JSON]:
    """``--data PATH=VALUE`` as ``search_jobs``' ``data_path`` and ``data_value``."""
    path, equals, value_text = text.partition("=")
    keys = path.split(".")
    if not equals or not all(keys):
        raise CommandError(f"--data {text!r}: expected PATH=VALUE, PATH dotted keys (user.id=42)")
    try:
        # NaN and Infinity are no JSON: read them as the strings they are.
        value: JSON = json.loads(value_text, parse_constant=_not_json)
    except ValueError:
        value = value_text
    return keys, value


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


async def matching_jobs(
    args: argparse.Namespace,
    states: Sequence[JobState],
    data: tuple[list[str], JSON] | None,
    offset: int,
    limit: int,
) -> tuple[list[JobRow], bool]:
    """The page (``offset``, ``limit``) of the jobs in ``states`` that match ``--name``
    and ``--data``, state by state, each in ``search_jobs``' order; and whether more
    match after it."""
    path, value = (None, None) if data is None else data
    wanted = offset + limit + 1  # one more than the page: is there a next one?
    found: list[JobRow] = []
    async with open_backend(args.dsn, args.schema) as backend:
        for state in states:
            at = 0
            while len(found) < wanted:
                page = await backend.reads.search_jobs(
                    args.queue,
                    state,
                    name=args.name,
                    data_path=path,
                    data_value=value,
                    offset=at,
                    limit=min(wanted - len(found), MAX_SEARCH_LIMIT),
                )
                found.extend(page.items)
                at += len(page.items)
                if not page.has_more:
                    break
    return found[offset : offset + limit], len(found) > offset + limit


async def listing(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The lines for stdout and the note for stderr (None when everything was shown)."""
    validate_queue_name(args.queue)
    states = parse_states(args.state)
    data = None if args.data is None else parse_data(args.data)
    searching = args.name is not None or data is not None
    limit = parse_count(args.limit, "--limit", "a page size")
    if not 1 <= limit <= MAX_PAGE:
        raise CommandError(f"--limit {args.limit!r}: expected 1 to {MAX_PAGE}")
    offset = parse_count(args.offset, "--offset")
    deepest = MAX_SEARCH_OFFSET if searching else MAX_COUNT
    if offset + limit > deepest:
        searched = " with --name or --data" if searching else ""
        raise CommandError(
            f"--offset {args.offset!r}: expected at most {deepest - limit}{searched}"
        )
    note = None
    if searching:
        page, more = await matching_jobs(args, states, data, offset, limit)
        if more:
            note = (
                f"lane_pg: matching jobs {offset + 1}-{offset + len(page)}, more match;"
                f" next page: --offset {offset + len(page)}"
            )
    else:
        page, total = await newest_jobs(args, states, offset, limit)
        if offset + len(page) < total:
            note = (
                f"lane_pg: jobs {offset + 1}-{offset + len(page)} of {total};"
                f" next page: --offset {offset + len(page)}"
            )
    if not page and offset == 0:
        which = "" if len(states) == len(ALL_STATES) else f" in state {', '.join(states)}"
        matching = " matching" if searching else ""
        note = f"lane_pg: no{matching} jobs in queue {args.queue}{which}"
    if args.json:
        lines = [json.dumps(document_of(job)) for job in page]
    else:
        lines = [HEADER, *(line_of(job) for job in page)]
    return lines, note


def run(args: argparse.Namespace) -> int:
    lines, note = asyncio.run(listing(args))
    for line in lines:
        print(line)
    if note is not None:
        sys.stdout.flush()
        print(note, file=sys.stderr)
    return 0
