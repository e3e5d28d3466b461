"""The benchmark app with OpenTelemetry on: ``lane_pg.tracing.enable`` with the SDK's
tracer and meter providers, spans batched to an exporter that drops them. It measures what
tracing costs a worker:

    LANE_PG_BENCH_WORKER_ARGS="--app benchmarks.apps_traced:app" benchmarks/run.py --only W3

(the last ``--app`` of the worker's command line wins)."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import lane_pg
from benchmarks.apps import app


class Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


tracer_provider = TracerProvider()
tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
lane_pg.tracing.enable(tracer_provider, MeterProvider())

__all__ = ["app"]
