"""``JobContext``: what a processor may do besides returning a result; ``Processor``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeAlias, runtime_checkable

from lane_pg.backend import Administrator, Flows
from lane_pg.errors import ConfigurationError, JobNotFound, LeaseLost, LockMismatch
from lane_pg.flows import ChildRef, FlowJob
from lane_pg.types import JSON, ClaimedJob, JobRow


class ContextBackend(Administrator, Flows, Protocol):
    """What a job's context calls: the job's own writes and its flow."""


class JobContext:
    """What a processor may do besides returning a result (WORK-8, WORK-9, RETRY-8).

    Every write carries the claim's lock token, so the database refuses it once another
    run owns the job: a handler whose lease ran out while it was frozen (a GC pause, a
    blocked event loop) but which has not been told yet gets ``LeaseLost``, the job is left
    as its new owner wrote it, and the context counts as lost from then on.
    """

    def __init__(self, backend: ContextBackend, job: ClaimedJob, worker_id: str) -> None:
        self._backend = backend
        self.job = job
        self.worker_id = worker_id
        self._lease_lost = False
        self._discard_retry = False

    @property
    def backend(self) -> ContextBackend:
        """The backend the job was claimed from (the facade's runner frees unique locks and
        checks debounce windows on it)."""
        return self._backend

    def has_lost_lease(self) -> bool:
        """True once this worker no longer holds the job: stop side effects."""
        return self._lease_lost

    def ensure_lease(self) -> None:
        """Raise ``LeaseLost`` if the lease was lost; call before an irreversible step."""
        if self._lease_lost:
            raise LeaseLost(self._lost_message())

    def discard_retry(self) -> None:
        """Make the failure this run ends with terminal (no further attempts)."""
        self._discard_retry = True

    @property
    def retry_discarded(self) -> bool:
        return self._discard_retry

    def mark_lease_lost(self) -> None:
        """Called by the worker when renewal finds the lease gone (and by a refused write)."""
        self._lease_lost = True

    async def update_progress(self, progress: JSON) -> None:
        async with self._fenced():
            await self._backend.update_job_progress(
                self.job.queue, self.job.id, progress, token=self.job.lock_token
            )

    async def log(self, message: str) -> None:
        async with self._fenced():
            await self._backend.add_job_log(
                self.job.queue, self.job.id, message, token=self.job.lock_token
            )

    async def update_data(self, data: JSON) -> None:
        async with self._fenced():
            await self._backend.update_job_data(
                self.job.queue, self.job.id, data, token=self.job.lock_token
            )

    async def children_values(self) -> dict[ChildRef, JSON]:
        """The return values of this job's completed flow children (FLOW-22), e.g. for a
        parent that combines them; {} for a job without children."""
        return await self._backend.get_flow_children_values(self.job.queue, self.job.id)

    async def add_children(self, children: list[FlowJob]) -> None:
        """Add flow children and wait for them (FLOW-14): the job leaves ``active`` for
        ``waiting-children`` and runs again, as the same attempt, once they are done. The
        processor should return right after; its result is not written (the worker sees
        the lease gone)."""
        async with self._fenced():
            await self._backend.add_flow_children(
                self.job.queue, self.job.id, self.job.lock_token, children
            )
        self.mark_lease_lost()  # the run is over: nothing else it does is written

    @asynccontextmanager
    async def _fenced(self) -> AsyncIterator[None]:
        """Refuse a write once the loss is known; turn the database's refusal of a stale
        token (or of a job that is gone) into ``LeaseLost`` and remember it."""
        self.ensure_lease()
        try:
            yield
        except (LockMismatch, JobNotFound) as exc:
            self.mark_lease_lost()
            raise LeaseLost(self._lost_message()) from exc

    def _lost_message(self) -> str:
        return (
            f"job {self.job.id} of queue {self.job.queue}: lease lost; another worker may"
            " be running it"
        )


Processor: TypeAlias = Callable[[JobRow, JobContext], Awaitable[JSON]]
"""``async def handler(job, ctx) -> JSON``: the job is the ``ClaimedJob`` of this run."""


@runtime_checkable
class JobProcessor(Protocol):
    """A processor as an object (WORK-2): anything with ``async process(job, ctx)``."""

    def process(self, job: JobRow, ctx: JobContext) -> Awaitable[JSON]: ...


ProcessorLike: TypeAlias = Processor | JobProcessor
"""What a worker accepts as a processor: a function or a ``JobProcessor``."""


def as_processor(processor: ProcessorLike) -> Processor:
    """The function a worker calls for ``processor``: its ``process`` method for an object,
    the function itself otherwise; resolved once, when the worker is made."""
    if isinstance(processor, JobProcessor) and callable(processor.process):
        return processor.process
    if callable(processor):
        return processor
    raise ConfigurationError(
        f"a processor is an async function (job, ctx) or has an async process(job, ctx)"
        f" method, got {processor!r}"
    )
