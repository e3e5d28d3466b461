"""OpenTelemetry traces of jobs, from the push to the run (``pip install 'lane_pg[otel]'``).

    from opentelemetry.sdk.trace import TracerProvider      # your SDK set-up, as usual
    lane_pg.tracing.enable()                                # in the pushing and the worker process

Once enabled, a push through ``Q`` (``push``, ``later``, ``bulk`` and the rest) records a
``send {queue}`` span (kind PRODUCER) and stores its context with the job (W3C
``traceparent`` in the job's ``options.meta.trace``); the worker that runs the job, in any
process, records ``process {queue}`` (kind CONSUMER) as a child of it, with an exception
and an error status when the attempt fails. Attributes follow OpenTelemetry's messaging
conventions (``messaging.system = "lane_pg"``, ``messaging.destination.name``,
``messaging.operation.type``, ``messaging.message.id``) plus ``lane_pg.job.name`` and
``lane_pg.job.attempt``.

Off by default: until ``enable()`` no span is made and nothing is stored, so a process
that has the API installed but does not trace pays nothing per job. This module imports
nothing of lane_pg, so every layer may use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

SYSTEM = "lane_pg"
META_KEY = "trace"
"""``options.meta`` key holding the pushing span's context (``traceparent``, ...)."""

_tracer: Any = None


def enable(tracer_provider: Any = None) -> None:
    """Trace pushes and runs with ``tracer_provider`` (default: the global one)."""
    global _tracer
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError(
            "lane_pg.tracing needs the OpenTelemetry API: pip install 'lane_pg[otel]'"
        ) from exc
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    _tracer = provider.get_tracer("lane_pg")


def disable() -> None:
    global _tracer
    _tracer = None


def enabled() -> bool:
    return _tracer is not None


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


@contextlib.contextmanager
def sending(queue: str, name: str, count: int = 1) -> Iterator[SendSpan | None]:
    """The span of one push (or of a bulk push of ``count`` jobs); None when off."""
    tracer = _tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    attributes = _attributes(queue, "send", name)
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    with tracer.start_as_current_span(
        f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield SendSpan(span)


class SendSpan:
    """The current push's span: ``carrier()`` is what a job stores, ``sent(id)`` names it."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def carrier(self) -> dict[str, str]:
        from opentelemetry.propagate import inject

        carrier: dict[str, str] = {}
        inject(carrier)
        return carrier

    def sent(self, job_ids: list[str]) -> None:
        if len(job_ids) == 1:
            self.span.set_attribute("messaging.message.id", job_ids[0])


@contextlib.contextmanager
def processing(queue: str, job_id: str, name: str, attempt: int, meta: object) -> Iterator[None]:
    """The span of one attempt of a job, a child of its push's span when the job carries
    one; an exception raised inside is recorded on it (and raised on)."""
    tracer = _tracer
    if tracer is None:
        yield
        return
    from opentelemetry.propagate import extract
    from opentelemetry.trace import SpanKind, Status, StatusCode

    carrier = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    parent = extract(carrier) if isinstance(carrier, Mapping) else None
    attributes = _attributes(queue, "process", name)
    attributes["messaging.message.id"] = job_id
    attributes["lane_pg.job.attempt"] = attempt
    with tracer.start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


__all__ = ["META_KEY", "SendSpan", "disable", "enable", "enabled", "processing", "sending"]
