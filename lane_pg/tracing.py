"""OpenTelemetry traces and metrics of jobs, from the push to the written outcome (``pip
install 'lane_pg[otel]'``).

    from opentelemetry.sdk.trace import TracerProvider      # your SDK set-up, as usual
    lane_pg.tracing.enable()                                # in the pushing and the worker process

Once enabled, a push through ``Q`` (``push``, ``later``, ``bulk`` and the rest), or an
add on the caller's connection (``lane_pg.add_job``, ``add_jobs``, their ``_sync`` twins), records a
``send {queue}`` span (kind PRODUCER) and stores its context with the job (W3C
``traceparent`` in the job's ``options.meta.trace``). A bulk push records one ``send``
span (``messaging.batch.message_count``) and, as its children, one ``create {queue}`` span
(kind PRODUCER) per job, whose context that job stores. The worker that runs the job, in
any process, records ``process {queue}`` (kind CONSUMER) as a child of the stored context,
with an exception and an error status when the attempt fails; then ``settle {queue}``
(kind CLIENT) around the write of the attempt's outcome, a child of ``process`` (the
worker writes outcomes in batches after the runs ended: each job of a batch gets a settle
span of its own over the batch's write), with ``lane_pg.job.outcome``: ``completed``,
``retried``, ``failed`` (for good), ``released`` (given back), ``deleted``, ``lost`` (the
lease was lost, nothing written), ``pending_dependencies`` (a flow parent's completion
refused, its failure written next) or ``unwritten`` (the write raised; error status).
Attributes follow OpenTelemetry's messaging conventions (``messaging.system = "lane_pg"``,
``messaging.destination.name``, ``messaging.operation.type``, ``messaging.message.id``)
plus ``lane_pg.job.name`` and ``lane_pg.job.attempt``.

The same ``enable()`` records the messaging metrics on its meter provider (default: the
global one): ``messaging.client.sent.messages`` (counter, per job pushed),
``messaging.client.consumed.messages`` (counter, per attempt run),
``messaging.process.duration`` (histogram, seconds, per attempt) and
``lane_pg.job.wait.duration`` (histogram, seconds, from the job's ``available_at`` to its
claim), each with ``messaging.system``, ``messaging.destination.name`` (the queue),
``messaging.operation.name`` and, for a push or an attempt that raised, ``error.type``
(the exception's class). Never a job id: a series per job would grow without end.

Off by default: until ``enable()`` no span is made, nothing is counted and nothing is
stored, so a process that has the API installed but does not trace pays one global read
per push and per job. This module imports nothing of lane_pg, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

SYSTEM = "lane_pg"
META_KEY = "trace"
"""``options.meta`` key holding the pushing span's context (``traceparent``, ...)."""
OUTCOME = "lane_pg.job.outcome"
"""The settle span's attribute: what the write did (see the module docstring)."""
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
"""The messaging conventions' advice for the duration histograms (seconds)."""


class _Telemetry:
    """What ``enable()`` made: the tracer and the four instruments."""

    __slots__ = ("consumed", "process_duration", "sent", "tracer", "wait_duration")

    def __init__(self, tracer: Any, meter: Any) -> None:
        self.tracer = tracer
        self.sent = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Jobs pushed (a bulk push counts each of its jobs)",
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Attempts of jobs run by the worker",
        )
        self.process_duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="How long each attempt's handler ran",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.wait_duration = meter.create_histogram(
            "lane_pg.job.wait.duration",
            unit="s",
            description="From the job's available_at (ready) to its claim",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )


_on: _Telemetry | None = None


def enable(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Trace pushes, runs and settlements with ``tracer_provider`` and count them on
    ``meter_provider`` (each by default the global one)."""
    global _on
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:
        raise ImportError(
            "lane_pg.tracing needs the OpenTelemetry API: pip install 'lane_pg[otel]'"
        ) from exc
    tracers = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    _on = _Telemetry(tracers.get_tracer("lane_pg"), meters.get_meter("lane_pg"))


def disable() -> None:
    global _on
    _on = None


def enabled() -> bool:
    return _on is not None


def _attributes(queue: str, operation: str, name: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
    }
    if name is not None:
        attributes["lane_pg.job.name"] = name
    return attributes


def _measured(queue: str, operation: str, error: BaseException | None = None) -> dict[str, Any]:
    """A metric's attributes: bounded (no job id, no job name)."""
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.name": operation,
    }
    if error is not None:
        attributes["error.type"] = error_type(error)
    return attributes


