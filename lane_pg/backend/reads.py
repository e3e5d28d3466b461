"""Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from lane_pg.backend.operation import Handle, operation
from lane_pg.types import (
    JobPage,
    JobState,
    QueueStats,
)


class Reads(Handle, name="reads"):
    """Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

    __slots__ = ()

    @operation
    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        """Counts for the given states (all six when None or empty), in first-seen order,
        zero included (MGMT-23)."""

    @operation
    async def get_job_count(self, queue: str, states: Sequence[JobState] | None = None) -> int:
        """The sum of ``get_job_counts(queue, states)``: all six states when None or empty,
        a repeated state counted once (MGMT-24)."""

    @operation
    async def count_pending_jobs(self, queue: str) -> int:
        """Jobs still to run: waiting + delayed + waiting-children (MGMT-25)."""

    @operation
    async def count_ready_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        """Jobs ready to run now: waiting, plus delayed ones whose time has come (A16, the
        facade's ``pending_size``)."""

    @operation
    async def count_scheduled_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        """Delayed jobs whose time has not come (the facade's ``delayed_size``). A due one
        is ready (``count_ready_jobs``), so the two never count a job twice (INSP-1,
        INSP-5)."""

    @operation
    async def list_ready_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        """A page of the jobs ``count_ready_jobs`` counts: waiting ones, then delayed ones
        whose time has come, each part in insertion order (the facade's ``pending_jobs``);
        ``total`` is their count at the same instant."""

    @operation
    async def list_scheduled_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        """A page of the jobs ``count_scheduled_jobs`` counts, in insertion order (the
        facade's ``delayed_jobs``)."""

    @operation
    async def get_counts_per_priority(
        self, queue: str, priorities: Sequence[int]
    ) -> dict[int, int]:
        """Waiting jobs per requested priority, zero included, a repeated priority once, in
        first-seen order (MGMT-26, ORD-5); ``InvalidPriority`` outside 0..2097152."""

    @operation
    async def get_queue_stats(self, queue: str) -> QueueStats:
        """The pause flag and the six state counts from one snapshot (MGMT-27, PAUSE-13);
        not paused and zeros for a queue that does not exist."""

    @operation
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

    @operation
    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        """Time until the earliest delayed job of these queues (all when None) is due, on
        the backend's clock: zero when one is due already, None when none is delayed."""
