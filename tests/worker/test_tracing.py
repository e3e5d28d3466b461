"""``lane_pg.tracing``: a job pushed in this process and run by a worker process gives one
trace, the worker's ``process`` span a child of the push's ``send`` span, both with the
messaging attributes (read from the SDK's in-memory exporter here and from the worker's
own exporter there)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import lane_pg
from lane_pg.facade import BackendDriver, Job, JobRegistry, QueueFacade
from lane_pg.postgres.backend import PostgresBackend
from tests.worker.conftest import Workers, queue_args


@dataclass
class Traced(Job):
    job_name = "traced"
    fail: bool = False


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    lane_pg.tracing.enable(provider)
    try:
        yield spans, provider
    finally:
        lane_pg.tracing.disable()
        provider.shutdown()


async def test_a_job_pushed_here_and_run_there_is_one_trace(
    workers: Workers,
    backend: PostgresBackend,
    queue_name: str,
    tmp_path: Path,
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    spans, provider = exporter
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, "postgres"))
    facade.route(Traced, queue=queue_name)
    with provider.get_tracer("app").start_as_current_span("signup") as signup:
        ok_id = await facade.push(Traced())
        failing_id = await facade.bulk([Traced(fail=True)])
    trace_id = format(signup.get_span_context().trace_id, "032x")
    sends = [span for span in spans.get_finished_spans() if span.name == f"send {queue_name}"]
    assert len(sends) == 2
    for send in sends:
        assert send.kind.name == "PRODUCER"
        assert send.attributes is not None
        assert send.attributes["messaging.system"] == "lane_pg"
        assert send.attributes["messaging.destination.name"] == queue_name
        assert send.attributes["messaging.operation.type"] == "send"
    assert sends[0].attributes is not None and sends[0].attributes["messaging.message.id"] == ok_id

    out = tmp_path / "spans.jsonl"
    await workers.run(
        *queue_args(queue_name), "--burst", app="tests.worker.otel_app:app",
        env={"LANE_PG_TEST_SPANS": str(out)},
    )  # fmt: skip
    processed = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {span["attributes"]["messaging.message.id"]: span for span in processed}
    ok, failed = by_id[ok_id], by_id[failing_id[0]]
    send_ids = {format(send.get_span_context().span_id, "016x") for send in sends}
    for span in (ok, failed):
        assert span["name"] == f"process {queue_name}" and span["kind"] == "CONSUMER"
        assert span["trace_id"] == trace_id  # one trace across the two processes
        assert span["parent"] in send_ids
        assert span["attributes"]["messaging.operation.type"] == "process"
        assert span["attributes"]["lane_pg.job.name"] == "traced"
        assert span["attributes"]["lane_pg.job.attempt"] == 1
    assert ok["status"] == "UNSET" and ok["events"] == []
    assert failed["status"] == "ERROR" and failed["events"] == ["exception"]


async def test_off_by_default_nothing_is_stored_with_the_job(
    backend: PostgresBackend, queue_name: str
) -> None:
    assert not lane_pg.tracing.enabled()
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, "postgres"))
    facade.route(Traced, queue=queue_name)
    job_id = await facade.push(Traced())
    stored = await backend.get_job(queue_name, job_id)
    assert stored is not None
    assert lane_pg.tracing.META_KEY not in stored.options.get("meta", {})
