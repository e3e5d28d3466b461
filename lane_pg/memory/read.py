"""Reads: snapshots, states, counts, pages, events."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

from lane_pg.memory._records import _check_state, _non_negative_int
from lane_pg.memory._store import _event_bound, _Store
from lane_pg.types import (
    ALL_STATES,
    Job,
    JobPage,
    JobState,
    QueueEvent,
)


class _Reading(_Store):
    """Reads: snapshots, states, counts, pages, events."""

    async def get_job(self, queue: str, job_id: str) -> Job | None:
        found = self._find(queue, job_id)
        return None if found is None else found[1].snapshot()

    async def get_job_state(self, queue: str, job_id: str) -> JobState | None:
        found = self._find(queue, job_id)
        return None if found is None else found[1].state

    async def get_job_counts(
        self, queue: str, states: Sequence[JobState] | None = None
    ) -> dict[JobState, int]:
        wanted = [_check_state(state) for state in (states or ALL_STATES)]
        q = self._queues.get(queue)
        return {state: 0 if q is None else len(q.by_state[state]) for state in wanted}

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
