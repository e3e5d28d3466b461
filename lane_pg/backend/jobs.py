"""Adding, reading and changing single jobs (ADD, MGMT).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import (
    JSON,
    Duration,
    FinishedResult,
    JobOptions,
    JobRow,
    JobSpec,
    JobState,
)


class Jobs(Handle, name="jobs"):
    """Adding, reading and changing single jobs (ADD, MGMT)."""

    __slots__ = ()

    @operation
    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        """Add one job and return its snapshot (ADD-1..10).

        Without a custom ``job_id`` the id is the next value of one global sequence as a
        decimal string. With a custom id that already exists in the queue, the existing job
        is returned unchanged: no write, no event, no sequence advance (ADD-3). A delay > 0
        stores the job ``delayed`` with ``available_at = now + delay`` and writes
        ``added`` + ``delayed``; otherwise ``waiting`` with ``added`` + ``waiting`` and a
        wake-up for idle claimers (delivered at commit).
        """

    @operation
    async def add_jobs(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[JobRow]:
        """Add many jobs in one operation, results in input order (ADD-11).

        Same rules as ``add`` per spec; a repeated custom id inside the same call returns
        the job the earlier spec created. Any invalid spec rejects the whole call.
        """

    @operation
    async def get_job(self, queue: str, job_id: str) -> JobRow | None: ...

    @operation
    async def get_job_state(self, queue: str, job_id: str) -> JobState | None: ...

    @operation
    async def get_job_finished_result(self, queue: str, job_id: str) -> FinishedResult | None:
        """``Completed(return_value)``, ``Failed(reason)`` or ``NotFinished(state)`` by the
        job's state, whatever its other fields hold; None for a missing job (STATE-4)."""

    @operation
    async def promote_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        """``delayed -> waiting`` now (MGMT-3); ``JobStateConflict`` when not delayed."""

    @operation
    async def reschedule_job(
        self, queue: str, job_id: str, delay: Duration, *, now: datetime | None = None
    ) -> JobRow:
        """Move a delayed job's due time to ``now + delay`` (MGMT-5), event ``delayed``."""

    @operation
    async def retry_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> JobRow:
        """``completed|failed -> waiting`` (MGMT-8): result/reason, timestamps, stack trace,
        attempts and stalled count reset; event ``waiting prev=<old state>``. A
        deduplicated job takes its id back (``DeduplicationConflict`` when another holds
        it, DEDUP-13); a unique one (``deduplication.kind`` unique) neither takes back nor
        checks its lock and loses its owner token (A9)."""

    @operation
    async def remove_job(self, queue: str, job_id: str, *, now: datetime | None = None) -> bool:
        """Delete a job and its logs (MGMT-16); event ``removed prev=<state>``. An active
        job whose lease has not expired raises ``JobLocked``. False when missing."""

    @operation
    async def update_job_data(
        self, queue: str, job_id: str, data: JSON, *, token: str | None = None
    ) -> JobRow:
        """Replace the payload of any retained job (MGMT-10).

        ``token`` fences a write from a run (the job context passes its claim's token): the
        job must then be ``active`` under exactly that token, else ``LockMismatch`` (or
        ``JobNotFound``) and nothing changes, so a run whose lease was taken over cannot
        overwrite the new owner's job. ``None`` is an administrator's write, unchecked."""

    @operation
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

    @operation
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

    @operation
    async def save_job_stacktrace(
        self, queue: str, job_id: str, stacktrace: Sequence[str], failed_reason: str | None
    ) -> JobRow:
        """Replace the job's stack trace list and failure reason together, in any state
        (MGMT-12); no event. ``JobNotFound`` when missing; a ``stacktrace`` that is not a
        sequence of strings (a plain string included) raises ``InvalidOptions``."""
