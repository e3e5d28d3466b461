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

The job's events are found by reading the queue's retained event stream
(``lane_pg.inspection``): at most ``EVENT_SCAN`` events are read, and ``--events 0`` skips
the read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from lane_pg.cli.common import CommandError, add_connection_arguments, parse_count
from lane_pg.cli.pause import open_backend
from lane_pg.inspection import EVENT_SCAN, job_document
from lane_pg.types import JSON, validate_queue_name

HELP = (
    "show one job: state, attempts, times, data, result, stack traces, logs, lease,"
    " flow, batch and chain links, recent events"
)

DATA_WIDTH = 500
"""Characters of a JSON value (data, progress, return value, ...) printed without --full."""
TRACE_LINES = 20
"""The last lines of a stack trace printed without --full."""
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


async def inspect(args: argparse.Namespace) -> dict[str, Any]:
    """The job's document: every field ``job`` prints, values whole."""
    validate_queue_name(args.queue)
    log_count = parse_count(args.logs, "--logs")
    event_count = parse_count(args.events, "--events")
    per_bucket = parse_count(args.children, "--children")
    async with open_backend(args.dsn, args.schema) as backend:
        document = await job_document(
            backend,
            args.queue,
            args.job_id,
            log_count=log_count,
            event_count=event_count,
            per_bucket=per_bucket,
        )
    if document is None:
        raise CommandError(f"job {args.job_id} not found in queue {args.queue}")
    return document


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
