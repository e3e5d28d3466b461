"""``lane_pg.tracing``: a job pushed in this process and run by a worker process gives one
trace, the worker's ``process`` span a child of the push's ``send`` span (of its own
``create`` span for a bulk push), its ``settle`` span a child of ``process``, all with the
messaging attributes (read from the SDK's in-memory exporter here and from the worker's
own exporter there); and the messaging metrics of both sides (the SDK's in-memory reader
here, the worker's written at its exit)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import lane_pg
from lane_pg.errors import DeleteRequested, ReleaseRequested
from lane_pg.facade import BackendDriver, Job, JobRegistry, QueueFacade
from lane_pg.postgres.backend import PostgresBackend
from lane_pg.types import JSON, JobRow, Lane
from lane_pg.worker import JobContext
from tests.worker.conftest import Workers, queue_args
from tests.worker.otel_metrics import metrics_of


@dataclass
class Traced(Job):
    job_name = "traced"
    fail: bool = False


@dataclass
class TracedOnce(Job):
    job_name = "traced"
    max_tries: ClassVar[int] = 1
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

    creates = [span for span in spans.get_finished_spans() if span.name.startswith("create ")]
    assert len(creates) == 1  # the bulk push's one job
    create_id = format(creates[0].get_span_context().span_id, "016x")

    out = tmp_path / "spans.jsonl"
    await workers.run(
        *queue_args(queue_name), "--burst", app="tests.worker.otel_app:app",
        env={"LANE_PG_TEST_SPANS": str(out)},
    )  # fmt: skip
    processed = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {
        span["attributes"]["messaging.message.id"]: span
        for span in processed
        if span["name"].startswith("process ")
    }
    ok, failed = by_id[ok_id], by_id[failing_id[0]]
    assert ok["parent"] == format(sends[0].get_span_context().span_id, "016x")
    assert failed["parent"] == create_id
    for span in (ok, failed):
        assert span["name"] == f"process {queue_name}" and span["kind"] == "CONSUMER"
        assert span["trace_id"] == trace_id  # one trace across the two processes
        assert span["attributes"]["messaging.operation.type"] == "process"
        assert span["attributes"]["lane_pg.job.name"] == "traced"
        assert span["attributes"]["lane_pg.job.attempt"] == 1
    assert ok["status"] == "UNSET" and ok["events"] == []
    assert failed["status"] == "ERROR" and failed["events"] == ["exception"]
    assert failed["attributes"]["error.type"] == "RuntimeError"


@pytest.fixture
def meter() -> Iterator[InMemoryMetricReader]:
    """Tracing on (no span kept) with this process's metrics on an in-memory reader."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    lane_pg.tracing.enable(TracerProvider(), provider)
    try:
        yield reader
    finally:
        lane_pg.tracing.disable()
        provider.shutdown()


