"""``python -m lane_pg job QUEUE ID [--json] [--full] [--logs N] [--events N]
[--children N]``: everything an operator needs about one job.

One labelled line per field, every label always printed (``-`` when the job has no such
thing): what the job is (id, name, queue, state, priority, attempts), its times, its
progress, data, return value and failure reason (JSON, cut past ``DATA_WIDTH`` characters
with a note; ``--full`` prints them whole), its lease while active, its flow links (its
parent; as a parent, its dependency counts and a page of children per bucket with their
states and values), its batch, chain, deduplication id and repeat key, then the stack
traces of its failed attempts (newest last, each cut to its last ``TRACE_LINES`` lines),
its newest log lines and its newest events. ``--json`` prints one JSON object with the
same fields, values whole.

The backend contract has no read of one job's events: they are found by reading the
queue's retained event stream (``read_events``, in pages) and keeping the job's, so the
cost grows with the queue's retention (``lane.queues.max_events``, 10,000 by default); at
most ``EVENT_SCAN`` events are read, and ``--events 0`` skips the read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import deque
from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.cli.common import CommandError, add_connection_arguments, parse_count
from lane_pg.cli.pause import open_backend
from lane_pg.types import JSON, JobRow, LogPage, QueueEvent, validate_queue_name
from lane_pg.types.flows import DEPENDENCY_KINDS

HELP = (
    "show one job: state, attempts, times, data, result, stack traces, logs, lease,"
    " flow, batch and chain links, recent events"
)

DATA_WIDTH = 500
"""Characters of a JSON value (data, progress, return value, ...) printed without --full."""
TRACE_LINES = 20
"""The last lines of a stack trace printed without --full."""
EVENT_SCAN = 100_000
"""The most events of the queue's retained stream read to find the job's."""
EVENT_PAGE = 1000
LABEL_WIDTH = 14


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="the job's queue")
    parser.add_argument("job_id", metavar="ID", help="the job's id")
    parser.add_argument(
        "--json", action="store_true", help="one JSON object with the same fields, values whole"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"print data, values and stack traces whole (default: JSON values cut past"
        f" {DATA_WIDTH} characters, each stack trace to its last {TRACE_LINES} lines)",
    )
    parser.add_argument(
        "--logs", default="20", metavar="N", help="the job's newest N log lines (default: 20)"
    )
    parser.add_argument(
        "--events",
        default="10",
        metavar="N",
        help="the job's newest N events (default: 10), found by reading the queue's retained"
        f" event stream, at most {EVENT_SCAN} events; 0 skips that read",
    )
    parser.add_argument(
        "--children",
        default="20",
        metavar="N",
        help="a flow parent: the first N children of each dependency bucket (default: 20)",
    )
    add_connection_arguments(parser)


# --------------------------------------------------------------------------- reading


async def job_events(
    backend: JobQueueBackend, queue: str, job_id: str, last: int
) -> tuple[list[QueueEvent], int, bool]:
    """The job's newest ``last`` events, how many events of the queue were read, and
    whether the whole retained stream was (False: ``EVENT_SCAN`` stopped the read)."""
    found: deque[QueueEvent] = deque(maxlen=last)
    read, start = 0, 0
    while read < EVENT_SCAN:
        page = await backend.events.read_events(
            queue, start, "+", min(EVENT_PAGE, EVENT_SCAN - read)
        )
        read += len(page)
        found.extend(event for event in page if event.job_id == job_id)
        if len(page) < EVENT_PAGE:
            return list(found), read, True
        start = page[-1].id + 1
    return list(found), read, False


async def flow_children(
    backend: JobQueueBackend, job: JobRow, per_bucket: int
) -> dict[str, Any] | None:
    """A flow parent's dependency counts and the first ``per_bucket`` children of each
    bucket with their current states; None for a job that has no children."""
    counts = await backend.flows.get_flow_dependency_counts(job.queue, job.id)
    if counts is None or not (
        job.child_ids
        or counts.processed
        or counts.unprocessed
        or counts.ignored
        or counts.failed
        or counts.missing
    ):
        return None
    items: list[dict[str, JSON]] = []
    if per_bucket > 0:
        pages = await backend.flows.get_flow_dependency_pages(job.queue, job.id, count=per_bucket)
        for bucket in DEPENDENCY_KINDS:
            for item in pages[bucket].items:
                state = await backend.jobs.get_job_state(item.child.queue, item.child.id)
                items.append(
                    {
                        "queue": item.child.queue,
                        "id": item.child.id,
                        "bucket": bucket,
                        "state": state or "missing",
                        "value": item.value,
                        "reason": item.reason,
                    }
                )
    return {
        "counts": {
            "processed": counts.processed,
            "unprocessed": counts.unprocessed,
            "ignored": counts.ignored,
            "failed": counts.failed,
            "missing": counts.missing,
        },
        "children": items,
    }


def _time(value: Any) -> str | None:
    return None if value is None else str(value.isoformat())


def _chain(job: JobRow) -> dict[str, JSON] | None:
    chain = job.options.get("chain")
    if not isinstance(chain, dict):
        return None
    links = chain.get("links")
    return {
        "id": chain.get("id"),
        "index": chain.get("index"),
        "links_to_come": len(links) if isinstance(links, list) else 0,
    }


def _batch_id(job: JobRow) -> str | None:
    meta = job.options.get("meta")
    batch_id = meta.get("batch_id") if isinstance(meta, dict) else None
    return batch_id if isinstance(batch_id, str) else None


async def inspect(args: argparse.Namespace) -> dict[str, Any]:
    """The job's document: every field ``job`` prints, values whole."""
    validate_queue_name(args.queue)
    log_count = parse_count(args.logs, "--logs")
    event_count = parse_count(args.events, "--events")
    per_bucket = parse_count(args.children, "--children")
    async with open_backend(args.dsn, args.schema) as backend:
        job = await backend.jobs.get_job(args.queue, args.job_id)
        if job is None:
            raise CommandError(f"job {args.job_id} not found in queue {args.queue}")
        # A window of 0..-1 would be the whole log: --logs 0 reads nothing.
        logs = (
            await backend.logs.get_job_logs(job.queue, job.id, 0, log_count - 1, asc=False)
            if log_count > 0
            else LogPage([], job.logs_count or 0)
        )
        children = await flow_children(backend, job, per_bucket)
        events: dict[str, Any] = {"items": [], "read": 0, "whole_stream": True}
        if event_count > 0:
            found, read, whole = await job_events(backend, job.queue, job.id, event_count)
            events = {
                "items": [
                    {
                        "id": event.id,
                        "event": event.event,
                        "data": event.data,
                        "created_at": event.created_at.isoformat(),
                    }
                    for event in found
                ],
                "read": read,
                "whole_stream": whole,
            }
    return {
        "id": job.id,
        "name": job.name,
        "queue": job.queue,
        "state": job.state,
        "priority": job.priority,
        "attempts": {
            "made": job.attempts_made,
            "started": job.attempts_started,
            "max": job.max_attempts,
            "stalled": job.stalled_count,
        },
        "created_at": _time(job.created_at),
        "available_at": _time(job.available_at),
        "processed_at": _time(job.processed_at),
        "finished_at": _time(job.finished_at),
        "progress": job.progress,
        "data": job.data,
        "return_value": job.return_value,
        "failed_reason": job.failed_reason,
        "deferred_failure": job.deferred_failure,
        "lease": (
            {"worker_id": job.worker_id, "expires_at": _time(job.lease_expires_at)}
            if job.state == "active"
            else None
        ),
        "parent": (
            None if job.parent_id is None else {"queue": job.parent_queue, "id": job.parent_id}
        ),
        "flow": children,
        "batch_id": _batch_id(job),
        "chain": _chain(job),
        "deduplication_id": job.deduplication_id,
        "repeat_key": job.repeat_key,
        "stacktraces": list(job.stacktrace),
        "logs": {
            "count": logs.count,
            "lines": [
                {"ts": entry.ts.isoformat(), "message": entry.message}
                for entry in reversed(logs.logs)  # read newest first: printed oldest first
            ],
        },
        "events": events,
    }


