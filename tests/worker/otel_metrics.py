"""The data points of an OpenTelemetry SDK in-memory metric reader as plain JSON values
(the trace tests compare them, and the worker app writes them to a file at its exit)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def metrics_of(reader: InMemoryMetricReader) -> dict[str, list[dict[str, Any]]]:
    """Each instrument's data points: attributes, and the value or the count and sum."""
    found: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, [])
                for point in metric.data.data_points:
                    entry: dict[str, Any] = {"attributes": dict(point.attributes or {})}
                    if hasattr(point, "value"):
                        entry["value"] = point.value
                    else:
                        entry["count"], entry["sum"] = point.count, point.sum
                    points.append(entry)
    return found
