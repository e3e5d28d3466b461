"""The one contract every backend implements: ``JobQueueBackend``.

The PostgreSQL backend is a thin caller of the ``lane.*`` stored functions; the memory
backend re-implements the same rules in Python as the reference model; the Redis backend
(a later issue) will use Lua scripts. ``tests/conformance`` runs one suite against all of
them, so the rules written below are checked, not just described.

Common rules
------------
* Every mutating method takes an optional ``now``. When it is None the backend's clock is
  used (the database clock for PostgreSQL, the injected clock for memory). Durations are
  ``timedelta`` or seconds.
* A method that refuses its input raises a ``ValidationError`` subclass and writes
  nothing. A token-checked method raises ``LockMismatch`` when the job is not ``active``
  under that exact token (the caller lost its lease) and writes nothing.
* Queues are created on first use (add, pause, ...). Queue names follow
  ``types.validate_queue_name``.
* Ordering inside a queue: lower priority first; within a priority, LIFO entries (newest
  first) before FIFO entries (oldest first); a released job goes to the very front of its
  priority (ORD-1..4). Every move into ``waiting`` takes a fresh enqueue sequence number.
* Events (EVS-4 names and fields) are written in the same operation as the change, for
  every queue that records events (the default; ``set_queue_events``):
  ``added {name}``, ``waiting {prev?}``, ``delayed {delay (epoch ms), prev?, failedReason?}``,
  ``active {prev}``, ``completed {prev, returnvalue}``, ``failed {prev, failedReason}``,
  ``retries-exhausted {attemptsMade}``, ``stalled {reason}``, ``drained {}`` (no job id),
  ``removed {prev}``, ``progress {data}``, ``paused {}``, ``resumed {}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from lane_pg.types import (
    DEFAULT_PRUNE_BATCH,
    JSON,
    Completion,
    Duration,
    Failure,
    FinalizeOutcome,
    Job,
    JobOptions,
    JobPage,
    JobSpec,
    JobState,
    LeaseRef,
    LogPage,
    QueueDemand,
    QueueEvent,
    QueueRetention,
    StalledOutcome,
)


@runtime_checkable
class JobQueueBackend(Protocol):
    """Connection-level job queue: every method names the queue(s) it acts on."""

    # ----------------------------------------------------------------- adding
    async def add(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> Job:
        """Add one job and return its snapshot (ADD-1..10).

        Without a custom ``job_id`` the id is the next value of one global sequence as a
        decimal string. With a custom id that already exists in the queue, the existing job
        is returned unchanged: no write, no event, no sequence advance (ADD-3). A delay > 0
        stores the job ``delayed`` with ``available_at = now + delay`` and writes
        ``added`` + ``delayed``; otherwise ``waiting`` with ``added`` + ``waiting`` and a
        wake-up for idle claimers (delivered at commit).
        """
        ...

    async def add_bulk(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[Job]:
        """Add many jobs in one operation, results in input order (ADD-11).

        Same rules as ``add`` per spec; a repeated custom id inside the same call returns
        the job the earlier spec created. Any invalid spec rejects the whole call.
        """
        ...

    # ----------------------------------------------------------------- claiming
    async def claim(
        self,
        worker_id: str,
        demands: Sequence[QueueDemand],
        lease: Duration,
        *,
        total: int | None = None,
        now: datetime | None = None,
    ) -> list[Job]:
        """Claim up to ``demand.limit`` jobs from each queue, queues in the given order.

        For each queue in turn: promote every due delayed job (``available_at <= now``) to
        waiting (``waiting prev=delayed``, promoted in ``available_at`` order); skip the
        queue if paused; move the next waiting jobs to ``active`` with a fresh
        ``lock_token``, ``worker_id``, ``processed_at = now``, ``lease_expires_at = now +
        lease`` and ``attempts_started + 1``, writing ``active prev=waiting``. ``total``
        caps the number claimed over all queues, so a queue earlier in the list is always
        served first. Returns the claimed jobs in claim order.
        """
        ...

    async def renew_leases(
        self, leases: Sequence[LeaseRef], lease: Duration, *, now: datetime | None = None
    ) -> list[LeaseRef]:
        """Extend each lease to ``now + lease``; return the refs that could not be renewed
        (job gone, not active, or token no longer current) (CLAIM-5, CLAIM-6)."""
        ...

    # ----------------------------------------------------------------- finishing
    async def complete(
        self,
        queue: str,
        job_id: str,
        token: str,
        result: JSON = None,
        *,
        now: datetime | None = None,
    ) -> Job:
        """Token-checked ``active -> completed`` (FIN-1): ``finished_at = now``, the
        result stored, the lock cleared; event ``completed``; then retention
        (``remove_on_complete``) and ``drained`` when no waiting or active job remains.
        Completing after the lease expired is allowed while the token is current (FIN-9).
        Raises ``JobNotFound`` or ``LockMismatch``."""
        ...

    async def complete_many(
        self, items: Sequence[Completion], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        """``complete`` for many jobs in one operation; a stale token or a missing job
        marks that item (``lock_mismatch`` / ``not_found``) and leaves it unchanged
        without stopping the others. Outcomes are in input order."""
        ...

    async def fail(
        self,
        queue: str,
        job_id: str,
        token: str,
        reason: str,
        *,
        stacktrace: str | None = None,
        discard_retry: bool = False,
        now: datetime | None = None,
    ) -> Job:
        """Token-checked failure (FIN-3..6, RETRY-7).

        ``attempts_made + 1``; ``failed_reason`` set; ``stacktrace`` (this attempt's
        formatted traceback) appended as one entry of the job's list. If attempts
        remain and ``discard_retry`` is false: the backoff for that attempt number decides
        ``delayed`` (``available_at = now + backoff``, event ``delayed`` with the delay,
        ``prev=active`` and ``failedReason``) or ``waiting`` (zero backoff, normal FIFO/LIFO
        position, event ``waiting prev=active``). Otherwise ``failed`` with
        ``finished_at``; events ``failed`` then, when ``attempts_made >= max_attempts``,
        ``retries-exhausted``; then retention (``remove_on_fail``) and ``drained``.
        """
        ...

    async def fail_many(
        self, items: Sequence[Failure], *, now: datetime | None = None
    ) -> list[FinalizeOutcome]:
        """``fail`` for many jobs in one operation, outcomes in input order."""
        ...

    async def release_active(
        self, queue: str, job_id: str, token: str, *, now: datetime | None = None
    ) -> Job:
        """Token-checked ``active -> waiting`` at the front of its priority (ORD-3,
        MGMT-7): lock and ``processed_at`` cleared, attempts unchanged,
        event ``waiting prev=active``."""
        ...

    async def delay_active(
        self,
        queue: str,
        job_id: str,
        token: str,
        delay: Duration,
        *,
        now: datetime | None = None,
    ) -> Job:
        """Token-checked ``active -> delayed`` at ``now + delay`` (MGMT-6); lock cleared;
        event ``delayed prev=active``."""
        ...

    # ----------------------------------------------------------------- maintenance
    async def recover_stalled(
        self,
        queues: Sequence[str] | None = None,
        *,
        max_stalled_count: int = 1,
        now: datetime | None = None,
    ) -> list[StalledOutcome]:
        """Recover every active job whose lease expired before ``now`` (STALL-1..3).

        Each gets ``stalled_count + 1`` and the event ``stalled``. While ``stalled_count <=
        max_stalled_count`` it returns to ``waiting`` (normal position, ``waiting
        prev=active``); otherwise it fails terminally with reason ``job stalled more than
        allowable limit`` (``failed prev=active``, retention, ``drained``). The lost run
        stays counted in ``attempts_started`` (STALL-6). ``queues=None`` means all queues.
        """
        ...

    async def promote_due(
        self, queues: Sequence[str] | None = None, *, now: datetime | None = None
    ) -> int:
        """Promote every delayed job with ``available_at <= now``; return how many."""
        ...

    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        """Time until the earliest delayed job of these queues (all when None) is due, on
        the backend's clock: zero when one is due already, None when none is delayed."""
        ...

    async def trim_events(self, queues: Sequence[str] | None = None) -> int:
        """Trim each queue's retained events to its ``max_events`` (default 10,000),
        keeping the newest (EVS-3); returns how many were deleted."""
        ...

    async def list_queues(self) -> list[str]:
        """Every queue that exists (created by an add or a pause), by name."""
        ...

    # ----------------------------------------------------------------- queue retention
    async def set_queue_retention(
        self, queue: str, *, keep_completed: int | None, keep_failed: int | None
    ) -> None:
        """Bound the queue's finished jobs: keep the newest ``keep_completed`` completed
        and ``keep_failed`` failed jobs (``None`` keeps all of that state, RET-1). A new
        queue starts at ``DEFAULT_KEEP_COMPLETED`` / ``DEFAULT_KEEP_FAILED``. The queue is
        created when missing; a negative count raises ``InvalidOptions`` and changes
        nothing. Jobs are deleted later, by ``prune_finished``; no event is written."""
        ...

    async def get_queue_retention(self, queue: str) -> QueueRetention:
        """The queue's bounds; the defaults for a queue that does not exist yet."""
        ...

    async def prune_finished(
        self, queues: Sequence[str] | None = None, *, batch: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        """Enforce each queue's bound (all queues when None); return how many jobs were
        deleted.

        Per queue and state with a bound ``keep``: finished jobs in newest-first order
        ``(finished_at, key)`` (key = creation order, so the jobs of one completion batch
        that share ``finished_at`` go oldest-created first) beyond the first ``keep`` are
        deleted with their logs, oldest first, at most ``batch`` per queue and state, so
        a caller repeats while a call deleted full batches. Only ``completed`` and
        ``failed`` jobs are touched; no events are written (as BullMQ's retention). The
        worker's maintenance leader calls it every ``WorkerConfig.prune_interval``.
        """
        ...

    # ----------------------------------------------------------------- queue events
    async def set_queue_events(self, queue: str, *, record: bool) -> None:
        """Turn the queue's event recording on or off (on for every new queue). While
        off, no transition of the queue writes an event (the ``added``, ``active``,
        ``completed`` ... rows of EVS-4 are skipped; the jobs change as usual); events
        written before stay readable and are trimmed as before. The queue is created when
        missing; ``record`` must be ``True`` or ``False`` (else ``InvalidOptions``, and
        nothing changes). Writes no event itself."""
        ...

    async def get_queue_events(self, queue: str) -> bool:
        """Whether the queue records events; ``True`` for a queue that does not exist yet."""
        ...

    # ----------------------------------------------------------------- management
    async def promote(self, queue: str, job_id: str, *, now: datetime | None = None) -> Job:
        """``delayed -> waiting`` now (MGMT-3); ``JobStateConflict`` when not delayed."""
        ...

    async def reschedule(
        self, queue: str, job_id: str, delay: Duration, *, now: datetime | None = None
    ) -> Job:
        """Move a delayed job's due time to ``now + delay`` (MGMT-5), event ``delayed``."""
        ...

    async def retry(self, queue: str, job_id: str, *, now: datetime | None = None) -> Job:
        """``completed|failed -> waiting`` (MGMT-8): result/reason, timestamps, stack trace,
        attempts and stalled count reset; event ``waiting prev=<old state>``."""
        ...

    async def remove(self, queue: str, job_id: str, *, now: datetime | None = None) -> bool:
        """Delete a job and its logs (MGMT-16); event ``removed prev=<state>``. An active
        job whose lease has not expired raises ``JobLocked``. False when missing."""
        ...

    async def update_data(self, queue: str, job_id: str, data: JSON) -> Job:
        """Replace the payload of any retained job (MGMT-10)."""
        ...

    async def update_progress(
        self, queue: str, job_id: str, progress: JSON, *, now: datetime | None = None
    ) -> Job:
        """Store progress on any retained job and write ``progress {data}`` (MGMT-11)."""
        ...

    async def update_priority(
        self,
        queue: str,
        job_id: str,
        priority: int,
        *,
        lifo: bool | None = None,
        now: datetime | None = None,
    ) -> Job:
        """Change the priority (and LIFO flag when given) (MGMT-9). A waiting job is
        requeued with a fresh sequence in its new position; other states only store it."""
        ...

    async def add_log(
        self,
        queue: str,
        job_id: str,
        message: str,
        *,
        keep: int | None = None,
        now: datetime | None = None,
    ) -> int:
        """Append ``{ts, message}`` to the job's log, keep only the newest ``keep`` when
        given, and return the number of entries kept (MGMT-13). No event."""
        ...

    async def get_logs(
        self, queue: str, job_id: str, start: int = 0, end: int = -1, *, asc: bool = True
    ) -> LogPage:
        """A window of the log with inclusive, possibly negative indices; ``asc=False``
        indexes from the newest (MGMT-14). Missing job: empty page, count 0."""
        ...

    async def clear_logs(self, queue: str, job_id: str, keep: int = 0) -> None:
        """Delete the log, or all but the newest ``keep`` entries (MGMT-15)."""
        ...

    async def pause(self, queue: str) -> None:
        """Stop claims from the queue (adds and promotion go on); event ``paused``."""
        ...

    async def resume(self, queue: str) -> None:
        """Allow claims again, event ``resumed``, and wake idle claimers."""
        ...

    async def is_paused(self, queue: str) -> bool: ...

    # ----------------------------------------------------------------- reading
    async def get_job(self, queue: str, job_id: str) -> Job | None: ...

    async def get_state(self, queue: str, job_id: str) -> JobState | None: ...

    async def get_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        """Counts for the given states (all six when None or empty), in first-seen order,
        zero included (MGMT-23)."""
        ...

    async def list_jobs(
        self,
        queue: str,
        states: Sequence[JobState],
        *,
        descending: bool = False,
        offset: int = 0,
        limit: int = 20,
    ) -> JobPage:
        """A page of jobs in the given states (MGMT-2), ordered by state (in the order of
        ``ALL_STATES``) then by insertion order; ``descending`` reverses the whole order;
        ``total`` counts every match."""
        ...

    async def read_events(
        self, queue: str, start: str | int = "-", end: str | int = "+", limit: int = 100
    ) -> list[QueueEvent]:
        """Retained events of the queue with ids in ``[start, end]`` in id order; ``"-"``
        is the first and ``"+"`` the last (EVS-2)."""
        ...

    async def close(self) -> None: ...