# --------------------------------------------------------------------------- printing


def clip(text: str, full: bool, width: int = DATA_WIDTH) -> str:
    """``text`` cut to ``width`` characters with a note of how much was cut."""
    if full or len(text) <= width:
        return text
    return f"{text[:width]} ... ({len(text) - width} more characters; --full prints it whole)"


def shown_json(value: JSON, full: bool) -> str:
    return clip(json.dumps(value, ensure_ascii=False), full)


def trace_lines(trace: str, full: bool) -> list[str]:
    """A stack trace's lines: its last ``TRACE_LINES`` (where the error is), after a note of
    how many were cut."""
    lines = trace.rstrip("\n").splitlines() or [""]
    if full or len(lines) <= TRACE_LINES:
        return lines
    cut = len(lines) - TRACE_LINES
    return [f"... {cut} earlier lines cut (--full prints them)", *lines[cut:]]


def _line(label: str, value: object) -> str:
    return f"{label:<{LABEL_WIDTH}}{'-' if value is None or value == '' else value}"


def shown(doc: dict[str, Any], full: bool) -> list[str]:
    attempts = doc["attempts"]
    stalled = f", stalled {attempts['stalled']} times" if attempts["stalled"] else ""
    lease = doc["lease"]
    parent = doc["parent"]
    chain = doc["chain"]
    lines = [
        _line("id", doc["id"]),
        _line("name", doc["name"]),
        _line("queue", doc["queue"]),
        _line("state", doc["state"]),
        _line("priority", doc["priority"]),
        _line(
            "attempts",
            f"{attempts['made']} made, {attempts['started']} started,"
            f" {attempts['max']} max{stalled}",
        ),
        _line("created", doc["created_at"]),
        _line("available", doc["available_at"]),
        _line("processed", doc["processed_at"]),
        _line("finished", doc["finished_at"]),
        _line("progress", shown_json(doc["progress"], full)),
        _line("data", shown_json(doc["data"], full)),
        _line(
            "return value",
            shown_json(doc["return_value"], full) if doc["state"] == "completed" else None,
        ),
        _line("failed reason", _reason(doc)),
    ]
    lines += [
        _line(
            "lease",
            None
            if lease is None
            else f"worker {lease['worker_id']}, expires {lease['expires_at']}",
        ),
        _line("parent", None if parent is None else f"{parent['queue']} {parent['id']}"),
        *_flow_lines(doc["flow"], full),
        _line("batch", doc["batch_id"]),
        _line(
            "chain",
            None
            if chain is None
            else f"{chain['id']} (link {chain['index']}, {chain['links_to_come']} to come)",
        ),
        _line("deduplication", doc["deduplication_id"]),
        _line("repeat", doc["repeat_key"]),
    ]
    traces = doc["stacktraces"]
    lines.append(_line("stacktraces", f"{len(traces)} (newest last)" if traces else None))
    for number, trace in enumerate(traces, 1):
        lines.append(f"  [{number}]")
        lines += [f"    {text}" for text in trace_lines(trace, full)]
    logs = doc["logs"]
    kept = len(logs["lines"])
    newest = f", the newest {kept} shown (--logs)" if kept < logs["count"] else ""
    plural = "" if logs["count"] == 1 else "s"
    lines.append(_line("logs", f"{logs['count']} line{plural}{newest}" if logs["count"] else None))
    lines += [f"  {entry['ts']}  {clip(entry['message'], full)}" for entry in logs["lines"]]
    lines += _event_lines(doc["events"], full)
    return lines


