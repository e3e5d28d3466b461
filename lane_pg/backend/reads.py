"""Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP).

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime, timedelta

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types import (
    JobPage,
    JobState,
    QueueStats,
)


class GetJobCounts(Arguments[dict[JobState, int]]):
    """Counts for the given states (all six when None or empty), in first-seen order,
    zero included (MGMT-23)."""

    queue: str
    states: Sequence[JobState] | None = None


class GetJobCount(Arguments[int]):
    """The sum of ``get_job_counts(queue, states)``: all six states when None or empty,
    a repeated state counted once (MGMT-24)."""

    queue: str
    states: Sequence[JobState] | None = None


class CountPendingJobs(Arguments[int]):
    """Jobs still to run: waiting + delayed + waiting-children (MGMT-25)."""

    queue: str


class CountReadyJobs(Arguments[int]):
    """Jobs ready to run now: waiting, plus delayed ones whose time has come (A16, the
    facade's ``pending_size``)."""

    queue: str
    _: KW_ONLY
    now: datetime | None = None


class CountScheduledJobs(Arguments[int]):
    """Delayed jobs whose time has not come (the facade's ``delayed_size``). A due one
    is ready (``count_ready_jobs``), so the two never count a job twice (INSP-1,
    INSP-5)."""

    queue: str
    _: KW_ONLY
    now: datetime | None = None


class ListReadyJobs(Arguments[JobPage]):
    """A page of the jobs ``count_ready_jobs`` counts: waiting ones, then delayed ones
    whose time has come, each part in insertion order (the facade's ``pending_jobs``);
    ``total`` is their count at the same instant."""

    queue: str
    _: KW_ONLY
    offset: int = 0
    limit: int = 20
    now: datetime | None = None


class ListScheduledJobs(Arguments[JobPage]):
    """A page of the jobs ``count_scheduled_jobs`` counts, in insertion order (the
    facade's ``delayed_jobs``)."""

    queue: str
    _: KW_ONLY
    offset: int = 0
    limit: int = 20
    now: datetime | None = None


class GetCountsPerPriority(Arguments[dict[int, int]]):
    """Waiting jobs per requested priority, zero included, a repeated priority once, in
    first-seen order (MGMT-26, ORD-5); ``InvalidPriority`` outside 0..2097152."""

    queue: str
    priorities: Sequence[int]


class GetQueueStats(Arguments[QueueStats]):
    """The pause flag and the six state counts from one snapshot (MGMT-27, PAUSE-13);
    not paused and zeros for a queue that does not exist."""

    queue: str


class ListJobs(Arguments[JobPage]):
    """A page of jobs in the given states (MGMT-2), ordered by state (in the order of
    ``ALL_STATES``) then by insertion order; ``descending`` reverses the whole order;
    ``total`` counts every match."""

    queue: str
    states: Sequence[JobState]
    _: KW_ONLY
    descending: bool = False
    offset: int = 0
    limit: int = 20


class NextDueIn(Arguments[timedelta | None]):
    """Time until the earliest delayed job of these queues (all when None) is due, on
    the backend's clock: zero when one is due already, None when none is delayed."""

    queues: Sequence[str] | None = None


class Reads(Handle, name="reads"):
    """Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

    __slots__ = ()

    get_job_counts = operation(GetJobCounts)
    get_job_count = operation(GetJobCount)
    count_pending_jobs = operation(CountPendingJobs)
    count_ready_jobs = operation(CountReadyJobs)
    count_scheduled_jobs = operation(CountScheduledJobs)
    list_ready_jobs = operation(ListReadyJobs)
    list_scheduled_jobs = operation(ListScheduledJobs)
    get_counts_per_priority = operation(GetCountsPerPriority)
    get_queue_stats = operation(GetQueueStats)
    list_jobs = operation(ListJobs)
    next_due_in = operation(NextDueIn)
