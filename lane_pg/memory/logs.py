"""Job logs (MGMT-13..15)."""

from __future__ import annotations

from lane_pg.backend.logs import AddJobLog, ClearJobLogs, GetJobLogs
from lane_pg.memory._records import _lrange, _non_negative_int
from lane_pg.memory._store import MemoryEntity
from lane_pg.types import (
    LogEntry,
    LogPage,
)


class MemoryLogs(MemoryEntity):
    """Job logs (MGMT-13..15)."""

    async def add_job_log(self, args: AddJobLog) -> int:
        moment = self._store._now(args.now)
        _, job = self._store._writable(args.queue, args.job_id, args.token)
        if args.keep is not None:
            _non_negative_int(args.keep, "keep")
        job.logs.append(LogEntry(moment, args.message))
        if args.keep is not None:
            job.logs = job.logs[-args.keep :] if args.keep else []
        return len(job.logs)

    async def get_job_logs(self, args: GetJobLogs) -> LogPage:
        found = self._store._find(args.queue, args.job_id)
        if found is None:
            return LogPage([], 0)
        logs = found[1].logs
        ordered = logs if args.asc else logs[::-1]
        return LogPage(_lrange(ordered, args.start, args.end), len(logs))

    async def clear_job_logs(self, args: ClearJobLogs) -> None:
        _non_negative_int(args.keep, "keep")
        _, job = self._store._require(args.queue, args.job_id)
        job.logs = job.logs[-args.keep :] if args.keep else []
