"""Changing jobs and queues from outside a run (MGMT, PAUSE, retention and event settings).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from lane_pg.types import (
    JSON,
    Duration,
    JobRow,
)


@runtime_checkable
class Administrator(Protocol):
    """Changing jobs and queues from outside a run (MGMT, PAUSE, retention and event settings)."""

    async def promote_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        """``delayed -> waiting`` now (MGMT-3); ``JobStateConflict`` when not delayed."""
        ...

    async def reschedule_job(
        self, queue: str, job_id: str, delay: Duration, *, now: datetime | None = None
    ) -> JobRow:
        """Move a delayed job's due time to ``now + delay`` (MGMT-5), event ``delayed``."""
        ...

    async def retry_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        """``completed|failed -> waiting`` (MGMT-8): result/reason, timestamps, stack trace,
        attempts and stalled count reset; event ``waiting prev=<old state>``. A
        deduplicated job takes its id back (``DeduplicationConflict`` when another holds
        it, DEDUP-13); a unique one (``deduplication.kind`` unique) neither takes back nor
        checks its lock and loses its owner token (A9)."""
        ...

    async def remove_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> bool:
        """Delete a job and its logs (MGMT-16); event ``removed prev=<state>``. An active
        job whose lease has not expired raises ``JobLocked``. False when missing."""
        ...

    async def update_job_data(
        self, queue: str, job_id: str, data: JSON, *, token: str | None = None
    ) -> JobRow:
        """Replace the payload of any retained job (MGMT-10).

        ``token`` fences a write from a run (the job context passes its claim's token): the
        job must then be ``active`` under exactly that token, else ``LockMismatch`` (or
        ``JobNotFound``) and nothing changes, so a run whose lease was taken over cannot
        overwrite the new owner's job. ``None`` is an administrator's write, unchecked."""
        ...

    async def update_job_progress(
        self,
        queue: str,
        job_id: str,
        progress: JSON,
        *,
        now: datetime | None = None,
        token: str | None = None,
    ) -> JobRow:
        """Store progress on any retained job and write ``progress {data}`` (MGMT-11).
        ``token`` fences it as in ``update_job_data``."""
        ...

    async def save_job_stacktrace(
        self, queue: str, job_id: str, stacktrace: Sequence[str], failed_reason: str | None
    ) -> JobRow:
        """Replace the job's stack trace list and failure reason together, in any state
        (MGMT-12); no event. ``JobNotFound`` when missing; a ``stacktrace`` that is not a
        sequence of strings (a plain string included) raises ``InvalidOptions``."""
        ...

    async def update_job_priority(
        self,
        queue: str,
        job_id: str,
        priority: int,
        *,
        lifo: bool | None = None,
        now: datetime | None = None,
    ) -> JobRow:
        """Change the priority (and LIFO flag when given) (MGMT-9). A waiting job is
        requeued with a fresh sequence in its new position; other states only store it."""
        ...

    async def add_job_log(
        self,
        queue: str,
        job_id: str,
        message: str,
        *,
        keep: int | None = None,
        now: datetime | None = None,
        token: str | None = None,
    ) -> int:
        """Append ``{ts, message}`` to the job's log, keep only the newest ``keep`` when
        given, and return the number of entries kept (MGMT-13). No event. ``token`` fences
        it as in ``update_job_data``."""
        ...

    async def clear_job_logs(self, queue: str, job_id: str, keep: int = 0) -> None:
        """Delete the log, or all but the newest ``keep`` entries (MGMT-15)."""
        ...

    async def pause_queue(self, queue: str) -> None:
        """Stop claims from the queue (adds and promotion go on); event ``paused``."""
        ...

    async def resume_queue(self, queue: str) -> None:
        """Allow claims again, event ``resumed``, and wake idle claimers."""
        ...

    async def pause_all(self) -> None:
        """The connection-wide pause (PAUSE-4): no queue of this backend, existing or
        created later, yields a claim (adds and promotion go on) until ``resume_all``.
        Queue pauses are separate: ``pause_queue``'s flag is not touched. No event."""
        ...

    async def resume_all(self) -> None:
        """Lift the connection-wide pause and wake idle claimers; queues paused with
        ``pause_queue`` stay paused (PAUSE-4)."""
        ...

    async def signal_restart(self) -> int:
        """Store the restart signal, now in milliseconds since the epoch (CLI-6), wake idle
        claimers, and return it; workers started before it exit at their next check."""
        ...

    async def set_queue_retention(
        self, queue: str, *, keep_completed: int | None, keep_failed: int | None
    ) -> None:
        """Bound the queue's finished jobs: keep the newest ``keep_completed`` completed
        and ``keep_failed`` failed jobs (``None`` keeps all of that state, RET-1). A new
        queue starts at ``DEFAULT_KEEP_COMPLETED`` / ``DEFAULT_KEEP_FAILED``. The queue is
        created when missing; a negative count raises ``InvalidOptions`` and changes
        nothing. Jobs are deleted later, by ``prune_finished``; no event is written."""
        ...

    async def set_queue_events(self, queue: str, *, record: bool) -> None:
        """Turn the queue's event recording on or off (on for every new queue). While
        off, no transition of the queue writes an event (the ``added``, ``active``,
        ``completed`` ... rows of EVS-4 are skipped; the jobs change as usual); events
        written before stay readable and are trimmed as before. The queue is created when
        missing; ``record`` must be ``True`` or ``False`` (else ``InvalidOptions``, and
        nothing changes). Writes no event itself."""
        ...
