"""A worker app that traces (``lane_pg.tracing``) and writes every finished span, as a JSON
line, to the file ``$LANE_PG_TEST_SPANS`` names, and at exit its metrics (one JSON document:
each instrument's data points) to ``$LANE_PG_TEST_METRICS`` when set: the other process of
the trace tests."""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import lane_pg
from lane_pg import App
from lane_pg.types import JSON, JobRow
from lane_pg.worker import JobContext
from tests.worker.otel_metrics import metrics_of


class FileExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                context = span.get_span_context()
                out.write(
                    json.dumps(
                        {
                            "name": span.name,
                            "kind": span.kind.name,
                            "trace_id": format(context.trace_id if context else 0, "032x"),
                            "span_id": format(context.span_id if context else 0, "016x"),
                            "parent": None
                            if span.parent is None
                            else format(span.parent.span_id, "016x"),
                            "attributes": dict(span.attributes or {}),
                            "status": span.status.status_code.name,
                            "events": [event.name for event in span.events],
                        }
                    )
                    + "\n"
                )
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter(os.environ["LANE_PG_TEST_SPANS"])))
reader = InMemoryMetricReader()
lane_pg.tracing.enable(provider, MeterProvider(metric_readers=[reader]))


@atexit.register
def _write_metrics() -> None:
    path = os.environ.get("LANE_PG_TEST_METRICS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(metrics_of(reader), out)


app = App()


@app.processor("traced")
async def traced(job: JobRow, ctx: JobContext) -> JSON:
    if isinstance(job.data, dict) and job.data.get("fail"):
        raise RuntimeError("card declined")
    return "ok"