def error_type(error: BaseException) -> str:
    """``error.type``: the exception's class, with its module unless a builtin."""
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _failed(span: Any, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.set_attribute("error.type", error_type(error))


@contextlib.contextmanager
def sending(queue: str, name: str, count: int | None = None) -> Iterator[SendSpan | None]:
    """The span of one push, or of a bulk push of ``count`` jobs (each then gets a
    ``create`` span from ``SendSpan.create``); None when off."""
    on = _on
    if on is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    attributes = _attributes(queue, "send", name)
    if count is not None:
        attributes["messaging.batch.message_count"] = count
    error: BaseException | None = None
    handle = None
    try:
        with on.tracer.start_as_current_span(
            f"send {queue}",
            kind=SpanKind.PRODUCER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            handle = SendSpan(on, span, queue, name)
            try:
                yield handle
            except BaseException as exc:
                error = exc
                _failed(span, exc)
                raise
    finally:
        if handle is not None:
            handle.close()
        on.sent.add(1 if count is None else count, _measured(queue, "send", error))


class SendSpan:
    """The current push's span: ``carrier()`` is what a job stores, ``create()`` the
    context of one job of a bulk push, ``sent(ids)`` names them."""

    def __init__(self, on: _Telemetry, span: Any, queue: str, name: str) -> None:
        self.span = span
        self._on = on
        self._queue = queue
        self._name = name
        self._creates: list[Any] = []

    def carrier(self) -> dict[str, str]:
        from opentelemetry.propagate import inject

        carrier: dict[str, str] = {}
        inject(carrier)
        return carrier

    def create(self) -> dict[str, str]:
        """A ``create`` span for one job of a bulk push, a child of this ``send`` span, and
        the carrier of its context (what that job stores); it ends at ``sent``."""
        from opentelemetry.propagate import inject
        from opentelemetry.trace import SpanKind, set_span_in_context

        span = self._on.tracer.start_span(
            f"create {self._queue}",
            kind=SpanKind.PRODUCER,
            attributes=_attributes(self._queue, "create", self._name),
        )
        self._creates.append(span)
        carrier: dict[str, str] = {}
        inject(carrier, context=set_span_in_context(span))
        return carrier

    def sent(self, job_ids: list[str]) -> None:
        if len(job_ids) == 1:
            self.span.set_attribute("messaging.message.id", job_ids[0])
        creates, self._creates = self._creates, []
        for span, job_id in zip(creates, job_ids, strict=False):
            span.set_attribute("messaging.message.id", job_id)
            span.end()
        for span in creates[len(job_ids) :]:
            span.end()

    def close(self) -> None:
        """End the ``create`` spans a failed push left open."""
        creates, self._creates = self._creates, []
        for span in creates:
            span.end()


@contextlib.contextmanager
def processing(
    queue: str,
    job_id: str,
    name: str,
    attempt: int,
    meta: object,
    waited: float | None = None,
) -> Iterator[object]:
    """The span of one attempt of a job, a child of its push's span when the job carries
    one; an exception raised inside is recorded on it (and raised on). Yields the span's
    context, the parent of the attempt's ``settle`` span (None when off). ``waited``: the
    seconds from the job's ``available_at`` to its claim, when known."""
    on = _on
    if on is None:
        yield None
        return
    from opentelemetry.propagate import extract
    from opentelemetry.trace import SpanKind, set_span_in_context

    carrier = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    parent = extract(carrier) if isinstance(carrier, Mapping) else None
    attributes = _attributes(queue, "process", name)
    attributes["messaging.message.id"] = job_id
    attributes["lane_pg.job.attempt"] = attempt
    if waited is not None:
        on.wait_duration.record(max(waited, 0.0), _measured(queue, "process"))
    started = time.perf_counter()
    error: BaseException | None = None
    with on.tracer.start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield set_span_in_context(span)
        except BaseException as exc:
            error = exc
            _failed(span, exc)
            raise
        finally:
            measured = _measured(queue, "process", error)
            on.consumed.add(1, measured)
            on.process_duration.record(time.perf_counter() - started, measured)


def clock() -> int:
    """Now, as a span's start time (``settled``)."""
    return time.time_ns()


def settled(
    parent: object,
    queue: str,
    job_id: str,
    outcome: str,
    started: int,
    error: BaseException | None = None,
) -> None:
    """A ``settle`` span, child of ``parent`` (what ``processing`` yielded), from
    ``started`` (``clock()``) to now: a write of outcomes that already happened (a batch
    of them, each job getting its own span)."""
    on = _on
    if on is None or parent is None:
        return
    from opentelemetry.trace import SpanKind

    attributes = _attributes(queue, "settle", None)
    attributes["messaging.message.id"] = job_id
    attributes[OUTCOME] = outcome
    span = on.tracer.start_span(
        f"settle {queue}",
        context=parent,  # a Context, from processing
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=started,
    )
    if error is not None:
        _failed(span, error)
    span.end()


@contextlib.contextmanager
def settling(parent: object, queue: str, job_id: str, outcome: str) -> Iterator[None]:
    """A ``settle`` span around one job's own write (a give-back, a delete), child of
    ``parent``; when the write raises its outcome is ``unwritten``. Nothing when off or
    without a parent."""
    started = clock() if parent is not None and _on is not None else 0
    try:
        yield
    except BaseException as exc:
        if started:
            settled(parent, queue, job_id, "unwritten", started, exc)
        raise
    if started:
        settled(parent, queue, job_id, outcome, started)


__all__ = [
    "META_KEY",
    "OUTCOME",
    "SendSpan",
    "clock",
    "disable",
    "enable",
    "enabled",
    "error_type",
    "processing",
    "sending",
    "settled",
    "settling",
]
