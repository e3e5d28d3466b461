"""One job as a document: its row, logs, events, lease and flow, batch and chain links.

What ``python -m lane_pg job`` prints and the dashboard's job page shows, read only
through the backend contract (every backend serves it).

The contract has no read of one job's events: they are found by reading the queue's
retained event stream (``read_events``, in pages) and keeping the job's, so the cost
grows with the queue's retention (``lane.queues.max_events``, 10,000 by default); at most
``EVENT_SCAN`` events are read, and an event count of 0 skips the read.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from lane_pg.backend import JobQueueBackend
from lane_pg.types import JSON, JobRow, LogPage, QueueEvent
from lane_pg.types.flows import DEPENDENCY_KINDS

EVENT_SCAN = 100_000
"""The most events of the queue's retained stream read to find the job's."""
EVENT_PAGE = 1000


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


async def job_document(
    backend: JobQueueBackend,
    queue: str,
    job_id: str,
    *,
    log_count: int = 20,
    event_count: int = 10,
    per_bucket: int = 20,
) -> dict[str, Any] | None:
    """Everything about one job as one JSON-ready document (None when the job is not
    found): its row, its newest ``log_count`` log lines, its newest ``event_count``
    events and, as a flow parent, ``per_bucket`` children of each dependency bucket."""
    job = await backend.jobs.get_job(queue, job_id)
    if job is None:
        return None
    # A window of 0..-1 would be the whole log: a count of 0 reads nothing.
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
