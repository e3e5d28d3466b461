"""Job logs (MGMT-13..15)."""

from __future__ import annotations

from datetime import datetime

from lane_pg.memory._records import _lrange, _non_negative_int
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    LogEntry,
    LogPage,
)


class MemoryLogs(MemoryEntity):
    """Job logs (MGMT-13..15)."""

    async def add_job_log(
        self,
        queue: str,
        job_id: str,
        message: str,
        *,
        keep: int | None = None,
        now: datetime | None = None,
        token: str | None = None,
    ) -> int:
        moment = self._store._now(now)
        _, job = self._store._writable(queue, job_id, token)
        if keep is not None:
            _non_negative_int(keep, "keep")
        job.logs.append(LogEntry(moment, message))
        if keep is not None:
            job.logs = job.logs[-keep:] if keep else []
        return len(job.logs)

    async def get_job_logs(
        self, queue: str, job_id: str, start: int = 0, end: int = -1, *, asc: bool = True
    ) -> LogPage:
        found = self._store._find(queue, job_id)
        if found is None:
            return LogPage([], 0)
        logs = found[1].logs
        ordered = logs if asc else logs[::-1]
        return LogPage(_lrange(ordered, start, end), len(logs))

    async def clear_job_logs(self, queue: str, job_id: str, keep: int = 0) -> None:
        _non_negative_int(keep, "keep")
        _, job = self._store._require(queue, job_id)
        job.logs = job.logs[-keep:] if keep else []