def _reason(doc: dict[str, Any]) -> str | None:
    """The failure reason, and a flow parent's deferred failure (a child's, applied by the
    worker that claims the parent next)."""
    deferred = doc["deferred_failure"]
    if deferred is None:
        return doc["failed_reason"]  # type: ignore[no-any-return]
    return f"{doc['failed_reason'] or '-'} (deferred, applied when claimed: {deferred})"


def _flow_lines(flow: dict[str, Any] | None, full: bool) -> list[str]:
    if flow is None:
        return [_line("children", None)]
    counts = flow["counts"]
    lines = [_line("children", ", ".join(f"{counts[k]} {k}" for k in counts))]
    for child in flow["children"]:
        if child["bucket"] == "processed":
            outcome = f"returned {shown_json(child['value'], full)}"
        elif child["reason"] is not None:
            outcome = f"reason {clip(child['reason'], full)}"
        else:
            outcome = ""
        lines.append(
            f"  {child['bucket']:<12}{child['queue']} {child['id']}  {child['state']}"
            + (f"  {outcome}" if outcome else "")
        )
    return lines


def _event_lines(events: dict[str, Any], full: bool) -> list[str]:
    items = events["items"]
    scope = (
        f"read the queue's {events['read']} retained events"
        if events["whole_stream"]
        else f"read only the oldest {events['read']} of the queue's retained events"
    )
    if not items and not events["read"]:
        return [_line("events", "- (not read: --events 0, or the queue keeps none)")]
    found = f"the newest {len(items)}" if items else "none found"
    lines = [_line("events", f"{found} ({scope})")]
    for event in items:
        data = shown_json(event["data"], full) if event["data"] else ""
        lines.append(f"  {event['created_at']}  {event['event']}  {data}".rstrip())
    return lines


def run(args: argparse.Namespace) -> int:
    doc = asyncio.run(inspect(args))
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
    else:
        print("\n".join(shown(doc, args.full)))
    return 0
