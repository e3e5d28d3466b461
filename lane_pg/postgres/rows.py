"""Mapping of ``lane.jobs`` rows to ``Job`` snapshots, the same for every driver.

The select-list casts jsonb and uuid columns to text so asyncpg, psycopg and SQLAlchemy
all hand back plain strings, decoded here once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar, cast

from lane_pg.types import JSON, Backoff, Job, JobState, QueueEvent

J = TypeVar("J", bound=Job)

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
    ]
)
"""Select-list over a ``lane.jobs`` row aliased ``j``."""

EVENT_COLUMNS = "e.id, e.queue, e.event, e.job_id, e.data::text AS data, e.created_at"
"""Select-list over a ``lane.events`` row aliased ``e``."""


_loads = json.loads


def _json(text: str | None) -> JSON:
    return None if text is None else _loads(text)


def job_from_row(row: Mapping[str, Any], cls: type[J] = Job) -> J:  # type: ignore[assignment]
    """A ``Job`` (or ``cls``: ``ClaimedJob`` for a claim's rows) from a row selected with
    ``JOB_COLUMNS``.

    Written for speed (W2 decodes 1,000 of these per bulk add): the common empty and
    NULL documents skip the JSON decoder. A claim builds its ``ClaimedJob`` here directly:
    converting a ``Job`` afterwards cost ~3 us per job (W3 claims thousands a second).
    """
    options_text = row["options"]
    options = {} if options_text == "{}" else _json(options_text)
    backoff_text = row["backoff"]
    stacktrace = row["stacktrace"]
    return cls(
        queue=row["queue"],
        id=row["id"],
        name=row["name"],
        data=_json(row["data"]),
        state=cast(JobState, row["state"]),
        priority=row["priority"],
        lifo=row["lifo"],
        order_key=row["order_key"],
        enqueued_seq=row["enqueued_seq"],
        created_at=cast(datetime, row["created_at"]),
        available_at=cast(datetime, row["available_at"]),
        processed_at=row["processed_at"],
        finished_at=row["finished_at"],
        attempts_started=row["attempts_started"],
        attempts_made=row["attempts_made"],
        max_attempts=row["max_attempts"],
        backoff=None if backoff_text is None else Backoff.from_json(_loads(backoff_text)),
        timeout_ms=row["timeout_ms"],
        lock_token=row["lock_token"],
        worker_id=row["worker_id"],
        lease_expires_at=row["lease_expires_at"],
        stalled_count=row["stalled_count"],
        progress=_json(row["progress"]),
        return_value=_json(row["return_value"]),
        failed_reason=row["failed_reason"],
        stacktrace=list(stacktrace) if stacktrace else [],
        options=options if isinstance(options, dict) else {},
    )


def plain_job(
    queue: str,
    job_id: str,
    name: str,
    data_text: str,
    enqueued_seq: int,
    order_key: int,
    created_at: datetime,
) -> Job:
    """The snapshot of a job just added with default options, from what the database chose
    (id, enqueue sequence, order key, creation time) and what was sent: every other column
    holds its default. Skipping the full row saves its transfer and decoding: 17 ms of a
    42 ms 1,000-job add_jobs (W2), ~40 us of an add_job (W1). tests/postgres/
    test_bulk_add.py compares these snapshots with get_job's."""
    return Job(
        queue=queue,
        id=job_id,
        name=name,
        data=None if data_text == "null" else _loads(data_text),
        state="waiting",
        priority=0,
        lifo=False,
        order_key=order_key,
        enqueued_seq=enqueued_seq,
        created_at=created_at,
        available_at=created_at,
        processed_at=None,
        finished_at=None,
        attempts_started=0,
        attempts_made=0,
        max_attempts=1,
        backoff=None,
        timeout_ms=None,
        lock_token=None,
        worker_id=None,
        lease_expires_at=None,
        stalled_count=0,
        progress=None,
        return_value=None,
        failed_reason=None,
        stacktrace=[],
        options={},
    )


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
