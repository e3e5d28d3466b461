"""Adding and reading single jobs (ADD, MGMT) on Redis: ``add_jobs.lua`` stores, a job's
hash is read with one HGETALL."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from lane_pg.backend.jobs import AddJob, AddJobs, GetJob, GetJobFinishedResult, GetJobState
from lane_pg.redis.backend import RedisEntity
from lane_pg.redis.rows import SpecFields, epoch_ms, job_row, spec_fields
from lane_pg.types import (
    Completed,
    Failed,
    FinishedResult,
    JobRow,
    JobState,
    NotFinished,
    validate_queue_name,
)


def _supported(spec: SpecFields) -> None:
    parsed = spec.parsed
    if parsed.deduplication is not None or parsed.repeat is not None:
        raise NotImplementedError(
            "deduplication and repeat are not available on the Redis backend yet"
        )


class RedisJobs(RedisEntity):
    """The ``jobs`` handle on Redis."""

    async def add_job(self, args: AddJob) -> JobRow:
        return (await self._add(args.queue, [(args.name, args.data, args.options)], args.now))[0]

    async def add_jobs(self, args: AddJobs) -> list[JobRow]:
        specs = [(spec.name, spec.data, spec.options) for spec in args.specs]
        return await self._add(args.queue, specs, args.now)

    async def _add(
        self, queue: str, specs: list[tuple[str, Any, Any]], now: datetime | None
    ) -> list[JobRow]:
        validate_queue_name(queue)
        checked = [spec_fields(name, data, options) for name, data, options in specs]
        for spec in checked:
            _supported(spec)
        if not checked:
            return []
        backend = self._backend
        await backend.register(queue)
        rows = await backend.call(
            "add_jobs",
            queue,
            {"now": epoch_ms(now), "specs": [spec.fields for spec in checked]},
        )
        return [job_row(queue, fields) for fields in rows]

    async def _fields(self, queue: str, job_id: str) -> dict[str, str] | None:
        raw: Any = await self._backend.client.hgetall(self._backend.keys(queue).job(job_id))
        if not raw:
            return None
        return {key.decode(): value.decode() for key, value in raw.items()}

    async def get_job(self, args: GetJob) -> JobRow | None:
        fields = await self._fields(args.queue, args.job_id)
        if fields is None:
            return None
        keys = self._backend.keys(args.queue)
        logs = await self._backend.client.llen(keys.key(f"logs:{args.job_id}"))
        row = job_row(args.queue, fields)
        return replace(row, logs_count=int(logs), child_ids=())

    async def get_job_state(self, args: GetJobState) -> JobState | None:
        row = await self.get_job(GetJob(args.queue, args.job_id))
        return None if row is None else row.state

    async def get_job_finished_result(self, args: GetJobFinishedResult) -> FinishedResult | None:
        fields = await self._fields(args.queue, args.job_id)
        if fields is None:
            return None
        row = job_row(args.queue, fields)
        if row.state == "completed":
            return Completed(row.return_value)
        if row.state == "failed":
            return Failed(row.failed_reason or "")
        return NotFinished(row.state)
