"""Reads: snapshots, states, counts, pages, events."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from lane_pg.memory._records import PRIORITY_BUCKET, _check_state, _non_negative_int
from lane_pg.memory._store import _event_bound, _Store
from lane_pg.types import (
    ALL_STATES,
    Completed,
    Failed,
    FinishedResult,
    JobPage,
    JobRow,
    JobState,
    NotFinished,
    QueueEvent,
    QueueStats,
    validate_priority,
)


class _Reading(_Store):
    """Reads: snapshots, states, counts, pages, events."""

    async def get_job(self, queue: str, job_id: str) -> JobRow | None:
        found = self._find(queue, job_id)
        if found is None:
            return None
        q, job = found
        # MGMT-1's extras, as lane.get_job_extras reads them.
        owner = None if job.dedup_id is None else q.owners.get(job.dedup_id)
        deps = sorted(self._deps.get(job.key, {}).values(), key=lambda d: d.seq)
        return replace(
            job.snapshot(),
            logs_count=len(job.logs),
            deduplication_expires_at=(
                owner.expires_at if owner is not None and owner.job_key == job.key else None
            ),
            child_ids=tuple((dep.child_queue, dep.child_id) for dep in deps),
        )

    async def get_job_state(self, queue: str, job_id: str) -> JobState | None:
        found = self._find(queue, job_id)
        return None if found is None else found[1].state

    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        wanted = [_check_state(state) for state in (states or ALL_STATES)]
        q = self._queues.get(queue)
        return {state: 0 if q is None else len(q.by_state[state]) for state in wanted}

    async def get_job_count(self, queue: str, states: Sequence[JobState] | None = None) -> int:
        return sum((await self.get_job_counts(queue, states)).values())

    async def count_pending_jobs(self, queue: str) -> int:
        return await self.get_job_count(queue, ["waiting", "delayed", "waiting-children"])

    async def count_ready_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        moment = self._now(now)
        q = self._queues.get(queue)
        if q is None:
            return 0
        due = sum(1 for job in q.by_state["delayed"].values() if job.available_at <= moment)
        return len(q.by_state["waiting"]) + due

    async def count_scheduled_jobs(self, queue: str, *, now: datetime | None = None) -> int:
        moment = self._now(now)
        q = self._queues.get(queue)
        if q is None:
            return 0
        return sum(1 for job in q.by_state["delayed"].values() if job.available_at > moment)

    async def list_ready_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return self._readiness_page(queue, True, offset, limit, self._now(now))

    async def list_scheduled_jobs(
        self, queue: str, *, offset: int = 0, limit: int = 20, now: datetime | None = None
    ) -> JobPage:
        return self._readiness_page(queue, False, offset, limit, self._now(now))

    def _readiness_page(
        self, queue: str, ready: bool, offset: int, limit: int, moment: datetime
    ) -> JobPage:
        """lane.list_jobs_by_readiness."""
        _non_negative_int(offset, "offset")
        _non_negative_int(limit, "limit")
        q = self._queues.get(queue)
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
        q = self._queues.get(queue)
        # By order-key bucket, as the SQL range count (ORD-5).
        keys = [] if q is None else [job.order_key for job in q.by_state["waiting"].values()]
        return {p: sum(1 for key in keys if key // PRIORITY_BUCKET == p) for p in wanted}

    async def get_queue_stats(self, queue: str) -> QueueStats:
        q = self._queues.get(queue)
        paused = q is not None and q.paused
        return QueueStats.from_counts(paused, await self.get_job_counts(queue))

    async def get_job_finished_result(self, queue: str, job_id: str) -> FinishedResult | None:
        found = self._find(queue, job_id)
        if found is None:
            return None
        job = found[1]
        if job.state == "completed":
            return Completed(copy.deepcopy(job.return_value))
        if job.state == "failed":
            return Failed(job.failed_reason or "")
        return NotFinished(job.state)

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
        q = self._queues.get(queue)
        matches = [] if q is None else [j for j in q.jobs.values() if j.state in wanted]
        matches.sort(key=lambda j: (ALL_STATES.index(j.state), j.key), reverse=descending)
        items = [job.snapshot() for job in matches[offset : offset + limit]]
        return JobPage(items, len(matches), offset, limit)

    async def read_events(
        self, queue: str, start: str | int = "-", end: str | int = "+", limit: int = 100
    ) -> list[QueueEvent]:
        low, high = _event_bound(start), _event_bound(end)
        q = self._queues.get(queue)
        if q is None or limit <= 0:
            return []
        selected = [event for event in q.events if low <= event.id <= high][:limit]
        return [replace(event, data=copy.deepcopy(event.data)) for event in selected]
