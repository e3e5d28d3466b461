"""``JobContext``: what a processor may do besides returning a result; ``Processor``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from lane_pg.backend import JobQueueBackend
from lane_pg.errors import ConfigurationError, JobNotFound, LeaseLost, LockMismatch
from lane_pg.types import JSON, ClaimedJob, JobRow
from lane_pg.types.flows import ChildRef, FlowJob
from lane_pg.worker.threads import SyncThreads

T = TypeVar("T")

_OWN_THREADS = SyncThreads(4, name="lane_pg-sync-own")
"""For ``run_in_thread`` on a context made outside a worker (the facade's sync driver)."""


class JobContext:
    """What a processor may do besides returning a result (WORK-8, WORK-9, RETRY-8).

    Every write carries the claim's lock token, so the database refuses it once another
    run owns the job: a handler whose lease ran out while it was frozen (a GC pause, a
    blocked event loop) but which has not been told yet gets ``LeaseLost``, the job is left
    as its new owner wrote it, and the context counts as lost from then on.
    """

    threads: SyncThreads | None = None
    """The worker's pool for sync handlers (set when the worker starts the job)."""
    _cancelled: bool = False
    _stop: threading.Event | None = None
    """Set on cancellation, made for a run that has a thread only (``wait``)."""

    def __init__(self, backend: JobQueueBackend, job: ClaimedJob, worker_id: str) -> None:
        self._backend = backend
        self.job = job
        self.worker_id = worker_id
        self._lease_lost = False
        self._discard_retry = False

    @property
    def backend(self) -> JobQueueBackend:
        """The backend the job was claimed from (the facade's runner frees unique locks and
        checks debounce windows on it)."""
        return self._backend

    def has_lost_lease(self) -> bool:
        """True once this worker no longer holds the job: stop side effects."""
        return self._lease_lost

    def ensure_lease(self) -> None:
        """Raise ``LeaseLost`` if the lease was lost or the run was cancelled; call before an
        irreversible step."""
        if self._lease_lost or self._cancelled:
            raise LeaseLost(self._lost_message())

    @property
    def cancelled(self) -> bool:
        """True once this run should stop: its lease was lost, or the worker gave up on it
        (its timeout expired, the shutdown deadline passed). A sync handler's thread cannot
        be stopped from outside: it reads this (or waits with ``SyncJobContext.wait``)."""
        return self._cancelled or self._lease_lost

    def cancel(self) -> None:
        """The worker gave up on this run: nothing it writes from now on is accepted."""
        self._cancelled = True
        if self._stop is not None:
            self._stop.set()

    async def run_in_thread(self, call: Callable[[SyncJobContext], T]) -> T:
        """``call(sync_ctx)`` in a thread of the worker's pool for sync handlers, with
        ``sync_ctx`` this context for a thread (``SyncJobContext``). Cancelled (the job's
        timeout, the shutdown deadline), the run is cancelled (``cancelled``) and the
        thread left to finish: its late result or exception is dropped."""
        if self._stop is None:
            self._stop = threading.Event()
            if self.cancelled:
                self._stop.set()
        threaded = SyncJobContext(self, asyncio.get_running_loop())
        try:
            return await (self.threads or _OWN_THREADS).run(lambda: call(threaded), self.job)
        except asyncio.CancelledError:
            self.cancel()
            raise

    def discard_retry(self) -> None:
        """Make the failure this run ends with terminal (no further attempts)."""
        self._discard_retry = True

    @property
    def retry_discarded(self) -> bool:
        return self._discard_retry

    def mark_lease_lost(self) -> None:
        """Called by the worker when renewal finds the lease gone (and by a refused write)."""
        self._lease_lost = True
        if self._stop is not None:
            self._stop.set()

    async def update_progress(self, progress: JSON) -> None:
        async with self._fenced():
            await self._backend.jobs.update_job_progress(
                self.job.queue, self.job.id, progress, token=self.job.lock_token
            )

    async def log(self, message: str) -> None:
        async with self._fenced():
            await self._backend.logs.add_job_log(
                self.job.queue, self.job.id, message, token=self.job.lock_token
            )

    async def update_data(self, data: JSON) -> None:
        async with self._fenced():
            await self._backend.jobs.update_job_data(
                self.job.queue, self.job.id, data, token=self.job.lock_token
            )

    async def children_values(self) -> dict[ChildRef, JSON]:
        """The return values of this job's completed flow children (FLOW-22), e.g. for a
        parent that combines them; {} for a job without children."""
        return await self._backend.flows.get_flow_children_values(self.job.queue, self.job.id)

    async def add_children(self, children: list[FlowJob]) -> None:
        """Add flow children and wait for them (FLOW-14): the job leaves ``active`` for
        ``waiting-children`` and runs again, as the same attempt, once they are done. The
        processor should return right after; its result is not written (the worker sees
        the lease gone)."""
        async with self._fenced():
            await self._backend.flows.add_flow_children(
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
        if self._cancelled and not self._lease_lost:
            return (
                f"job {self.job.id} of queue {self.job.queue}: this run was given up (its"
                " timeout expired or the worker stopped); the job is no longer held by it"
            )
        return (
            f"job {self.job.id} of queue {self.job.queue}: lease lost; another worker may"
            " be running it"
        )


class SyncJobContext:
    """The job context of a handler that runs in a thread (a plain ``def`` processor or
    ``handle``): the same operations as ``JobContext``, blocking instead of awaited (each
    runs on the worker's event loop and waits for it), and a way to see cancellation.

    ``cancelled`` turns true, and ``wait`` returns early, when the run should stop: its
    timeout expired, its lease was lost, or the worker's shutdown deadline passed. The
    thread is never stopped from outside; once cancelled its writes are refused
    (``LeaseLost``) and its result is dropped.
    """

    def __init__(self, context: JobContext, loop: asyncio.AbstractEventLoop) -> None:
        self._context = context
        self._loop = loop
        self.job = context.job
        self.worker_id = context.worker_id

    @property
    def cancelled(self) -> bool:
        return self._context.cancelled

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, returning at once when the run is cancelled; True when
        it is (stop then), False when the time passed."""
        stop = self._context._stop
        if stop is None:  # pragma: no cover - run_in_thread always makes it
            return self.cancelled
        return stop.wait(seconds)

    def has_lost_lease(self) -> bool:
        return self._context.has_lost_lease()

    def ensure_lease(self) -> None:
        """Raise ``LeaseLost`` if the lease was lost or the run was cancelled."""
        self._context.ensure_lease()

    def discard_retry(self) -> None:
        self._context.discard_retry()

    @property
    def retry_discarded(self) -> bool:
        return self._context.retry_discarded

    def update_progress(self, progress: JSON) -> None:
        self._blocking(self._context.update_progress(progress))

    def log(self, message: str) -> None:
        self._blocking(self._context.log(message))

    def update_data(self, data: JSON) -> None:
        self._blocking(self._context.update_data(data))

    def children_values(self) -> dict[ChildRef, JSON]:
        return self._blocking(self._context.children_values())

    def add_children(self, children: list[FlowJob]) -> None:
        self._blocking(self._context.add_children(children))

    def _blocking(self, operation: Coroutine[Any, Any, T]) -> T:
        """Run ``operation`` on the worker's loop and wait for it (from a pool thread)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            operation.close()
            raise RuntimeError(
                "a SyncJobContext blocks: call it from the handler's thread, or use the"
                " JobContext's async methods on the event loop"
            )
        try:
            future = asyncio.run_coroutine_threadsafe(operation, self._loop)
        except RuntimeError:
            operation.close()  # the loop is closed: the worker is gone
            raise LeaseLost(self._context._lost_message()) from None
        return future.result()


AsyncProcessor: TypeAlias = Callable[[JobRow, JobContext], Awaitable[JSON]]
"""``async def handler(job, ctx) -> JSON``: the job is the ``ClaimedJob`` of this run."""

SyncProcessor: TypeAlias = Callable[[JobRow, SyncJobContext], JSON]
"""``def handler(job, ctx) -> JSON``: run in a thread of the worker's pool."""

Processor: TypeAlias = AsyncProcessor | SyncProcessor
"""A processor function: ``async def`` (on the event loop) or plain ``def`` (in a thread)."""


@runtime_checkable
class JobProcessor(Protocol):
    """A processor as an object (WORK-2): anything with ``async process(job, ctx)``."""

    def process(self, job: JobRow, ctx: JobContext) -> Awaitable[JSON]: ...


ProcessorLike: TypeAlias = Processor | JobProcessor
"""What a worker accepts as a processor: a function or a ``JobProcessor``."""


def as_processor(processor: ProcessorLike) -> Processor:
    # A plain ``def`` (or a ``process`` method that is one) is returned as it is: the
    # worker runs it in a thread (``lane_pg.worker.execution.as_async``).
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
