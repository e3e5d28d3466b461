"""Metrics of the lane scheduler: counters, gauges and latency histograms per lane.

    metrics = QueueMetrics.local()
    manager = LaneManager.builder().with_default_lanes().with_metrics(metrics).build()
    ...
    snapshot = await metrics.snapshot()
    snapshot.counter("lane.commands.completed", lane="query")       # 10
    snapshot.histogram("lane.command.latency_seconds", lane="query").p99

``QueueMetrics`` turns the manager's events into calls on a ``MetricsBackend``: the local
one below (in-process, what ``snapshot`` reads), the OpenTelemetry one
(``lane_pg.scheduler.otel``), or any object with the same five methods. The manager calls
it synchronously from its event path, so a backend must not block.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lane_pg.scheduler.events import (
    COMMAND_COMPLETED,
    COMMAND_DEAD_LETTERED,
    COMMAND_FAILED,
    COMMAND_RETRY,
    COMMAND_STARTED,
    COMMAND_SUBMITTED,
    COMMAND_TIMEOUT,
    LaneEvent,
)

if TYPE_CHECKING:
    from lane_pg.scheduler.manager import LaneManager

Labels = Mapping[str, str]

COUNTERS: dict[str, str] = {
    COMMAND_SUBMITTED: "lane.commands.submitted",
    COMMAND_COMPLETED: "lane.commands.completed",
    COMMAND_FAILED: "lane.commands.failed",
    COMMAND_TIMEOUT: "lane.commands.timed_out",
    COMMAND_RETRY: "lane.commands.retried",
    COMMAND_DEAD_LETTERED: "lane.commands.dead_lettered",
}
"""The counter each event increments, labelled with its lane."""
LATENCY = "lane.command.latency_seconds"
"""Submission to the end (completed or failed for good), per lane."""
WAIT = "lane.command.wait_seconds"
"""Submission (or a retry's return to its lane) to each start, per lane."""
DEPTH = "lane.depth"
"""Commands waiting in the lane (queued and retries waiting), read when collected."""
RUNNING = "lane.running"
"""Commands running in the lane, read when collected."""

HISTOGRAM_SAMPLES = 10_000
"""Samples a local histogram keeps per series (the newest): percentiles are over these."""


def series(name: str, labels: Labels | None = None) -> str:
    """The key of one series in a snapshot: ``name{lane="query"}`` (labels sorted)."""
    if not labels:
        return name
    inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{inner}}}"


@dataclass(frozen=True, slots=True)
class HistogramSummary:
    """One histogram series: how many samples, their sum, and four percentiles (nearest
    rank over the kept samples; 0.0 when there are none)."""

    count: int
    sum: float
    p50: float
    p90: float
    p95: float
    p99: float


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """What a backend holds at one moment, keyed by ``series(name, labels)``."""

    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramSummary] = field(default_factory=dict)

    def counter(self, name: str, **labels: str) -> float:
        return self.counters.get(series(name, labels), 0.0)

    def gauge(self, name: str, **labels: str) -> float | None:
        return self.gauges.get(series(name, labels))

    def histogram(self, name: str, **labels: str) -> HistogramSummary | None:
        return self.histograms.get(series(name, labels))


@runtime_checkable
class MetricsBackend(Protocol):
    """Where ``QueueMetrics`` writes: implement these five to export elsewhere."""

    def increment_counter(
        self, name: str, value: float = 1, labels: Labels | None = None
    ) -> None: ...

    def set_gauge(self, name: str, value: float, labels: Labels | None = None) -> None: ...

    def record_histogram(self, name: str, value: float, labels: Labels | None = None) -> None: ...

    async def snapshot(self) -> MetricsSnapshot: ...

    def reset(self) -> None: ...


def _percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return 0.0
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return ordered[rank - 1]


