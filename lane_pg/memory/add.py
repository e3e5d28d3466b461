"""Adding jobs (ADD): ``lane.add_job`` / ``lane.add_jobs``."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from datetime import datetime

from lane_pg.memory._store import (
    _MILLISECOND,
    BUCKET_MIDDLE,
    PRIORITY_BUCKET,
    _epoch_ms,
    _NewJob,
    _parse_spec,
    _Queue,
    _Record,
    _Store,
)
from lane_pg.types import (
    JSON,
    Job,
    JobOptions,
    JobSpec,
    validate_queue_name,
)


class _Adding(_Store):
    """Adding jobs (ADD): ``lane.add_job`` / ``lane.add_jobs``."""

    def _insert(
        self, queue: str, new: _NewJob, now: datetime, batch: list[_Record] | None = None
    ) -> _Record:
        """Store one new job. With ``batch`` its events wait for ``_emit_batch``."""
        q = self._queue(queue)
        opts = new.options.parsed
        if opts.job_id is not None and opts.job_id in q.jobs:
            return q.jobs[opts.job_id]  # ADD-3: idempotent, no write and no event
        self._last_key += 1
        delayed = opts.delay_ms > 0
        job = _Record(
            queue=queue,
            # A generated id is the key's text, as lane._store_jobs gives it (migration 0008).
            id=opts.job_id if opts.job_id is not None else str(self._last_key),
            key=self._last_key,
            name=new.name,
            data=new.data,
            state="delayed" if delayed else "waiting",
            priority=opts.priority,
            lifo=opts.lifo,
            order_key=opts.priority * PRIORITY_BUCKET + BUCKET_MIDDLE,
            created_at=now,
            available_at=now + opts.delay_ms * _MILLISECOND,
            max_attempts=opts.attempts,
            backoff=new.options.backoff,
            timeout_ms=opts.timeout_ms,
            options=opts.document,
            remove_on_complete=opts.remove_on_complete,
            remove_on_fail=opts.remove_on_fail,
        )
        self._store(q, job)
        if delayed:
            heapq.heappush(q.delayed, (job.available_at, job.key, job.id))
        else:
            self._enqueue(q, job)
        if batch is None:
            self._emit_batch(q, [job], now)
        else:
            batch.append(job)
        return job

    def _emit_batch(self, q: _Queue, jobs: list[_Record], now: datetime) -> None:
        """The events of jobs added by one call, in the order lane._store_jobs writes its
        event rows: every 'added', then every 'waiting', then every 'delayed'."""
        for job in jobs:
            self._emit(q, "added", job.id, {"name": job.name}, now)
        for job in jobs:
            if job.state == "waiting":
                self._emit(q, "waiting", job.id, {}, now)
        for job in jobs:
            if job.state == "delayed":
                self._emit(q, "delayed", job.id, {"delay": _epoch_ms(job.available_at)}, now)

    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> Job:
        validate_queue_name(queue)
        new = _parse_spec(name, data, options)
        return self._insert(queue, new, self._now(now)).snapshot()

    async def add_jobs(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[Job]:
        validate_queue_name(queue)
        parsed = [_parse_spec(spec.name, spec.data, spec.options) for spec in specs]
        moment = self._now(now)
        batch: list[_Record] = []
        jobs = [self._insert(queue, new, moment, batch) for new in parsed]
        if batch:
            self._emit_batch(self._queue(queue), batch, moment)
        return [job.snapshot() for job in jobs]
