"""Running typed jobs on the worker (PUSH-1, PUSH-8): one processor per registered class.

The worker claims a stored job by name like any other; the processor for a job class
rebuilds the instance from the job's data and awaits ``handle()``, inside the job's
middleware (``lane_pg.facade.middleware``, MW-1, MW-2). Its return value is the
job's result; an exception fails the attempt under the job's stored retry settings, the
same path as for ``@app.processor`` functions. A plain ``def handle`` runs in a thread of
the worker's pool for sync handlers, as a plain ``def`` processor does. Data that no longer
fits the class (a field renamed since the push) can never run, so it fails the job for good.

Two checks come first, on the backend the job was claimed from: a debounced dispatch whose
window another job owns now is superseded and completes without running (``JobDebounced``,
UNIQ-11; no window at all runs it, UNIQ-12); and a ``unique_until_processing`` job frees
its lock right before ``handle()``, by the token its push recorded, so an attempt never
frees a lock a newer push took (UNIQ-6, -7).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable
from typing import cast

import lane_pg.context as context
from lane_pg.errors import (
    ConfigurationError,
    DeleteRequested,
    FailRequested,
    InvalidPayload,
    JobOutcomeSignal,
    ManuallyFailed,
    ReleaseRequested,
    UnrecoverableJobError,
)
from lane_pg.facade.envelope import META_CONNECTION, stored_context
from lane_pg.facade.events import (
    Events,
    JobDebounced,
    JobExceptionOccurred,
    JobProcessed,
    JobProcessing,
    JobReleased,
)
from lane_pg.facade.job import _CURRENT, Job, decode_fields
from lane_pg.facade.middleware import (
    Completed,
    Deleted,
    JobOutcome,
    Released,
    run_middleware,
)
from lane_pg.facade.registry import JobRegistry
from lane_pg.facade.unique import META_DEBOUNCE, meta_of, unique_lock_of
from lane_pg.types import JSON, JobRow, to_millis
from lane_pg.worker.context import JobContext, SyncJobContext
from lane_pg.worker.threads import is_async_callable

log = logging.getLogger("lane_pg.facade")


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
        self._sync_handle = not is_async_callable(cls.handle)

    def __repr__(self) -> str:
        return f"TypedJobProcessor({self.cls.__qualname__})"

    async def process(self, job: JobRow, ctx: JobContext) -> JSON:
        """One attempt, in a fresh ``lane_pg.context`` scope restored from the push's
        snapshot (CTX-2, CTX-3): the job, its middleware and the listeners of its events
        share it, and nothing it adds outlives the attempt."""
        with context.restore(stored_context(job)):
            return await self._attempt(job, ctx)

    async def _attempt(self, job: JobRow, ctx: JobContext) -> JSON:
        try:
            instance = decode_fields(self.cls, job.data)
        except InvalidPayload as exc:
            raise UnrecoverableJobError(str(exc)) from exc
        attempt = job.attempts_started
        events = self.events
        if await self._superseded(job, ctx):
            await events.emit(
                JobDebounced(self.connection, job.queue, job.name, job.id, job.max_attempts)
            )
            return None
        tries = job.max_attempts
        await events.emit(
            JobProcessing(self.connection, job.queue, job.name, job.id, attempt, tries)
        )
        token = _CURRENT.set(ctx)
        try:
            result = await self._through_middleware(instance, job, ctx)
        except JobOutcomeSignal:
            raise  # a middleware's Released / Deleted / Failed (MW-2), not a handler error
        except Exception as exc:
            await events.emit(
                JobExceptionOccurred(
                    self.connection, job.queue, job.name, job.id, attempt, exc, tries
                )
            )
            if isinstance(exc, ManuallyFailed):  # Job.fail(): no more tries (RETRY-9)
                raise UnrecoverableJobError(str(exc)) from exc
            raise
        finally:
            _CURRENT.reset(token)
        await events.emit(
            JobProcessed(self.connection, job.queue, job.name, job.id, attempt, tries)
        )
        return result

    async def _through_middleware(self, instance: Job, job: JobRow, ctx: JobContext) -> JSON:
        """``handle()`` inside the job's middleware (MW-1), the first listed outermost; an
        outcome other than ``Completed`` is raised as the worker's signal (MW-2). The
        unique lock of a ``unique_until_processing`` job is freed right before the handler
        (UNIQ-6): after the middleware pass, and also when a middleware ends the run
        without it, unless it released the job (a released job keeps its lock)."""
        middleware = instance.middleware()
        unique = self.cls.unique_until_processing
        if not middleware:
            if unique:
                await self._release_unique(job, ctx)
            return await self._handle(instance, ctx)
        handled = False

        async def handler(typed: Job) -> JobOutcome:
            nonlocal handled
            handled = True
            if unique:
                await self._release_unique(job, ctx)
            return Completed(await self._handle(typed, ctx))

        outcome = await run_middleware(middleware, instance, handler)
        if unique and not handled and not isinstance(outcome, Released):
            await self._release_unique(job, ctx)
        return await self._settle(outcome, job)

    async def _handle(self, instance: Job, ctx: JobContext) -> JSON:
        if self._sync_handle:
            # A plain ``def handle`` runs in a thread of the worker's pool, where
            # ``current_context()`` is the blocking ``SyncJobContext``.
            return await ctx.run_in_thread(functools.partial(_handle_in_thread, instance))
        return await cast(Awaitable[JSON], instance.handle())

    async def _settle(self, outcome: JobOutcome, job: JobRow) -> JSON:
        """A middleware's outcome as the worker takes it: the result, or its signal."""
        if isinstance(outcome, Completed):
            return outcome.result
        if isinstance(outcome, Released):
            delay = to_millis(outcome.delay, "Released.delay") / 1000
            if delay < 0:
                raise ConfigurationError(f"Released needs a delay >= 0, got {outcome.delay!r}")
            await self.events.emit(
                JobReleased(
                    self.connection,
                    job.queue,
                    job.name,
                    job.id,
                    job.attempts_started,
                    delay,
                    outcome.reason,
                    job.max_attempts,
                )
            )
            raise ReleaseRequested(delay, outcome.reason)
        if isinstance(outcome, Deleted):
            raise DeleteRequested(outcome.reason)
        # Failed: on purpose, as Job.fail() is (RETRY-9: JobFailed's cause is ManuallyFailed),
        # with the error that caused it, if any, as its cause and traceback.
        manual = ManuallyFailed(job.name, outcome.reason)
        manual.__cause__ = outcome.exception
        raise FailRequested(outcome.reason) from manual

    async def _superseded(self, job: JobRow, ctx: JobContext) -> bool:
        """UNIQ-11, -12: another job owns this dispatch's debounce window now. A flushed
        dispatch (max wait reached, UNIQ-10: stored without the window) and one whose
        window is gone always run."""
        window = meta_of(job, META_DEBOUNCE)
        key = None if window is None or window.get("flush") else job.deduplication_id
        if not isinstance(key, str):
            return False
        owner = await ctx.backend.dedup.get_deduplication_job_id(job.queue, key)
        return owner is not None and owner != job.id

    async def _release_unique(self, job: JobRow, ctx: JobContext) -> None:
        """UNIQ-6, -7: free this push's lock, only while it is still this push's."""
        lock = unique_lock_of(job)
        key, token = (None, None) if lock is None else lock
        if key is None or token is None:
            return  # no token (a plain push, a retried job, A9): only the TTL ends the lock
        await ctx.backend.dedup.release_deduplication_key(job.queue, key, token)


def _handle_in_thread(instance: Job, threaded: SyncJobContext) -> JSON:
    """In a pool thread (its own copy of the job's context variables): ``handle()`` with
    ``current_context()`` the thread's context."""
    _CURRENT.set(threaded)
    return cast(JSON, instance.handle())


def typed_processors(
    registry: JobRegistry, events: Events, connection: str
) -> dict[str, TypedJobProcessor]:
    """A processor for every registered class, by job name."""
    return {cls.job_name: TypedJobProcessor(cls, events, connection) for cls in registry}
