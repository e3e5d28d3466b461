"""Batches and chains of typed jobs (BATCH, CHAIN): builders on the facade and the worker's
processors of their callback jobs.

    batch_id = await Q.batch().name("import").add(a).add(b) \
        .then("notify").catch("alert").finally_("cleanup").dispatch()
    await Q.chain().add(Fetch(...)).add(Transform(...)).add(Upload(...)).dispatch()

Both are stored by one backend operation (``batches.add_batch``, ``jobs.add_chain``): a
batch's jobs all or none, a chain's head with every later link checked. The backend does
the rest where the jobs end (lane_pg.backend.batches, AddChain): settlements, the next
link, and the callback jobs. A callback is named, not pickled: ``register_callback(obj)``
at boot, ``obj.name`` the key and ``async def handle(self, batch, error)`` the work, so a
restarted worker finds it (BATCH-2). Its job runs on a worker like any other (retried
under ``callback_options``), on the batch's callback queue (the first job's, unless
``on_queue``).

Batches and chains never wait for the ambient transaction's commit (TX-11) and refuse
debounced job types (UNIQ-14); a batch's jobs ignore ``Job.delay`` (BATCH-8); every job of
one batch or chain resolves to one connection (CHAIN-3), since one backend stores them all.
Each job carries the caller's context as a push does (CTX-4).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import lane_pg.context as context
from lane_pg.errors import BatchNotFound, ConfigurationError, UnrecoverableJobError
from lane_pg.facade.events import Events, JobQueued, JobQueueing
from lane_pg.facade.job import Job
from lane_pg.facade.unique import _discards, _runs_inline, refuse_unique_and_debounce
from lane_pg.types import (
    BATCH_CALLBACK_JOB,
    CHAIN_CALLBACK_JOB,
    JSON,
    Batch,
    JobRow,
    QueuedSpec,
)
from lane_pg.worker.context import JobContext
from lane_pg.worker.threads import is_async_callable

if TYPE_CHECKING:
    from lane_pg.facade.envelope import Envelope
    from lane_pg.facade.queue import QueueFacade


@runtime_checkable
class BatchCallback(Protocol):
    """A named callback: ``handle(batch, error)`` gets the ``Batch`` (or, for a chain's
    catch, a ``ChainFailure``) and the first failure's reason (None for ``then``)."""

    name: str

    def handle(self, batch: Any, error: str | None) -> Any: ...


@dataclass(frozen=True, slots=True)
class ChainFailure:
    """What a chain's catch callback is given: the chain and the link that failed."""

    chain_id: str
    queue: str
    job_id: str
    job_name: str


CallbackRef = str | BatchCallback


class GroupRecorder(Protocol):
    """What a test fake offers builders (``Q.fake()``): it records a batch or a chain in
    place of storing it, and answers ``find_batch`` for the batches it recorded."""

    async def record_batch(
        self, batch: PendingBatch, envelopes: Sequence[Envelope], batch_id: str
    ) -> str: ...

    async def record_chain(
        self, chain: PendingChain, envelopes: Sequence[Envelope], chain_id: str
    ) -> str: ...

    def find_batch(self, batch_id: str) -> Batch | None: ...


class Callbacks:
    """Registered callbacks by name (BATCH-2)."""

    def __init__(self) -> None:
        self._by_name: dict[str, BatchCallback] = {}

    def register(self, callback: BatchCallback) -> BatchCallback:
        """Register ``callback`` under ``callback.name``; again is a no-op, another object
        under the same name is refused."""
        name = getattr(callback, "name", None)
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise ConfigurationError(
                f"a batch callback has a name (1-255 characters) and a handle(batch, error)"
                f" method, got {callback!r}"
            )
        if not callable(getattr(callback, "handle", None)):
            raise ConfigurationError(f"batch callback {name!r} has no handle(batch, error)")
        known = self._by_name.get(name)
        if known is not None and known is not callback:
            raise ConfigurationError(f"a batch callback named {name!r} is already registered")
        self._by_name[name] = callback
        return callback

    def get(self, name: str) -> BatchCallback | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def clear(self) -> None:
        self._by_name.clear()

    def name_of(self, callback: CallbackRef) -> str:
        """A builder's callback as its name, registering an object given directly."""
        if isinstance(callback, str):
            if not 1 <= len(callback) <= 255:
                raise ConfigurationError("a callback name has 1-255 characters")
            return callback
        return self.register(callback).name


DEFAULT_CALLBACKS = Callbacks()
"""The callbacks ``register_callback`` records and workers look up."""


