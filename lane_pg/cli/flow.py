"""``python -m lane_pg flow PARENT_ID`` shows a flow parent: its state, its dependency
counts and its pending children (FLOW-16, -17, -20); ``flow remove-unprocessed PARENT_ID``
removes the pending children nobody runs, releasing the parent (FLOW-24), and ``flow
detach CHILD_ID`` takes one child out of its parent's flow (FLOW-25): what an
administrator needs to see why a parent waits and to unstick it.

``--queue`` names the job's queue; without it the job is looked for in every queue (an id
found in several is refused: name the queue). Pending children are listed in attach
order, ``--limit`` of them (default 50), read in pages whatever the flow's size.
"""

from __future__ import annotations

import argparse
import asyncio

from lane_pg.backend import JobQueueBackend
from lane_pg.cli.common import CommandError, add_connection_arguments
from lane_pg.cli.pause import open_backend
from lane_pg.types import JobRow, validate_queue_name

HELP = (
    "show a flow parent's dependency counts and pending children"
    " (flow PARENT_ID | flow remove-unprocessed PARENT_ID | flow detach CHILD_ID)"
)
PAGE = 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # argparse writes a "+" argument's metavar twice; one usage line says it once.
    parser.usage = (
        "%(prog)s [-h] [--queue QUEUE] [--limit N] [--dsn DSN] [--schema SCHEMA]\n"
        "       PARENT_ID | remove-unprocessed PARENT_ID | detach CHILD_ID"
    )
    parser.add_argument(
        "words",
        nargs="+",
        metavar="PARENT_ID | remove-unprocessed PARENT_ID | detach CHILD_ID",
        help="the parent to show, or an action and the job it acts on",
    )
    parser.add_argument("--queue", default=None, help="the job's queue (default: search all)")
    parser.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="pending children to list (default: 50)",
    )
    add_connection_arguments(parser)


async def _find(backend: JobQueueBackend, job_id: str, queue: str | None) -> JobRow:
    if queue is not None:
        validate_queue_name(queue)
        job = await backend.jobs.get_job(queue, job_id)
        if job is None:
            raise CommandError(f"no job {job_id!r} in queue {queue!r}")
        return job
    found = [
        job
        for name in await backend.queues.list_queues()
        if (job := await backend.jobs.get_job(name, job_id)) is not None
    ]
    if not found:
        raise CommandError(f"no job {job_id!r} in any queue")
    if len(found) > 1:
        queues = ", ".join(job.queue for job in found)
        raise CommandError(f"job id {job_id!r} is in several queues ({queues}): give --queue")
    return found[0]


async def show(
    job_id: str, queue: str | None, limit: int, dsn: str | None, schema: str
) -> list[str]:
    async with open_backend(dsn, schema) as backend:
        parent = await _find(backend, job_id, queue)
        counts = await backend.flows.get_flow_dependency_counts(parent.queue, parent.id)
        assert counts is not None  # the job exists
        lines = [
            f"{parent.queue}\t{parent.id}\t{parent.name}\t{parent.state}",
            f"processed {counts.processed}\tunprocessed {counts.unprocessed}"
            f"\tignored {counts.ignored}\tfailed {counts.failed}\tmissing {counts.missing}",
        ]
        if parent.deferred_failure is not None:
            lines.append(f"deferred failure: {parent.deferred_failure}")
        if parent.parent_id is not None:
            lines.append(f"child of {parent.parent_queue}\t{parent.parent_id}")
        shown, cursor = 0, 0
        while shown < limit:
            page = await backend.flows.get_flow_dependency_page(
                parent.queue, parent.id, "unprocessed", cursor, min(PAGE, limit - shown)
            )
            for item in page.items:
                child = await backend.jobs.get_job(item.child.queue, item.child.id)
                state = "missing" if child is None else child.state
                lines.append(f"pending\t{item.child.queue}\t{item.child.id}\t{state}")
            shown += len(page.items)
            if page.next_cursor == 0:
                break
            cursor = page.next_cursor
        if counts.unprocessed > shown:
            lines.append(f"... and {counts.unprocessed - shown} more pending (--limit)")
    return lines


async def remove_unprocessed(job_id: str, queue: str | None, dsn: str | None, schema: str) -> str:
    async with open_backend(dsn, schema) as backend:
        parent = await _find(backend, job_id, queue)
        removed = await backend.flows.remove_unprocessed_children(parent.queue, parent.id)
        after = await backend.jobs.get_job_state(parent.queue, parent.id)
    return (
        f"lane_pg: removed {len(removed)} pending children of {parent.queue} {parent.id};"
        f" it is {after}"
    )


async def detach(job_id: str, queue: str | None, dsn: str | None, schema: str) -> str:
    async with open_backend(dsn, schema) as backend:
        child = await _find(backend, job_id, queue)
        if not await backend.flows.remove_child_dependency(child.queue, child.id):
            raise CommandError(f"job {child.id!r} of queue {child.queue!r} has no flow parent")
    return (
        f"lane_pg: detached {child.queue} {child.id} from its parent"
        f" {child.parent_queue} {child.parent_id}"
    )


def run(args: argparse.Namespace) -> int:
    words: list[str] = args.words
    if args.limit < 0:
        raise CommandError(f"--limit must be >= 0, got {args.limit}")
    if len(words) == 1:
        lines = asyncio.run(show(words[0], args.queue, args.limit, args.dsn, args.schema))
        print("\n".join(lines))
        return 0
    if len(words) == 2 and words[0] == "remove-unprocessed":
        print(asyncio.run(remove_unprocessed(words[1], args.queue, args.dsn, args.schema)))
        return 0
    if len(words) == 2 and words[0] == "detach":
        print(asyncio.run(detach(words[1], args.queue, args.dsn, args.schema)))
        return 0
    raise CommandError(
        f"unexpected arguments {' '.join(words)!r}: use `flow PARENT_ID`,"
        " `flow remove-unprocessed PARENT_ID` or `flow detach CHILD_ID`"
    )
