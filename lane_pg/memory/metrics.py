"""Terminal metrics (OBS-6, MGMT-28; sql/functions/75_metrics.sql). The counting itself
is ``_Store._after_finish``, on every completion and terminal failure."""

from __future__ import annotations

from datetime import datetime

from lane_pg.memory._store import MemoryEntity
from lane_pg.types.metrics import (
    DEFAULT_JOB_METRICS_RETENTION,
    MINUTE_MS,
    JobMetrics,
    MetricsState,
    metrics_window,
    validate_data_points,
    validate_metrics_call,
)


class MemoryMetrics(MemoryEntity):
    """Terminal metrics: reads and the maintenance leader's compaction."""

    async def get_metrics(
        self,
        queue: str,
        state: MetricsState,
        start: int = 0,
        end: int = -1,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
    ) -> JobMetrics:
        validate_metrics_call(state, start, end, max_data_points)
        q = self._store._queues.get(queue)
        minutes = {} if q is None else q.metrics.get(state, {})
        folded = 0 if q is None else q.metrics_folded.get(state, 0)
        return metrics_window(minutes, folded, start, end, max_data_points)

    async def compact_metrics(
        self,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
        now: datetime | None = None,
    ) -> int:
        # One record per minute already (no per-connection rows, so ``now`` has no closed
        # minutes to fold): only the minutes beyond the retained data points go, into the
        # all-time count.
        validate_data_points(max_data_points)
        del now
        folded = 0
        for q in self._store._queues.values():
            for state, minutes in q.metrics.items():
                if not minutes:
                    continue
                kept_from = max(minutes) - (max_data_points - 1) * MINUTE_MS
                for minute in [m for m in minutes if m < kept_from]:
                    q.metrics_folded[state] = q.metrics_folded.get(state, 0) + minutes.pop(minute)
                    folded += 1
        return folded
