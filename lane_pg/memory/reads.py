"""Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from lane_pg.backend.reads import (
    CountPendingJobs,
    CountReadyJobs,
    CountScheduledJobs,
    GetCountsPerPriority,
    GetJobCount,
    GetJobCounts,
    GetQueueStats,
    ListJobs,
    ListReadyJobs,
    ListScheduledJobs,
    NextDueIn,
    SearchJobs,
    search_filter,
)
from lane_pg.memory._records import (
    PRIORITY_BUCKET,
    _check_state,
    _non_negative_int,
    _Record,
)
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    ALL_STATES,
    JobPage,
    JobSearchPage,
    JobState,
    QueueStats,
    validate_priority,
)

# lane.search_jobs' order per state, the order of the state's index: (sort key, reversed).
_SEARCH_ORDER: dict[JobState, tuple[Callable[[_Record], tuple[object, ...]], bool]] = {
    "waiting": (lambda j: (j.order_key, j.key), False),
    "delayed": (lambda j: (j.available_at, j.key), False),
    "active": (lambda j: (j.key,), False),
    "waiting-children": (lambda j: (j.key,), True),
    "completed": (lambda j: (j.finished_at, j.key), True),
    "failed": (lambda j: (j.finished_at, j.key), True),
}


class MemoryReads(MemoryEntity):
    """Counting and listing a queue's jobs (MGMT-2, MGMT-23..27, INSP)."""

    async def get_job_counts(self, args: GetJobCounts) -> dict[JobState, int]:
        wanted = [_check_state(state) for state in (args.states or ALL_STATES)]
        q = self._store._queues.get(args.queue)
        return {state: 0 if q is None else len(q.by_state[state]) for state in wanted}

    async def get_job_count(self, args: GetJobCount) -> int:
        return sum((await self.get_job_counts(GetJobCounts(args.queue, args.states))).values())

    async def count_pending_jobs(self, args: CountPendingJobs) -> int:
        return await self.get_job_count(
            GetJobCount(args.queue, ["waiting", "delayed", "waiting-children"])
        )

    async def count_ready_jobs(self, args: CountReadyJobs) -> int:
        moment = self._store._now(args.now)
        q = self._store._queues.get(args.queue)
        if q is None:
            return 0
        due = sum(1 for job in q.by_state["delayed"].values() if job.available_at <= moment)
        return len(q.by_state["waiting"]) + due

    async def count_scheduled_jobs(self, args: CountScheduledJobs) -> int:
        moment = self._store._now(args.now)
        q = self._store._queues.get(args.queue)
        if q is None:
            return 0
        return sum(1 for job in q.by_state["delayed"].values() if job.available_at > moment)

    async def list_ready_jobs(self, args: ListReadyJobs) -> JobPage:
        return self._readiness_page(
            args.queue, True, args.offset, args.limit, self._store._now(args.now)
        )

    async def list_scheduled_jobs(self, args: ListScheduledJobs) -> JobPage:
        return self._readiness_page(
            args.queue, False, args.offset, args.limit, self._store._now(args.now)
        )

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

    async def get_counts_per_priority(self, args: GetCountsPerPriority) -> dict[int, int]:
        wanted = [validate_priority(priority) for priority in args.priorities]
        q = self._store._queues.get(args.queue)
        # By order-key bucket, as the SQL range count (ORD-5).
        keys = [] if q is None else [job.order_key for job in q.by_state["waiting"].values()]
        return {p: sum(1 for key in keys if key // PRIORITY_BUCKET == p) for p in wanted}

    async def get_queue_stats(self, args: GetQueueStats) -> QueueStats:
        q = self._store._queues.get(args.queue)
        paused = q is not None and q.paused
        return QueueStats.from_counts(paused, await self.get_job_counts(GetJobCounts(args.queue)))

    async def list_jobs(self, args: ListJobs) -> JobPage:
        wanted = {_check_state(state) for state in (args.states or ALL_STATES)}
        _non_negative_int(args.offset, "offset")
        _non_negative_int(args.limit, "limit")
        q = self._store._queues.get(args.queue)
        matches = [] if q is None else [j for j in q.jobs.values() if j.state in wanted]
        matches.sort(key=lambda j: (ALL_STATES.index(j.state), j.key), reverse=args.descending)
        items = [job.snapshot() for job in matches[args.offset : args.offset + args.limit]]
        return JobPage(items, len(matches), args.offset, args.limit)

    async def search_jobs(self, args: SearchJobs) -> JobSearchPage:
        """lane.search_jobs."""
        search = search_filter(args)
        q = self._store._queues.get(args.queue)
        jobs = [] if q is None else q.by_state[search.state].values()
        matches = [job for job in jobs if search.matches(job.name, job.data)]
        order, newest_first = _SEARCH_ORDER[search.state]
        matches.sort(key=order, reverse=newest_first)
        offset, limit = search.offset, search.limit
        page = matches[offset : offset + limit + 1]
        return JobSearchPage(
            [job.snapshot() for job in page[:limit]], offset, limit, len(page) > limit
        )

    async def next_due_in(self, args: NextDueIn) -> timedelta | None:
        due = [
            job.available_at
            for q in self._store._selected(args.queues)
            for job in q.by_state["delayed"].values()
        ]
        if not due:
            return None
        return max(min(due) - self._store._now(None), timedelta(0))
