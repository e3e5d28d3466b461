"""Adding and reading single jobs (ADD, MGMT) on Redis: ``add_jobs.lua`` stores (with the
deduplication and series claims of ``includes/add.lua``), a job's hash is read with one
HGETALL."""

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


def checked_specs(specs: list[tuple[str, Any, Any]]) -> list[SpecFields]:
    """Each spec checked (``lane_pg.options``) with the fields ``includes/add.lua`` stores,
    its deduplication and series parts included. Flows are not on Redis yet, so no spec
    here is a flow node (a kept next job never has a parent or children)."""
    from lane_pg.redis.dedup import dedup_fields
    from lane_pg.redis.repeats import series_fields

    checked = []
    for name, data, options in specs:
        spec = spec_fields(name, data, options)
        spec.fields["dedup"] = dedup_fields(spec.parsed)
        spec.fields["series"] = series_fields(name, spec.parsed)
        checked.append(spec)
    return checked


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
        from lane_pg.redis.repeats import call_scheduled, first_ticks, raise_refusal

        validate_queue_name(queue)
        checked = checked_specs(specs)
        if not checked:
            return []
        backend = self._backend
        moment = epoch_ms(now)
        cron: dict[str, int | None] = {}
        if any(spec.parsed.repeat is not None for spec in checked):
            moment = await backend.now_ms(now)  # ADD-13 and the first ticks, at one instant
            cron = first_ticks([(spec.fields["name"], spec.parsed) for spec in checked], moment)
        await backend.register(queue)
        rows = await call_scheduled(
            backend,
            "add_jobs",
            queue,
            {"now": moment, "specs": [spec.fields for spec in checked], "cron": cron},
        )
        raise_refusal(rows)
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
