"""Adding jobs (ADD): ``lane.add_job`` / ``lane.add_jobs``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from lane_pg.memory._records import _Batch, _parse_spec, check_series_left
from lane_pg.memory._store import _Store
from lane_pg.types import (
    JSON,
    JobOptions,
    JobRow,
    JobSpec,
    validate_queue_name,
)


class _Adding(_Store):
    """Adding jobs (ADD): ``lane.add_job`` / ``lane.add_jobs``."""

    async def add_job(
        self,
        queue: str,
        name: str,
        data: JSON = None,
        options: JobOptions | dict[str, JSON] | None = None,
        *,
        now: datetime | None = None,
    ) -> JobRow:
        validate_queue_name(queue)
        new = _parse_spec(name, data, options)
        moment = self._now(now)
        check_series_left([new], moment)
        self._check_reservations(queue, [new], moment)
        return self._insert(queue, new, moment).snapshot()

    async def add_jobs(
        self, queue: str, specs: Sequence[JobSpec], *, now: datetime | None = None
    ) -> list[JobRow]:
        validate_queue_name(queue)
        parsed = [_parse_spec(spec.name, spec.data, spec.options) for spec in specs]
        moment = self._now(now)
        check_series_left(parsed, moment)
        self._check_reservations(queue, parsed, moment)
        batch = _Batch()
        jobs = [self._insert(queue, new, moment, batch) for new in parsed]
        if batch.jobs or batch.later:
            self._emit_batch(self._queue(queue), batch, moment)
        return [job.snapshot() for job in jobs]
