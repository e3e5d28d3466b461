"""The worker's per-job log lines, on the ``lane_pg.jobs`` logger (``lane_pg.worker.logs``).

- a failed attempt that will be retried: WARNING, with the attempt, the exception and when
  the job runs next;
- a job that failed for good: ERROR, with the exception's traceback when it has one;
- with INFO enabled (``-v``): a line when a job is claimed and when it completed, with the
  run's duration. Callers check ``jobs_log.isEnabledFor(logging.INFO)`` first, so the plain
  path formats nothing.

Each record carries its fields as attributes (``extra=``) for structured handlers.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from lane_pg.errors import describe_exception
from lane_pg.types import JobRow, JobState

jobs_log = logging.getLogger("lane_pg.jobs")

ExcInfo = tuple[type[BaseException], BaseException, TracebackType]


describe_error = describe_exception
"""``Type: message`` (``lane_pg.errors.describe_exception``)."""


def _fields(job: JobRow, worker: str, **more: Any) -> dict[str, Any]:
    return {
        "queue": job.queue,
        "job_id": job.id,
        "job_name": job.name,
        "attempt": job.attempts_made + 1,
        "max_attempts": job.max_attempts,
        "worker": worker,
        **more,
    }


def _exc_info(error: BaseException | str) -> ExcInfo | None:
    if isinstance(error, BaseException) and error.__traceback__ is not None:
        return (type(error), error, error.__traceback__)
    return None


def claimed(job: JobRow, worker: str) -> None:
    jobs_log.info(
        "job %s/%s (%s) claimed, attempt %d of %d",
        job.queue,
        job.id,
        job.name,
        job.attempts_made + 1,
        job.max_attempts,
        extra=_fields(job, worker),
    )


def completed(job: JobRow, worker: str, seconds: float | None) -> None:
    duration_ms = None if seconds is None else round(seconds * 1000, 1)
    jobs_log.info(
        "job %s/%s (%s) completed%s",
        job.queue,
        job.id,
        job.name,
        "" if duration_ms is None else f" in {duration_ms:g} ms",
        extra=_fields(job, worker, duration_ms=duration_ms),
    )


def next_run_in(job: JobRow, state: JobState | None) -> tuple[float, float] | None:
    """Seconds until the retried job may run again, as the range its backoff allows
    (jitter), the way ``lane._backoff_ms`` computes it: (0, 0) when it went back to
    waiting; None when unknown."""
    if state == "waiting":
        return (0.0, 0.0)
    backoff = job.backoff
    if state != "delayed" or backoff is None:
        return None
    failed = job.attempts_made + 1
    return (backoff.delay_for(failed, 0.0) / 1000, backoff.delay_for(failed, 1.0) / 1000)


def retrying(job: JobRow, error: BaseException | str, state: JobState | None, worker: str) -> None:
    """A failed attempt, written, after which the job runs again."""
    window = next_run_in(job, state)
    if window is None:
        when, next_run_at = "it will be retried", None
    elif window[1] <= 0:
        when, next_run_at = "retrying now", datetime.now(UTC).isoformat(timespec="seconds")
    else:
        low, high = window
        span = f"{low:g}s" if high - low < 0.001 else f"{low:g}s to {high:g}s"
        when = f"next attempt in {span}"
        next_run_at = (datetime.now(UTC) + timedelta(seconds=low)).isoformat(timespec="seconds")
    text = describe_error(error)
    jobs_log.warning(
        "job %s/%s (%s) failed, attempt %d of %d: %s; %s",
        job.queue,
        job.id,
        job.name,
        job.attempts_made + 1,
        job.max_attempts,
        text,
        when,
        extra=_fields(job, worker, error=text, next_run_at=next_run_at),
    )


def failed_for_good(job: JobRow, error: BaseException | str, worker: str) -> None:
    """A job whose failure was written as final (no attempts left, not retryable)."""
    text = describe_error(error)
    attempt = job.attempts_made + 1
    why = "no attempts left" if attempt >= job.max_attempts else "not retried"
    jobs_log.error(
        "job %s/%s (%s) failed for good (%s), attempt %d of %d: %s",
        job.queue,
        job.id,
        job.name,
        why,
        attempt,
        job.max_attempts,
        text,
        exc_info=_exc_info(error),
        extra=_fields(job, worker, error=text),
    )


def not_written(job: JobRow, error: BaseException | str, cause: BaseException, worker: str) -> None:
    """A failed attempt whose write raised: the job stays active under this worker's
    token until its lease lapses, then comes back (at-least-once)."""
    text = describe_error(error)
    jobs_log.error(
        "job %s/%s (%s) failed, attempt %d of %d: %s; writing that failure failed (%s):"
        " the job comes back when its lease expires",
        job.queue,
        job.id,
        job.name,
        job.attempts_made + 1,
        job.max_attempts,
        text,
        describe_error(cause),
        exc_info=_exc_info(error),
        extra=_fields(job, worker, error=text),
    )


def stalled(queue: str, job_id: str, state: JobState, worker: str) -> None:
    """A job whose lease expired (its worker crashed or froze), found by stalled recovery."""
    fields = {"queue": queue, "job_id": job_id, "worker": worker}
    if state == "failed":
        jobs_log.error(
            "job %s/%s failed for good: its lease expired too many times (stalled: its"
            " worker crashed or froze)",
            queue,
            job_id,
            extra={**fields, "error": "stalled"},
        )
    else:
        jobs_log.warning(
            "job %s/%s: its lease expired (its worker crashed or froze); back to %s",
            queue,
            job_id,
            state,
            extra=fields,
        )


def summary(counts: dict[str, int]) -> str:
    """A worker's ``counts`` in words, jobs and attempts apart: each claim is one attempt
    of a job; a job ends here completed, failed for good, given back or lost, or its
    failed attempt is retried later (so a job retried by this worker counts once per
    attempt)."""
    claimed = counts.get("claimed", 0)
    return (
        f"jobs: {counts.get('completed', 0)} completed, {counts.get('failed_for_good', 0)}"
        f" failed for good, {counts.get('released', 0)} given back, {counts.get('lost', 0)}"
        f" lost; attempts: {claimed} claimed, {counts.get('failed', 0)} failed"
        f" ({counts.get('retried', 0)} to be retried)"
    )
