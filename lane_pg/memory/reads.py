"""Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from lane_pg.memory._records import PRIORITY_BUCKET, _check_state, _non_negative_int
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    ALL_STATES,
    JobPage,
    JobState,
    QueueStats,
    validate_priority,
)


class MemoryReads(MemoryEntity):
    """Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        wanted = [_check_state(state) for state in (states or ALL_STATES)]
        q = self._store._queues.get(queue)
        return {state: 0 if q is None else len(q.by_state[state]) for state in wanted}

    async def get_job_count(self, queue: str, states: Sequence[JobState] | None = None) -> int:
        return sum((await self.get_job_counts(queue, states)).values())

    async def count_pending_jobs(self, queue: str) -> int:
        return await self.get_job_count(queue, ["waiting", "delayed", "waiting-children"])

    async def count_ready_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        moment = self._store._now(now)
        q = self._store._queues.get(queue)
        if q is None:
            return 0
        due = sum(1 for job in q.by_state["delayed"].values() if job.available_at <= moment)
        return len(q.by_state["waiting"]) + due

    async def count_scheduled_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        moment = self._store._now(now)
        q = self._store._queues.get(queue)
        if q is None:
            return 0
        return sum(1 for job in q.by_state["delayed"].values() if job.available_at > moment)

    async def list_ready_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return self._readiness_page(queue, True, offset, limit, self._store._now(now))

    async def list_scheduled_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return self._readiness_page(queue, False, offset, limit, self._store._now(now))

    def _readiness_page(
        self, queue: str, ready: bool, offset: int, limit: int, moment: datetime
    ) -> JobPage:
        """lane.list_jobs_by_readiness."""
        _non_negative_int(offset, "offset")
        _non_negative_int(limit, "limit")
        q = self._store._queues.get(queue)
        jobs = [] if q is None else list(q.jobs.values())
        matches = [
            job
            for job in jobs
            if (job.state == "waiting" and ready)
            or (job.state == "delayed" and (job.available_at <= moment) == ready)
        ]
        matches.sort(key=lambda j: (ALL_STATES.index(j.state), j.key))
        items = [job.snapshot() for job in matches[offset : offset + limit]]
        return JobPage(items, len(matches), offset, limit)

    async def get_counts_per_priority(
        self, queue: str, priorities: Sequence[int]
    ) -> dict[int, int]:
        wanted = [validate_priority(priority) for priority in priorities]
        q = self._store._queues.get(queue)
        # By order-key bucket, as the SQL range count (ORD-5).
        keys = [] if q is None else [job.order_key for job in q.by_state["waiting"].values()]
        return {p: sum(1 for key in keys if key // PRIORITY_BUCKET == p) for p in wanted}

    async def get_queue_stats(self, queue: str) -> QueueStats:
        q = self._store._queues.get(queue)
        paused = q is not None and q.paused
        return QueueStats.from_counts(paused, await self.get_job_counts(queue))

    async def list_jobs(
        self,
        queue: str,
        states: Sequence[JobState],
        *,
        descending: bool = False,
        offset: int = 0,
        limit: int = 20,
    ) -> JobPage:
        wanted = {_check_state(state) for state in (states or ALL_STATES)}
        _non_negative_int(offset, "offset")
        _non_negative_int(limit, "limit")
        q = self._store._queues.get(queue)
        matches = [] if q is None else [j for j in q.jobs.values() if j.state in wanted]
        matches.sort(key=lambda j: (ALL_STATES.index(j.state), j.key), reverse=descending)
        items = [job.snapshot() for job in matches[offset : offset + limit]]
        return JobPage(items, len(matches), offset, limit)

    async def next_due_in(self, queues: Sequence[str] | None = None) -> timedelta | None:
        due = [
            job.available_at
            for q in self._store._selected(queues)
            for job in q.by_state["delayed"].values()
        ]
        if not due:
            return None
        return max(min(due) - self._store._now(None), timedelta(0))