def points(metrics: dict[str, list[dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    return metrics.get(name, [])


async def test_a_bulk_push_has_a_create_span_per_job_each_the_parent_of_its_run(
    workers: Workers,
    backend: PostgresBackend,
    queue_name: str,
    tmp_path: Path,
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    spans, _ = exporter
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, "postgres"))
    facade.route(TracedOnce, queue=queue_name)
    ids = await facade.bulk([TracedOnce(), TracedOnce(), TracedOnce(fail=True)])
    finished = spans.get_finished_spans()
    (send,) = [span for span in finished if span.name == f"send {queue_name}"]
    creates = [span for span in finished if span.name == f"create {queue_name}"]
    assert send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in send.attributes
    send_context = send.get_span_context()
    assert send_context is not None
    create_of: dict[str, str] = {}
    for create in creates:
        assert create.kind.name == "PRODUCER"
        assert create.parent is not None and create.parent.span_id == send_context.span_id
        assert create.attributes is not None
        assert create.attributes["messaging.operation.type"] == "create"
        job_id = str(create.attributes["messaging.message.id"])
        context = create.get_span_context()
        assert context is not None
        create_of[job_id] = format(context.span_id, "016x")
    assert sorted(create_of) == sorted(ids)  # one create span per job, each named

    out = tmp_path / "spans.jsonl"
    await workers.run(
        *queue_args(queue_name), "--burst", app="tests.worker.otel_app:app",
        env={"LANE_PG_TEST_SPANS": str(out)},
    )  # fmt: skip
    recorded = [json.loads(line) for line in out.read_text().splitlines()]
    process = {
        span["attributes"]["messaging.message.id"]: span
        for span in recorded
        if span["name"] == f"process {queue_name}"
    }
    settles = [span for span in recorded if span["name"] == f"settle {queue_name}"]
    assert sorted(process) == sorted(ids)
    for job_id, span in process.items():
        assert span["parent"] == create_of[job_id]  # its own create span, across processes
        assert span["trace_id"] == format(send_context.trace_id, "032x")
    # One settle span per job, a child of its process span, with what the write did.
    assert len(settles) == 3
    outcome_of = {}
    for settle in settles:
        job_id = settle["attributes"]["messaging.message.id"]
        assert settle["kind"] == "CLIENT"
        assert settle["parent"] == process[job_id]["span_id"]
        assert settle["attributes"]["messaging.operation.type"] == "settle"
        outcome_of[job_id] = settle["attributes"]["lane_pg.job.outcome"]
    assert outcome_of == {ids[0]: "completed", ids[1]: "completed", ids[2]: "failed"}


async def test_messaging_metrics_count_pushes_runs_and_failures(
    workers: Workers,
    backend: PostgresBackend,
    queue_name: str,
    tmp_path: Path,
    meter: InMemoryMetricReader,
) -> None:
    facade = QueueFacade(registry=JobRegistry())
    facade.set_driver(BackendDriver(backend, "postgres"))
    facade.route(TracedOnce, queue=queue_name)
    await facade.bulk([TracedOnce(), TracedOnce(fail=True)])
    await facade.push(TracedOnce())
    (sent,) = points(metrics_of(meter), "messaging.client.sent.messages")
    assert sent == {
        "attributes": {
            "messaging.system": "lane_pg",
            "messaging.destination.name": queue_name,
            "messaging.operation.name": "send",
        },
        "value": 3,
    }

    out, measured = tmp_path / "spans.jsonl", tmp_path / "metrics.json"
    await workers.run(
        *queue_args(queue_name), "--burst", app="tests.worker.otel_app:app",
        env={"LANE_PG_TEST_SPANS": str(out), "LANE_PG_TEST_METRICS": str(measured)},
    )  # fmt: skip
    metrics = json.loads(measured.read_text())
    base = {
        "messaging.system": "lane_pg",
        "messaging.destination.name": queue_name,
        "messaging.operation.name": "process",
    }
    failed = {**base, "error.type": "RuntimeError"}
    consumed = points(metrics, "messaging.client.consumed.messages")
    assert sorted(consumed, key=lambda p: len(p["attributes"])) == [
        {"attributes": base, "value": 2},
        {"attributes": failed, "value": 1},
    ]
    durations = {len(p["attributes"]): p for p in points(metrics, "messaging.process.duration")}
    assert durations[len(base)]["attributes"] == base and durations[len(base)]["count"] == 2
    assert durations[len(failed)]["attributes"] == failed
    assert durations[len(failed)]["count"] == 1
    (waited,) = points(metrics, "lane_pg.job.wait.duration")
    assert waited["attributes"] == base and waited["count"] == 3 and waited["sum"] >= 0
    for name, found in metrics.items():  # never a job id on a metric
        for point in found:
            assert not any("id" in key.split(".")[-1] for key in point["attributes"]), name


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


async def test_a_give_back_and_a_delete_are_settled_too(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """In this process, on the memory backend: a released attempt, a deleted job and the
    completed rerun each get a settle span under their own process span."""
    spans, _ = exporter
    app = lane_pg.App("memory://", lanes=[Lane("q")])
    runs = []

    @app.processor("release-once")
    async def release_once(job: JobRow, ctx: JobContext) -> JSON:
        runs.append(job.id)
        if len(runs) == 1:
            raise ReleaseRequested(0, "not yet")
        return "ok"

    @app.processor("delete")
    async def delete(job: JobRow, ctx: JobContext) -> JSON:
        raise DeleteRequested("not wanted")

    released = await app.add_job("q", "release-once")
    deleted = await app.add_job("q", "delete")
    await app.run_worker(burst=True)
    finished = spans.get_finished_spans()
    process = {
        span.context.span_id: span for span in finished if span.name == "process q" and span.context
    }
    settled = []
    for span in finished:
        if span.name == "settle q":
            assert span.parent is not None and span.attributes is not None
            parent = process[span.parent.span_id]
            assert parent.attributes is not None
            job_id = span.attributes["messaging.message.id"]
            assert parent.attributes["messaging.message.id"] == job_id
            settled.append((job_id, span.attributes["lane_pg.job.outcome"]))
    assert sorted(settled) == sorted(
        [(released.id, "released"), (deleted.id, "deleted"), (released.id, "completed")]
    )


async def test_an_add_inside_the_callers_transaction_is_traced_to_its_run(
    workers: Workers,
    backend: PostgresBackend,
    effects_dsn: str,
    queue_name: str,
    tmp_path: Path,
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    import asyncpg

    from lane_pg import JobOptions, JobSpec, add_job, add_jobs

    spans, _ = exporter
    conn = await asyncpg.connect(effects_dsn)
    try:
        async with conn.transaction():
            one = await add_job(conn, queue_name, "traced", {}, JobOptions(meta={"mine": 1}))
            many = await add_jobs(conn, queue_name, [JobSpec("traced", {})] * 2)
    finally:
        await conn.close()
    assert one.options["meta"]["mine"] == 1  # the caller's meta is kept beside the trace
    finished = spans.get_finished_spans()
    sends = [s for s in finished if s.name == f"send {queue_name}"]
    creates = [s for s in finished if s.name == f"create {queue_name}"]
    assert len(sends) == 2 and len(creates) == 2
    assert sends[0].attributes is not None
    assert sends[0].attributes["messaging.message.id"] == one.id
    assert sends[1].attributes is not None
    assert sends[1].attributes["messaging.batch.message_count"] == 2
    parent_of = {one.id: format(sends[0].get_span_context().span_id, "016x")}
    for job, create in zip(many, creates, strict=True):
        assert create.attributes is not None
        assert create.attributes["messaging.message.id"] == job.id
        parent_of[job.id] = format(create.get_span_context().span_id, "016x")

    out = tmp_path / "spans.jsonl"
    await workers.run(
        *queue_args(queue_name), "--burst", app="tests.worker.otel_app:app",
        env={"LANE_PG_TEST_SPANS": str(out)},
    )  # fmt: skip
    processed = {
        span["attributes"]["messaging.message.id"]: span
        for span in map(json.loads, out.read_text().splitlines())
        if span["name"].startswith("process ")
    }
    assert {job_id: processed[job_id]["parent"] for job_id in parent_of} == parent_of
