"""Terminal metrics (OBS-6, MGMT-28): per-minute completed and failed counts.

The rules every backend follows are in ``lane_pg.backend`` (the package docstring)."""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from lane_pg.backend.operation import Arguments, Handle, operation
from lane_pg.types.metrics import (
    DEFAULT_JOB_METRICS_RETENTION,
    JobMetrics,
    MetricsState,
    ThroughputMinute,
)


class GetMetrics(Arguments[JobMetrics]):
    """BullMQ's ``getMetrics``: the total count, the newest minute (``prev_ts``) and
    the count before it, and ``data[start..end]`` (inclusive, negative from the end,
    as Redis ``LRANGE``) of the per-minute counts, newest first, over at most
    ``max_data_points`` minutes back from the newest; zeros for a queue without any.
    ``InvalidOptions`` for another state or a non-positive ``max_data_points``."""

    queue: str
    state: MetricsState
    start: int = 0
    end: int = -1
    _: KW_ONLY
    max_data_points: int = DEFAULT_JOB_METRICS_RETENTION


class CompactMetrics(Arguments[int]):
    """The maintenance leader's pass: folds each closed minute (before ``now``'s) into
    one record and the minutes beyond ``max_data_points`` into the all-time count;
    returns how many records went. ``get_metrics`` answers the same before and after."""

    _: KW_ONLY
    max_data_points: int = DEFAULT_JOB_METRICS_RETENTION
    now: datetime | None = None


class GetThroughput(Arguments[list[ThroughputMinute]]):
    """The queue's retained completed and failed jobs that finished in this minute or the
    59 before it (``THROUGHPUT_WINDOW_MINUTES``, UTC minutes, on the backend's clock),
    counted per minute with their wait and run percentiles, oldest minute first; a minute
    without any is left out, and a queue that does not exist gives ``[]``. On PostgreSQL
    these are the rows of the view ``lane.v_throughput`` for the queue. Jobs already
    deleted by retention are not counted (``get_metrics`` counts every one)."""

    queue: str


class Metrics(Handle, name="metrics"):
    """Terminal metrics: every completion and terminal failure (fail_job, a discarded
    retry, stalled recovery, a parent its child fails) counts into its queue's minute."""

    __slots__ = ()

    get_metrics = operation(GetMetrics)
    compact_metrics = operation(CompactMetrics)
    get_throughput = operation(GetThroughput)
