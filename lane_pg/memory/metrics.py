"""Terminal metrics (OBS-6, MGMT-28; sql/functions/75_metrics.sql). The counting itself
is ``_Store._after_finish``, on every completion and terminal failure."""

from __future__ import annotations

from datetime import datetime, timedelta

from lane_pg.backend.metrics import CompactMetrics, GetMetrics, GetThroughput
from lane_pg.memory._store import MemoryEntity
from lane_pg.types.metrics import (
    MINUTE_MS,
    THROUGHPUT_WINDOW_MINUTES,
    JobMetrics,
    ThroughputMinute,
    metrics_window,
    throughput_minute,
    validate_data_points,
    validate_metrics_call,
)


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000


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

    async def get_throughput(self, args: GetThroughput) -> list[ThroughputMinute]:
        """``lane.v_throughput`` of sql/views.sql, over the retained finished jobs."""
        q = self._store._queues.get(args.queue)
        if q is None:
            return []
        now = self._store._now(None)
        since = now.replace(second=0, microsecond=0) - timedelta(
            minutes=THROUGHPUT_WINDOW_MINUTES - 1
        )
        minutes: dict[datetime, list[tuple[str, float | None, float | None]]] = {}
        for state in ("completed", "failed"):
            for job in q.by_state[state].values():
                finished = job.finished_at
                if finished is None or finished < since:
                    continue
                started = job.processed_at
                wait = None if started is None else _ms(started - job.available_at)
                run = None if started is None else _ms(finished - started)
                minute = finished.replace(second=0, microsecond=0)
                minutes.setdefault(minute, []).append((state, wait, run))
        result = []
        for minute in sorted(minutes):
            result.append(throughput_minute(minute, minutes[minute]))
        return result
