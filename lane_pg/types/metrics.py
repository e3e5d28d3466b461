"""Terminal metrics (OBS-6, MGMT-28): what ``get_metrics`` returns and the arguments it takes.

Completing and terminally failing jobs count per queue into one-minute buckets, kept for
``DEFAULT_JOB_METRICS_RETENTION`` minutes back from the newest bucket. The PostgreSQL
rules are sql/functions/75_metrics.sql; ``metrics_window`` is the same read for the
memory backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias

from lane_pg.errors import InvalidOptions

MetricsState: TypeAlias = Literal["completed", "failed"]

DEFAULT_JOB_METRICS_RETENTION = 20_160
"""Per-minute data points kept per queue and state: two weeks, the ``maxDataPoints``
BullMQ's documentation recommends (``MetricsTime.ONE_WEEK * 2``). The default of
``lane.get_metrics`` and ``lane.compact_metrics`` is the same number."""

MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """BullMQ's ``getMetrics`` shape: ``meta.count``, ``meta.prevTS``, ``meta.prevCount``,
    ``data`` and ``count`` (here ``data_points``)."""

    count: int
    """Every job counted in this state, ever (also beyond the retained minutes)."""
    prev_ts: int
    """Start of the newest minute with a count, epoch ms (0 when nothing was counted)."""
    prev_count: int
    """``count`` before the newest minute."""
    data: list[int]
    """The requested slice of the per-minute counts, newest minute first; a minute
    without jobs between two counted ones is 0."""
    data_points: int
    """Length of the whole per-minute list (at most the retained data points)."""


def validate_metrics_state(state: object) -> MetricsState:
    if state not in ("completed", "failed"):
        raise InvalidOptions(f"metrics are kept for the states completed and failed, got {state!r}")
    return state


def validate_data_points(max_data_points: object) -> int:
    if (
        isinstance(max_data_points, bool)
        or not isinstance(max_data_points, int)
        or not 1 <= max_data_points <= 2**31 - 1
    ):
        raise InvalidOptions(f"max_data_points must be a positive integer, got {max_data_points!r}")
    return max_data_points


def validate_index(value: object, what: str) -> int:
    """A list index as Redis ``LRANGE`` takes it: any int4, negative counting from the end."""
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise InvalidOptions(f"metrics {what} must be an integer, got {value!r}")
    return value


def validate_metrics_call(
    state: object, start: object, end: object, max_data_points: object
) -> None:
    """``get_metrics``' arguments, checked before anything is read (every backend)."""
    validate_metrics_state(state)
    validate_index(start, "start")
    validate_index(end, "end")
    validate_data_points(max_data_points)


def metrics_window(
    minutes: Mapping[int, int], before: int, start: int, end: int, max_data_points: int
) -> JobMetrics:
    """``get_metrics`` over per-minute counts (``minutes``: minute start in epoch ms ->
    count) and the count of minutes already folded away (``before``)."""
    total = before + sum(minutes.values())
    if not minutes:
        return JobMetrics(total, 0, total, [], 0)
    newest = max(minutes)
    oldest = max(min(minutes), newest - (max_data_points - 1) * MINUTE_MS)
    length = (newest - oldest) // MINUTE_MS + 1
    first = max(length + start, 0) if start < 0 else start
    last = min(length + end if end < 0 else end, length - 1)
    data = [minutes.get(newest - i * MINUTE_MS, 0) for i in range(first, last + 1)]
    return JobMetrics(total, newest, total - minutes[newest], data, length)


THROUGHPUT_WINDOW_MINUTES = 60
"""``get_throughput`` and the view ``lane.v_throughput`` cover this minute and the 59
before it."""


@dataclass(frozen=True, slots=True)
class ThroughputMinute:
    """One minute (UTC) of a queue's retained finished jobs: how many completed and failed,
    and percentiles (linear interpolation, as PostgreSQL's ``percentile_cont``) of their
    wait (started minus due: ``processed_at - available_at``) and run (``finished_at -
    processed_at``) times in milliseconds; None where no finished job of the minute has
    the timestamps."""

    minute: datetime
    completed: int
    failed: int
    wait_p50_ms: float | None
    wait_p95_ms: float | None
    wait_p99_ms: float | None
    run_p50_ms: float | None
    run_p95_ms: float | None
    run_p99_ms: float | None


def percentile_cont(values: list[float], fraction: float) -> float | None:
    """PostgreSQL's ``percentile_cont``: linear interpolation between the sorted values."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def throughput_minute(
    minute: datetime, jobs: list[tuple[str, float | None, float | None]]
) -> ThroughputMinute:
    """One minute of ``lane.v_throughput`` from its finished jobs' (state, wait ms, run ms):
    the counts per state and the wait and run percentiles (a backend without SQL computes
    them so; PostgreSQL's view is the rule)."""
    waits = [wait for _, wait, _ in jobs if wait is not None]
    runs = [run for _, _, run in jobs if run is not None]
    return ThroughputMinute(
        minute,
        sum(1 for state, _, _ in jobs if state == "completed"),
        sum(1 for state, _, _ in jobs if state == "failed"),
        percentile_cont(waits, 0.5),
        percentile_cont(waits, 0.95),
        percentile_cont(waits, 0.99),
        percentile_cont(runs, 0.5),
        percentile_cont(runs, 0.95),
        percentile_cont(runs, 0.99),
    )
