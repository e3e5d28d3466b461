"""Reads of one job: its snapshot, its state, its finished result."""

from __future__ import annotations

import copy
from dataclasses import replace

from lane_pg.memory._store import _Store
from lane_pg.types import (
    Completed,
    Failed,
    FinishedResult,
    JobRow,
    JobState,
    NotFinished,
)


class _Reading(_Store):
    """Reads of one job: its snapshot, its state, its finished result."""

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
