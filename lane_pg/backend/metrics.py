"""Terminal metrics (OBS-6, MGMT-28): per-minute completed and failed counts.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from datetime import datetime

from lane_pg.backend.operation import Handle, operation
from lane_pg.types.metrics import DEFAULT_JOB_METRICS_RETENTION, JobMetrics, MetricsState


class Metrics(Handle, name="metrics"):
    """Terminal metrics: every completion and terminal failure (fail_job, a discarded
    retry, stalled recovery, a parent its child fails) counts into its queue's minute."""

    __slots__ = ()

    @operation
    async def get_metrics(
        self,
        queue: str,
        state: MetricsState,
        start: int = 0,
        end: int = -1,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
    ) -> JobMetrics:
        """BullMQ's ``getMetrics``: the total count, the newest minute (``prev_ts``) and
        the count before it, and ``data[start..end]`` (inclusive, negative from the end,
        as Redis ``LRANGE``) of the per-minute counts, newest first, over at most
        ``max_data_points`` minutes back from the newest; zeros for a queue without any.
        ``InvalidOptions`` for another state or a non-positive ``max_data_points``."""

    @operation
    async def compact_metrics(
        self,
        *,
        max_data_points: int = DEFAULT_JOB_METRICS_RETENTION,
        now: datetime | None = None,
    ) -> int:
        """The maintenance leader's pass: folds each closed minute (before ``now``'s) into
        one record and the minutes beyond ``max_data_points`` into the all-time count;
        returns how many records went. ``get_metrics`` answers the same before and after."""