def register_callback(callback: BatchCallback) -> BatchCallback:
    """Register a batch or chain callback for workers (BATCH-2): ``callback.name`` is the
    name builders pass to ``then`` / ``catch`` / ``finally_``."""
    return DEFAULT_CALLBACKS.register(callback)


# --------------------------------------------------------------------------- builders


class _Group:
    """What batches and chains share: their jobs, resolved as pushes are."""

    def __init__(self, facade: QueueFacade) -> None:
        self._facade = facade
        self._jobs: list[Job] = []
        self._connection: str | None = None
        self.context = context.snapshot()
        """The caller's ``lane_pg.context`` when the builder was made: every job carries it
        (CTX-4)."""

    @property
    def jobs(self) -> list[Job]:
        """The jobs added so far, in order."""
        return list(self._jobs)

    def _add(self, jobs: Job | Iterable[Job]) -> None:
        for job in [jobs] if isinstance(jobs, Job) else list(jobs):
            if not isinstance(job, Job):
                raise TypeError(f"add takes lane_pg.Job instances, got {job!r}")
            refuse_unique_and_debounce(type(job))
            if type(job).debounce_for is not None:
                raise ConfigurationError(
                    f"{type(job).__qualname__} is debounced: batches and chains take no"
                    " debounced job (its dispatch may never run)"
                )
            self._jobs.append(job)

    def _envelopes(self, *, ignore_delay: bool) -> list[Envelope]:
        facade = self._facade
        envelopes = [facade.envelope(job, delay=0 if ignore_delay else None) for job in self._jobs]
        for envelope in envelopes:
            envelope.carry_context(self.context)
        connections = {envelope.connection for envelope in envelopes}
        if self._connection is not None:
            connections.add(self._connection)
        first = next(iter(connections), None)
        if any(not facade.same_connection(first or "", other) for other in connections):
            raise ConfigurationError(
                f"the jobs resolve to different connections ({', '.join(sorted(connections))}):"
                " a batch or a chain is stored by one connection"
            )
        return envelopes

    def _specs(self, envelopes: Sequence[Envelope]) -> list[QueuedSpec]:
        now = datetime.now(UTC)
        return [
            QueuedSpec(e.queue, e.job_name, cast(JSON, e.data), e.options_document(now))
            for e in envelopes
        ]

    async def _backend_of(self, envelopes: Sequence[Envelope]) -> Any:
        name = self._connection or (
            envelopes[0].connection if envelopes else self._facade.connection_name()
        )
        driver = self._facade.driver_for(name)
        if _runs_inline(driver) or _discards(driver):
            raise ConfigurationError(
                f"connection {name!r} ({driver.driver_name}) stores no jobs: batches and"
                " chains need a connection that does (under tests, use Q.fake())"
            )
        return await driver.backend()

    async def _announce(self, envelopes: Sequence[Envelope]) -> None:
        events = self._facade.events
        for envelope in envelopes:
            await events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )

    async def _queued(self, envelopes: Sequence[Envelope], ids: Sequence[str]) -> None:
        events = self._facade.events
        for envelope, job_id in zip(envelopes, ids, strict=True):
            await events.emit(
                JobQueued(envelope.connection, envelope.queue, envelope.job_name, job_id)
            )


class PendingBatch(_Group):
    """``Q.batch()``: jobs dispatched together, with callbacks (BATCH-1)."""

    def __init__(self, facade: QueueFacade) -> None:
        super().__init__(facade)
        self.batch_name = ""
        self.callbacks: dict[str, str] = {}
        self.allows_failures = False
        self.callback_queue: str | None = None

    def name(self, name: str) -> PendingBatch:
        if not isinstance(name, str) or len(name) > 255:
            raise ConfigurationError("a batch name is text of at most 255 characters")
        self.batch_name = name
        return self

    def add(self, jobs: Job | Iterable[Job]) -> PendingBatch:
        self._add(jobs)
        return self

    def then(self, callback: CallbackRef) -> PendingBatch:
        """Run when every job succeeded (a job removed before it ran counts as settled)."""
        self.callbacks["then"] = self._facade.callbacks.name_of(callback)
        return self

    def catch(self, callback: CallbackRef) -> PendingBatch:
        """Run once, at the batch's first failure."""
        self.callbacks["catch"] = self._facade.callbacks.name_of(callback)
        return self

    def finally_(self, callback: CallbackRef) -> PendingBatch:
        """Run once every job settled, whatever happened."""
        self.callbacks["finally"] = self._facade.callbacks.name_of(callback)
        return self

    def allow_failures(self, allow: bool = True) -> PendingBatch:
        """Keep the batch going after a failure (by default the first one cancels it)."""
        self.allows_failures = allow
        return self

    def on_queue(self, queue: str) -> PendingBatch:
        """The queue of the callback jobs (default: the first job's)."""
        self.callback_queue = queue
        return self

    def on_connection(self, connection: str) -> PendingBatch:
        self._connection = connection
        return self

    def options(self) -> dict[str, JSON]:
        """The batch's options document as the backend stores it."""
        options: dict[str, JSON] = dict(self.callbacks)
        if self.allows_failures:
            options["allow_failures"] = True
        if self.callback_queue is not None:
            options["callback_queue"] = self.callback_queue
        # No callback_options: the backends retry callback jobs as a job class is retried
        # by default (lane_pg.types.CHAIN_CATCH_RETRY).
        return options

    async def dispatch(self) -> str:
        """Store the batch and its jobs (all or none) and return the batch id."""
        envelopes = self._envelopes(ignore_delay=True)
        batch_id = str(uuid.uuid4())
        fake = self._facade.installed_fake()
        if fake is not None:
            return await fake.record_batch(self, envelopes, batch_id)
        backend = await self._backend_of(envelopes)
        await self._announce(envelopes)
        ids: list[str] = await backend.batches.add_batch(
            batch_id, self.batch_name, self._specs(envelopes), self.options()
        )
        await self._queued(envelopes, ids)
        return batch_id


