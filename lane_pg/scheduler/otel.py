"""``OtelMetricsBackend``: the lane scheduler's metrics through the OpenTelemetry metrics
API (``pip install 'lane_pg[otel]'``, which brings ``opentelemetry-api`` only).

    from opentelemetry import metrics
    backend = OtelMetricsBackend(metrics.get_meter("myapp"))   # default: the global meter
    manager = LaneManager.builder().with_metrics(QueueMetrics(backend)).build()

Configure the SDK (a ``MeterProvider`` with an OTLP or Prometheus reader) as for any
OpenTelemetry instrumentation; without one the API's no-op meter drops everything.
Counters become OTel counters, histograms OTel histograms (seconds), gauges OTel
observable gauges (the lanes' depth and running counts are read from the manager at each
collection), each with the ``lane`` attribute. ``snapshot()`` answers from a local copy
kept beside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lane_pg.scheduler.metrics import (
    DEPTH,
    RUNNING,
    Labels,
    LocalMetricsBackend,
    MetricsSnapshot,
)

INSTALL_HINT = (
    "OtelMetricsBackend needs the OpenTelemetry API: pip install 'lane_pg[otel]'"
    " (and the opentelemetry-sdk with an exporter to send the metrics anywhere)"
)


def _metrics_api() -> Any:
    try:
        import opentelemetry.metrics as metrics
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return metrics


class OtelMetricsBackend:
    """A ``MetricsBackend`` writing to an OpenTelemetry ``Meter``."""

    def __init__(self, meter: Any = None) -> None:
        api = _metrics_api()
        self._api = api
        self.meter = meter if meter is not None else api.get_meter("lane_pg.scheduler")
        self._instruments: dict[tuple[str, str], Any] = {}
        self._local = LocalMetricsBackend()
        self._gauges: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._refresh: Callable[[], None] | None = None

    def before_collection(self, refresh: Callable[[], None]) -> None:
        """Call ``refresh`` (which sets the gauges) whenever the SDK collects gauges."""
        self._refresh = refresh
        for name in (DEPTH, RUNNING):
            self._observable(name)

    def _observable(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        values = self._gauges.get(name)
        if values is None:
            values = self._gauges[name] = {}

            def observe(options: Any) -> Iterable[Any]:
                if self._refresh is not None:
                    self._refresh()
                return [
                    self._api.Observation(value, attributes=dict(labels))
                    for labels, value in self._gauges[name].items()
                ]

            self.meter.create_observable_gauge(name, callbacks=[observe], unit="1")
        return values

    def _instrument(self, kind: str, name: str) -> Any:
        instrument = self._instruments.get((kind, name))
        if instrument is None:
            if kind == "counter":
                instrument = self.meter.create_counter(name, unit="1")
            else:
                instrument = self.meter.create_histogram(name, unit="s")
            self._instruments[(kind, name)] = instrument
        return instrument

    def increment_counter(self, name: str, value: float = 1, labels: Labels | None = None) -> None:
        self._instrument("counter", name).add(value, attributes=dict(labels or {}))
        self._local.increment_counter(name, value, labels)

    def set_gauge(self, name: str, value: float, labels: Labels | None = None) -> None:
        self._observable(name)[tuple(sorted((labels or {}).items()))] = value
        self._local.set_gauge(name, value, labels)

    def record_histogram(self, name: str, value: float, labels: Labels | None = None) -> None:
        self._instrument("histogram", name).record(value, attributes=dict(labels or {}))
        self._local.record_histogram(name, value, labels)

    async def snapshot(self) -> MetricsSnapshot:
        return await self._local.snapshot()

    def reset(self) -> None:
        """Resets the local copy; what OpenTelemetry exported stays exported."""
        self._local.reset()


__all__ = ["INSTALL_HINT", "OtelMetricsBackend"]
