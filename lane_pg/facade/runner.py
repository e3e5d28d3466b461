"""Running typed jobs on the worker (PUSH-1, PUSH-8): one processor per registered class.

The worker claims a stored job by name like any other; the processor for a job class
rebuilds the instance from the job's data and awaits ``handle()``. Its return value is the
job's result; an exception fails the attempt under the job's stored retry settings, the
same path as for ``@app.processor`` functions. Data that no longer fits the class (a field
renamed since the push) can never run, so it fails the job for good.
"""

from __future__ import annotations

from lane_pg.errors import InvalidPayload, UnrecoverableJobError
from lane_pg.facade.envelope import META_CONNECTION
from lane_pg.facade.events import Events, JobExceptionOccurred, JobProcessed, JobProcessing
from lane_pg.facade.job import _CURRENT, Job, decode_fields
from lane_pg.facade.registry import JobRegistry
from lane_pg.types import JSON, JobRow
from lane_pg.worker.context import JobContext


def job_connection(job: JobRow, fallback: str) -> str:
    """The connection label a push stored on ``job`` (``options.meta``), else ``fallback``."""
    meta = job.options.get("meta")
    if isinstance(meta, dict):
        label = meta.get(META_CONNECTION)
        if isinstance(label, str):
            return label
    return fallback


class TypedJobProcessor:
    """The worker's processor for one job class (a ``JobProcessor``)."""

    def __init__(self, cls: type[Job], events: Events, connection: str) -> None:
        self.cls = cls
        self.events = events
        self.connection = connection
        """The name of the connection the worker drains (CONN-13)."""

    def __repr__(self) -> str:
        return f"TypedJobProcessor({self.cls.__qualname__})"

    async def process(self, job: JobRow, ctx: JobContext) -> JSON:
        try:
            instance = decode_fields(self.cls, job.data)
        except InvalidPayload as exc:
            raise UnrecoverableJobError(str(exc)) from exc
        attempt = job.attempts_started
        events = self.events
        await events.emit(JobProcessing(self.connection, job.queue, job.name, job.id, attempt))
        token = _CURRENT.set(ctx)
        try:
            result = await instance.handle()
        except Exception as exc:
            await events.emit(
                JobExceptionOccurred(self.connection, job.queue, job.name, job.id, attempt, exc)
            )
            raise
        finally:
            _CURRENT.reset(token)
        await events.emit(JobProcessed(self.connection, job.queue, job.name, job.id, attempt))
        return result


def typed_processors(
    registry: JobRegistry, events: Events, connection: str
) -> dict[str, TypedJobProcessor]:
    """A processor for every registered class, by job name."""
    return {cls.job_name: TypedJobProcessor(cls, events, connection) for cls in registry}
