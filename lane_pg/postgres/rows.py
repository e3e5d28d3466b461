"""Mapping of ``lane.jobs`` rows to ``JobRow`` snapshots, the same for every driver.

The select-list casts jsonb and uuid columns to text so asyncpg, psycopg and SQLAlchemy
all hand back plain strings, decoded here once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar, cast

from lane_pg.types import JSON, Backoff, JobRow, JobState, QueueEvent, job_constructor, new_job

J = TypeVar("J", bound=JobRow)

JOB_COLUMNS = ", ".join(
    [
        "j.queue",
        "j.id",
        "j.name",
        "j.data::text AS data",
        "j.state",
        "j.priority",
        "j.lifo",
        "j.order_key",
        "j.enqueued_seq",
        "j.created_at",
        "j.available_at",
        "j.processed_at",
        "j.finished_at",
        "j.attempts_started",
        "j.attempts_made",
        "j.max_attempts",
        "j.backoff::text AS backoff",
        "j.timeout_ms",
        "j.lock_token::text AS lock_token",
        "j.worker_id",
        "j.lease_expires_at",
        "j.stalled_count",
        "j.progress::text AS progress",
        "j.return_value::text AS return_value",
        "j.failed_reason",
        "j.stacktrace",
        "j.options::text AS options",
        "j.dedup_id",
        "j.repeat_key",
        "j.parent_queue",
        "j.parent_id",
        "j.deferred_failure",
    ]
)
"""Select-list over a ``lane.jobs`` row aliased ``j``."""

EVENT_COLUMNS = "e.id, e.queue, e.event, e.job_id, e.data::text AS data, e.created_at"
"""Select-list over a ``lane.events`` row aliased ``e``."""


_loads = json.loads


def _json(text: str | None) -> JSON:
    return None if text is None else _loads(text)


def job_from_row(row: Mapping[str, Any], cls: type[J] = new_job) -> J:  # type: ignore[assignment]
    """A ``JobRow`` (or ``cls``: ``new_claimed_job`` for a claim's rows) from a row selected with
    ``JOB_COLUMNS``.

    Written for speed (W2 decodes 1,000 of these per bulk add): the common empty and
    NULL documents skip the JSON decoder. A claim builds its ``ClaimedJob`` here directly:
    converting a ``JobRow`` afterwards cost ~3 us per job (W3 claims thousands a second).
    Fields go positionally, in ``JobRow``'s order (the row keys name them): 27 keywords cost
    ~4 us per snapshot through ``type.__call__``'s keyword dict.
    """
    options_text = row["options"]
    options = {} if options_text == "{}" else _json(options_text)
    backoff_text = row["backoff"]
    stacktrace = row["stacktrace"]
    return cls(
        row["queue"],
        row["id"],
        row["name"],
        _json(row["data"]),
        cast(JobState, row["state"]),
        row["priority"],
        row["lifo"],
        row["order_key"],
        row["enqueued_seq"],
        cast(datetime, row["created_at"]),
        cast(datetime, row["available_at"]),
        row["processed_at"],
        row["finished_at"],
        row["attempts_started"],
        row["attempts_made"],
        row["max_attempts"],
        None if backoff_text is None else Backoff.from_json(_loads(backoff_text)),
        row["timeout_ms"],
        row["lock_token"],
        row["worker_id"],
        row["lease_expires_at"],
        row["stalled_count"],
        _json(row["progress"]),
        _json(row["return_value"]),
        row["failed_reason"],
        list(stacktrace) if stacktrace else [],
        options if isinstance(options, dict) else {},
        row["dedup_id"],
        row["repeat_key"],
        row["parent_queue"],
        row["parent_id"],
        row["deferred_failure"],
        None,  # logs_count, deduplication_expires_at, child_ids: get_job's extras
        None,
        None,
    )


def with_extras(job: J, row: Mapping[str, Any]) -> J:
    """``job`` with the MGMT-1 fields of a ``lane.get_job_extras`` row."""
    return replace(
        job,
        logs_count=row["logs_count"],
        deduplication_expires_at=row["dedup_expires_at"],
        child_ids=tuple(zip(row["child_queues"], row["child_ids"], strict=True)),
    )


plain_job: Callable[[str, str, str, JSON, int, int, datetime], JobRow] = job_constructor(
    ("queue", "job_id", "name", "data", "enqueued_seq", "order_key", "created_at"),
    {
        "queue": "queue",
        "id": "job_id",
        "name": "name",
        "data": "data",
        "state": "'waiting'",
        "priority": "0",
        "lifo": "False",
        "order_key": "order_key",
        "enqueued_seq": "enqueued_seq",
        "created_at": "created_at",
        "available_at": "created_at",
        "processed_at": "None",
        "finished_at": "None",
        "attempts_started": "0",
        "attempts_made": "0",
        "max_attempts": "1",
        "backoff": "None",
        "timeout_ms": "None",
        "lock_token": "None",
        "worker_id": "None",
        "lease_expires_at": "None",
        "stalled_count": "0",
        "progress": "None",
        "return_value": "None",
        "failed_reason": "None",
        "stacktrace": "[]",
        "options": "{}",
        "deduplication_id": "None",
        "repeat_key": "None",
        "parent_queue": "None",
        "parent_id": "None",
        "deferred_failure": "None",
        "logs_count": "None",
        "deduplication_expires_at": "None",
        "child_ids": "None",
    },
)
"""``plain_job(queue, job_id, name, data, enqueued_seq, order_key, created_at)``: the
snapshot of a job just added with default options, from what the database chose (id,
enqueue sequence, order key, creation time) and what was sent (``data`` decoded from the
JSON text the database received, as a copy): every other column holds its default.
Skipping the full row saves its transfer and decoding: 17 ms of a 42 ms 1,000-job
add_jobs (W2), ~40 us of an add_job (W1). tests/postgres/test_bulk_add.py compares these
snapshots with get_job's."""


def event_from_row(row: Mapping[str, Any]) -> QueueEvent:
    data = _json(row["data"])
    return QueueEvent(
        id=row["id"],
        queue=row["queue"],
        event=row["event"],
        job_id=row["job_id"],
        data=data if isinstance(data, dict) else {},
        created_at=row["created_at"],
    )
