"""The lane scheduler's metrics, alerts and monitor (OBS-1..5, LANE-10): what a user reads
from a snapshot, an alert callback, the OpenTelemetry SDK's in-memory reader and a monitor,
after real commands ran through a real ``LaneManager``."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from lane_pg.scheduler import (
    Alert,
    AlertManager,
    FunctionCommand,
    InvalidLaneConfig,
    LaneConfig,
    LaneManager,
    MetricsSnapshot,
    MonitorConfig,
    OtelMetricsBackend,
    QueueMetrics,
    QueueMonitor,
    RetryPolicy,
)
from lane_pg.scheduler.metrics import LocalMetricsBackend
from lane_pg.types import JSON
from tests.helpers import eventually


def ok(value: int) -> FunctionCommand:
    async def run() -> JSON:
        return value

    return FunctionCommand(run, "ok")


def boom() -> FunctionCommand:
    async def run() -> JSON:
        raise RuntimeError("boom")

    return FunctionCommand(run, "boom")


def blocked(gate: asyncio.Event) -> FunctionCommand:
    async def run() -> JSON:
        await gate.wait()
        return None

    return FunctionCommand(run, "blocked")


async def settle(futures: list[Any]) -> None:
    await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 5)


async def test_counts_and_latency_percentiles_per_lane_OBS_1() -> None:
    metrics = QueueMetrics.local()
    manager = (
        LaneManager.builder()
        .with_lane("query", LaneConfig(1, 4), 0)
        .with_lane("other", LaneConfig(1, 1), 1)
        .with_metrics(metrics)
        .build()
    )
    await manager.start()
    futures = [await manager.submit("query", ok(n)) for n in range(10)]
    futures += [await manager.submit("query", boom()) for _ in range(2)]
    futures.append(await manager.submit("other", ok(0)))
    await settle(futures)

    snapshot = await metrics.snapshot()
    assert [
        snapshot.counter(f"lane.commands.{what}", lane="query")
        for what in ("submitted", "completed", "failed", "retried")
    ] == [12, 10, 2, 0]
    assert snapshot.counter("lane.commands.completed", lane="other") == 1
    latency = snapshot.histogram("lane.command.latency_seconds", lane="query")
    assert latency is not None and latency.count == 12
    assert 0 <= latency.p50 <= latency.p90 <= latency.p95 <= latency.p99 < 5
    wait = snapshot.histogram("lane.command.wait_seconds", lane="query")
    assert wait is not None and wait.count == 12
    assert snapshot.gauge("lane.depth", lane="query") == 0
    assert snapshot.gauge("lane.running", lane="query") == 0
    await manager.stop()


async def test_retries_and_timeouts_are_counted_OBS_1() -> None:
    metrics = QueueMetrics.local()
    config = LaneConfig(1, 2).with_retry_policy(RetryPolicy(retries=1)).with_timeout(0.05)
    manager = LaneManager.builder().with_lane("q", config, 0).with_metrics(metrics).build()
    await manager.start()

    async def slow() -> JSON:
        await asyncio.sleep(5)
        return None

    futures = [
        await manager.submit("q", boom()),
        await manager.submit("q", FunctionCommand(slow, "slow")),
    ]
    await settle(futures)
    snapshot = await metrics.snapshot()
    assert snapshot.counter("lane.commands.retried", lane="q") == 2  # each tried twice
    assert snapshot.counter("lane.commands.timed_out", lane="q") == 2
    assert snapshot.counter("lane.commands.failed", lane="q") == 2
    wait = snapshot.histogram("lane.command.wait_seconds", lane="q")
    assert wait is not None and wait.count == 4  # every start, retries included
    await manager.stop()


class RecordingBackend:
    """A user's own backend: the five methods of the protocol."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float, dict[str, str]]] = []
        self.local = LocalMetricsBackend()

    def increment_counter(
        self, name: str, value: float = 1, labels: Mapping[str, str] | None = None
    ) -> None:
        self.calls.append(("counter", name, value, dict(labels or {})))
        self.local.increment_counter(name, value, labels)

    def set_gauge(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self.calls.append(("gauge", name, value, dict(labels or {})))

    def record_histogram(
        self, name: str, value: float, labels: Mapping[str, str] | None = None
    ) -> None:
        self.calls.append(("histogram", name, value, dict(labels or {})))

    async def snapshot(self) -> MetricsSnapshot:
        return await self.local.snapshot()

    def reset(self) -> None:
        self.local.reset()


async def test_a_custom_backend_receives_each_submit_and_complete_OBS_2() -> None:
    backend = RecordingBackend()
    metrics = QueueMetrics(backend)
    manager = (
        LaneManager.builder().with_lane("q", LaneConfig(1, 2), 0).with_metrics(metrics).build()
    )
    await manager.start()
    await settle([await manager.submit("q", ok(n)) for n in range(3)])

    counters = [(name, labels) for kind, name, _, labels in backend.calls if kind == "counter"]
    assert counters.count(("lane.commands.submitted", {"lane": "q"})) == 3
    assert counters.count(("lane.commands.completed", {"lane": "q"})) == 3
    assert (await metrics.snapshot()).counter("lane.commands.completed", lane="q") == 3
    metrics.reset()
    assert (await metrics.snapshot()).counters == {}
    await manager.stop()


async def test_the_otel_backend_exports_counters_and_histograms_with_the_lane_OBS_3() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    backend = OtelMetricsBackend(provider.get_meter("test"))
    manager = (
        LaneManager.builder()
        .with_lane("query", LaneConfig(1, 1), 0)
        .with_metrics(QueueMetrics(backend))
        .build()
    )
    await manager.start()
    await settle([await manager.submit("query", ok(1))])

    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = list(metric.data.data_points)
    for name in ("lane.commands.submitted", "lane.commands.completed"):
        [point] = points[name]
        assert (point.value, dict(point.attributes)) == (1, {"lane": "query"})
    [latency] = points["lane.command.latency_seconds"]
    assert latency.count == 1 and dict(latency.attributes) == {"lane": "query"}
    for gauge in ("lane.depth", "lane.running"):  # read from the manager at collection
        [point] = points[gauge]
        assert (point.value, dict(point.attributes)) == (0, {"lane": "query"})
    assert (await backend.snapshot()).counter("lane.commands.completed", lane="query") == 1
    await manager.stop()
    provider.shutdown()


def test_the_lane_features_import_without_opentelemetry_LANE_10() -> None:
    """In a fresh interpreter where ``opentelemetry`` cannot be imported: metrics, monitor
    and alerts work; only ``OtelMetricsBackend()`` raises, naming the extra to install."""
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
from lane_pg.scheduler import AlertManager, OtelMetricsBackend, QueueMetrics, QueueMonitor
QueueMetrics.local(); AlertManager().with_queue_depth_alerts(1, 2)
try:
    OtelMetricsBackend()
except ImportError as exc:
    print(exc)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'lane_pg[otel]'" in result.stdout


async def test_depth_alerts_fire_once_per_threshold_crossing_OBS_4() -> None:
    alerts: list[Alert] = []
    manager_alerts = AlertManager().with_queue_depth_alerts(warning=3, critical=5)
    manager_alerts.add_callback(alerts.append)
    manager = (
        LaneManager.builder()
        .with_lane("import", LaneConfig(1, 1), 0)
        .with_lane("other", LaneConfig(1, 1), 1)
        .with_alerts(manager_alerts)
        .build()
    )
    await manager.start()
    gate = asyncio.Event()
    futures = [await manager.submit("import", blocked(gate)) for _ in range(7)]  # 1 runs, 6 wait
    futures.append(await manager.submit("other", ok(1)))

    assert [(alert.level, alert.lane_id, alert.depth) for alert in alerts] == [
        ("warning", "import", 3),
        ("critical", "import", 5),
    ]
    assert all("'import'" in alert.message for alert in alerts)
    gate.set()
    await settle(futures)
    assert len(alerts) == 2  # draining never alerts
    await manager.stop()


async def test_a_raising_alert_callback_never_disturbs_the_scheduler_OBS_4(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(alert: Alert) -> None:
        raise ValueError("pager down")

    alerts = AlertManager().with_queue_depth_alerts(1, 1).add_callback(broken)
    manager = LaneManager.builder().with_lane("q", LaneConfig(1, 1), 0).with_alerts(alerts).build()
    await manager.start()
    with caplog.at_level(logging.ERROR, logger="lane_pg.scheduler"):
        assert await asyncio.wait_for(await manager.submit("q", ok(7)), 5) == 7
    assert "pager down" in caplog.text
    await manager.stop()


def test_alert_thresholds_are_validated_OBS_4() -> None:
    with pytest.raises(InvalidLaneConfig, match="critical"):
        AlertManager().with_queue_depth_alerts(warning=5, critical=3)
    with pytest.raises(InvalidLaneConfig, match="warning"):
        AlertManager().with_queue_depth_alerts(warning=0, critical=3)
    with pytest.raises(InvalidLaneConfig, match="interval"):
        MonitorConfig(interval=0)


async def test_the_monitor_reports_totals_and_warns_at_thresholds_OBS_5(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = (
        LaneManager.builder()
        .with_lane("a", LaneConfig(1, 2), 0)
        .with_lane("b", LaneConfig(1, 1), 1)
        .build()
    )
    await manager.start()
    config = MonitorConfig(interval=0.05, pending_warning_threshold=5, active_warning_threshold=3)
    monitor = QueueMonitor(manager, config)
    gate = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="lane_pg.scheduler"):
        await monitor.start()
        futures = [await manager.submit("a", blocked(gate)) for _ in range(6)]
        futures += [await manager.submit("b", blocked(gate)) for _ in range(4)]
        stats = await monitor.stats()
        assert (stats.total_pending, stats.total_active) == (7, 3)
        assert stats.lanes["a"].running == 2 and stats.lanes["b"].pending == 3
        await eventually(lambda: monitor.last is not None and monitor.last.total_pending == 7, 5)
        await eventually(lambda: "7 commands pending" in caplog.text, 5)
        await eventually(lambda: "3 commands active" in caplog.text, 5)
    gate.set()
    await settle(futures)
    await monitor.stop()
    await manager.stop()


def test_the_lane_benchmark_prints_its_three_figures_LANE_11() -> None:
    """The script runs and reports; its numbers are read by people, never asserted."""
    script = Path(__file__).resolve().parents[2] / "examples" / "bench_lanes.py"
    result = subprocess.run(
        [sys.executable, str(script), "--rounds", "2"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures = [json.loads(line) for line in result.stdout.splitlines()]
    assert [figure["figure"] for figure in figures] == [
        "10 lanes",
        "1 lane",
        "10 lanes, metrics on",
    ]
    assert all(figure["commands_per_s"] > 0 for figure in figures)
    assert "metrics_overhead_percent" in figures[2]
