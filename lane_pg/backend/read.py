"""Reads: snapshots, states, counts, pages, logs, events and queue settings.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from lane_pg.types import (
    FinishedResult,
    JobPage,
    JobRow,
    JobState,
    LogPage,
    PauseStatus,
    QueueEvent,
    QueueRetention,
    QueueStats,
)


@runtime_checkable
class Reader(Protocol):
    """Reads: snapshots, states, counts, pages, logs, events and queue settings."""

    async def get_job(self, queue: str, job_id: str) -> JobRow | None: ...

    async def get_job_state(self, queue: str, job_id: str) -> JobState | None: ...

    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        """Counts for the given states (all six when None or empty), in first-seen order,
        zero included (MGMT-23)."""
        ...

    async def get_job_count(self, queue: str, states: Sequence[JobState] | None = None) -> int:
        """The sum of ``get_job_counts(queue, states)``: all six states when None or empty,
        a repeated state counted once (MGMT-24)."""
        ...

    async def count_pending_jobs(self, queue: str) -> int:
        """Jobs still to run: waiting + delayed + waiting-children (MGMT-25)."""
        ...

    async def count_ready_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        """Jobs ready to run now: waiting, plus delayed ones whose time has come (A16, the
        facade's ``pending_size``)."""
        ...

    async def count_scheduled_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        """Delayed jobs whose time has not come (the facade's ``delayed_size``). A due one
        is ready (``count_ready_jobs``), so the two never count a job twice (INSP-1,
        INSP-5)."""
        ...

    async def list_ready_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        """A page of the jobs ``count_ready_jobs`` counts: waiting ones, then delayed ones
        whose time has come, each part in insertion order (the facade's ``pending_jobs``);
        ``total`` is their count at the same instant."""
        ...

    async def list_scheduled_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        """A page of the jobs ``count_scheduled_jobs`` counts, in insertion order (the
        facade's ``delayed_jobs``)."""
        ...

    async def get_counts_per_priority(
        self, queue: str, priorities: Sequence[int]
    ) -> dict[int, int]:
        """Waiting jobs per requested priority, zero included, a repeated priority once, in
        first-seen order (MGMT-26, ORD-5); ``InvalidPriority`` outside 0..2097152."""
        ...

    async def get_queue_stats(self, queue: str) -> QueueStats:
        """The pause flag and the six state counts from one snapshot (MGMT-27, PAUSE-13);
        not paused and zeros for a queue that does not exist."""
        ...

    async def get_job_finished_result(self, queue: str, job_id: str) -> FinishedResult | None:
        """``Completed(return_value)``, ``Failed(reason)`` or ``NotFinished(state)`` by the
        job's state, whatever its other fields hold; None for a missing job (STATE-4)."""
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

    async def get_job_logs(
        self, queue: str, job_id: str, start: int = 0, end: int = -1, *, asc: bool = True
    ) -> LogPage:
        """A window of the log with inclusive, possibly negative indices; ``asc=False``
        indexes from the newest (MGMT-14). Missing job: empty page, count 0."""
        ...

    async def read_events(
        self, queue: str, start: str | int = "-", end: str | int = "+", limit: int = 100
    ) -> list[QueueEvent]:
        """Retained events of the queue with ids in ``[start, end]`` in id order; ``"-"``
        is the first and ``"+"`` the last (EVS-2)."""
        ...

    async def is_queue_paused(self, queue: str) -> bool: ...

    async def get_pause_status(self, queues: Sequence[str] | None = ()) -> PauseStatus:
        """In one snapshot: the connection-wide pause, the ones among ``queues`` whose own
        pause flag is set (a queue that does not exist is not paused; ``None``: every
        queue whose flag is set), and the restart signal (PAUSE-5, PAUSE-7, CLI-6)."""
        ...

    async def get_queue_retention(self, queue: str) -> QueueRetention:
        """The queue's bounds; the defaults for a queue that does not exist yet."""
        ...

    async def get_queue_events(self, queue: str) -> bool:
        """Whether the queue records events; ``True`` for a queue that does not exist yet."""
        ...

    async def list_queues(self) -> list[str]:
        """Every queue that exists (created by an add or a pause), by name."""
        ...

    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        """Time until the earliest delayed job of these queues (all when None) is due, on
        the backend's clock: zero when one is due already, None when none is delayed."""
        ...