class PendingChain(_Group):
    """``Q.chain()``: jobs run one after another, each once the one before completed
    (CHAIN-1); a failure ends the chain and runs ``catch`` once."""

    def __init__(self, facade: QueueFacade) -> None:
        super().__init__(facade)
        self.catch_callback: str | None = None

    def add(self, jobs: Job | Iterable[Job]) -> PendingChain:
        self._add(jobs)
        return self

    def catch(self, callback: CallbackRef) -> PendingChain:
        self.catch_callback = self._facade.callbacks.name_of(callback)
        return self

    def on_connection(self, connection: str) -> PendingChain:
        self._connection = connection
        return self

    async def dispatch(self) -> str:
        """Store the head (every link checked) and return its id."""
        if not self._jobs:
            raise ConfigurationError("a chain needs at least one job")
        envelopes = self._envelopes(ignore_delay=False)
        chain_id = uuid.uuid4().hex
        fake = self._facade.installed_fake()
        if fake is not None:
            return await fake.record_chain(self, envelopes, chain_id)
        backend = await self._backend_of(envelopes)
        await self._announce(envelopes[:1])
        head: JobRow = await backend.jobs.add_chain(
            chain_id, self._specs(envelopes), catch=self.catch_callback
        )
        await self._queued(envelopes[:1], [head.id])
        return head.id


# --------------------------------------------------------------------------- callback jobs


async def _call(
    callback: BatchCallback, subject: object, error: str | None, ctx: JobContext
) -> None:
    handle = callback.handle
    if is_async_callable(handle):
        await cast(Callable[[object, str | None], Awaitable[None]], handle)(subject, error)
    else:
        await ctx.run_in_thread(lambda _threaded: handle(subject, error))


def callback_processors(
    callbacks: Callbacks, events: Events
) -> dict[str, Callable[[JobRow, JobContext], Awaitable[JSON]]]:
    """The worker's processors of batch and chain callback jobs."""

    def lookup(name: object) -> BatchCallback:
        callback = callbacks.get(name) if isinstance(name, str) else None
        if callback is None:
            raise UnrecoverableJobError(
                f"no batch callback named {name!r} is registered in this worker"
                f" (registered: {', '.join(callbacks.names()) or 'none'}); register it"
                " with lane_pg.batch.register_callback(...) where the worker imports your code"
            )
        return callback

    async def batch_callback(job: JobRow, ctx: JobContext) -> JSON:
        data = job.data if isinstance(job.data, dict) else {}
        callback = lookup(data.get("callback"))
        batch_id = str(data.get("batch_id"))
        batch: Batch | None = await ctx.backend.batches.find_batch(batch_id)
        if batch is None:
            raise UnrecoverableJobError(str(BatchNotFound(f"batch {batch_id} not found")))
        error = data.get("error")
        await _call(callback, batch, error if isinstance(error, str) else None, ctx)
        return None

    async def chain_callback(job: JobRow, ctx: JobContext) -> JSON:
        data = job.data if isinstance(job.data, dict) else {}
        callback = lookup(data.get("callback"))
        failure = ChainFailure(
            str(data.get("chain_id")),
            str(data.get("queue")),
            str(data.get("job_id")),
            str(data.get("name")),
        )
        error = data.get("error")
        await _call(callback, failure, error if isinstance(error, str) else None, ctx)
        return None

    return {BATCH_CALLBACK_JOB: batch_callback, CHAIN_CALLBACK_JOB: chain_callback}