class LocalMetricsBackend:
    """Metrics kept in this process: counters, last gauge values, and the newest
    ``HISTOGRAM_SAMPLES`` samples of each histogram series."""

    def __init__(self, *, histogram_samples: int = HISTOGRAM_SAMPLES) -> None:
        if histogram_samples < 1:
            raise ValueError(f"histogram_samples must be >= 1, got {histogram_samples}")
        self._samples = histogram_samples
        self._counters: dict[str, float] = {}
        self._gauges: dict[str, float] = {}
        self._histograms: dict[str, deque[float]] = {}
        self._sums: dict[str, tuple[int, float]] = {}
        self._keys: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def _series(self, name: str, labels: Labels | None) -> str:
        # Formatting the key on every call was a third of the metrics' cost in
        # examples/bench_lanes.py (cProfile: 50,000 calls, 0.17 s of 1.3 s).
        cache_key = (name, tuple(labels.items()) if labels else ())
        key = self._keys.get(cache_key)
        if key is None:
            key = self._keys[cache_key] = series(name, labels)
        return key

    def increment_counter(self, name: str, value: float = 1, labels: Labels | None = None) -> None:
        key = self._series(name, labels)
        self._counters[key] = self._counters.get(key, 0.0) + value

    def set_gauge(self, name: str, value: float, labels: Labels | None = None) -> None:
        self._gauges[self._series(name, labels)] = value

    def record_histogram(self, name: str, value: float, labels: Labels | None = None) -> None:
        key = self._series(name, labels)
        samples = self._histograms.get(key)
        if samples is None:
            samples = self._histograms[key] = deque(maxlen=self._samples)
        samples.append(value)
        count, total = self._sums.get(key, (0, 0.0))
        self._sums[key] = (count + 1, total + value)

    async def snapshot(self) -> MetricsSnapshot:
        return self.snapshot_now()

    def snapshot_now(self) -> MetricsSnapshot:
        histograms = {}
        for key, samples in self._histograms.items():
            ordered: list[float] = []
            for value in samples:
                bisect.insort(ordered, value)
            count, total = self._sums[key]
            histograms[key] = HistogramSummary(
                count,
                total,
                _percentile(ordered, 0.50),
                _percentile(ordered, 0.90),
                _percentile(ordered, 0.95),
                _percentile(ordered, 0.99),
            )
        return MetricsSnapshot(dict(self._counters), dict(self._gauges), histograms)

    def reset(self) -> None:
        self._counters.clear()
        self._gauges.clear()
        self._histograms.clear()
        self._sums.clear()


class QueueMetrics:
    """The manager's events as metrics on ``backend``: one counter per event kind and lane,
    latency and wait histograms, and depth/running gauges per lane. Attach it with
    ``LaneManager.builder().with_metrics(metrics)``."""

    def __init__(self, backend: MetricsBackend) -> None:
        self.backend = backend
        self._manager: LaneManager | None = None
        self._submitted: dict[str, float] = {}
        self._ready: dict[str, float] = {}
        self._labels: dict[str, dict[str, str]] = {}

    @classmethod
    def local(cls) -> QueueMetrics:
        """Metrics kept in this process (``LocalMetricsBackend``)."""
        return cls(LocalMetricsBackend())

    def attach(self, manager: LaneManager) -> None:
        """Observe ``manager``'s events (the builder's ``with_metrics`` does this)."""
        self._manager = manager
        manager.add_observer(self.observe)
        before_collection = getattr(self.backend, "before_collection", None)
        if callable(before_collection):
            before_collection(self.set_gauges)

    def observe(self, event: LaneEvent) -> None:
        lane = event.lane_id
        if lane is None:
            return
        labels = self._labels.get(lane)
        if labels is None:
            labels = self._labels[lane] = {"lane": lane}
        counter = COUNTERS.get(event.key)
        if counter is not None:
            self.backend.increment_counter(counter, 1, labels)
        command = event.command_id
        if command is not None:
            self._timings(event, command, labels)

    def set_gauges(self) -> None:
        """Set each lane's depth and running gauges from the manager now. ``snapshot``
        does it first; an exporter that reads the backend on its own schedule calls it
        there (``OtelMetricsBackend`` does, at each collection). Set at each event instead,
        they cost more than the counters and histograms together (bench_lanes)."""
        manager = self._manager
        if manager is None:
            return
        for info in manager.lanes():
            stats = manager.lane_stats(info.name)
            labels = {"lane": info.name}
            self.backend.set_gauge(DEPTH, stats.pending, labels)
            self.backend.set_gauge(RUNNING, stats.running, labels)

    def _timings(self, event: LaneEvent, command: str, labels: Labels) -> None:
        # Observers run as the event is emitted, so the monotonic clock read here is the
        # event's time (cheaper than subtracting the events' datetimes, and never
        # stepped by the wall clock).
        key = event.key
        if key == COMMAND_SUBMITTED:
            self._submitted[command] = self._ready[command] = time.monotonic()
        elif key == COMMAND_RETRY:
            self._ready[command] = time.monotonic()
        elif key == COMMAND_STARTED:
            ready = self._ready.pop(command, None)
            if ready is not None:
                self.backend.record_histogram(WAIT, time.monotonic() - ready, labels)
        elif key in (COMMAND_COMPLETED, COMMAND_FAILED):
            self._ready.pop(command, None)
            submitted = self._submitted.pop(command, None)
            if submitted is not None:
                self.backend.record_histogram(LATENCY, time.monotonic() - submitted, labels)

    async def snapshot(self) -> MetricsSnapshot:
        self.set_gauges()
        return await self.backend.snapshot()

    def reset(self) -> None:
        self.backend.reset()


__all__ = [
    "COUNTERS",
    "DEPTH",
    "LATENCY",
    "RUNNING",
    "WAIT",
    "HistogramSummary",
    "LocalMetricsBackend",
    "MetricsBackend",
    "MetricsSnapshot",
    "QueueMetrics",
    "series",
]
