"""Terminal metrics (OBS-6, MGMT-28; sql/functions/75_metrics.sql). The counting itself
is ``_Store._after_finish``, on every completion and terminal failure."""

from __future__ import annotations

from lane_pg.backend.metrics import CompactMetrics, GetMetrics
from lane_pg.memory._store import MemoryEntity
from lane_pg.types.metrics import (
    MINUTE_MS,
    JobMetrics,
    metrics_window,
    validate_data_points,
    validate_metrics_call,
)


class MemoryMetrics(MemoryEntity):
    """Terminal metrics: reads and the maintenance leader's compaction."""

    async def get_metrics(self, args: GetMetrics) -> JobMetrics:
        validate_metrics_call(args.state, args.start, args.end, args.max_data_points)
        q = self._store._queues.get(args.queue)
        minutes = {} if q is None else q.metrics.get(args.state, {})
        folded = 0 if q is None else q.metrics_folded.get(args.state, 0)
        return metrics_window(minutes, folded, args.start, args.end, args.max_data_points)

    async def compact_metrics(self, args: CompactMetrics) -> int:
        now = args.now
        validate_data_points(args.max_data_points)
        del now
        folded = 0
        for q in self._store._queues.values():
            for state, minutes in q.metrics.items():
                if not minutes:
                    continue
                kept_from = max(minutes) - (args.max_data_points - 1) * MINUTE_MS
                for minute in [m for m in minutes if m < kept_from]:
                    q.metrics_folded[state] = q.metrics_folded.get(state, 0) + minutes.pop(minute)
                    folded += 1
        return folded
