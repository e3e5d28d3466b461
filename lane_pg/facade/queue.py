"""The dispatch facade ``Q`` (PUSH, CONN-4..9, ROUTE): typed jobs in, stored jobs out.

    lane_pg.register_job(SendWelcomeEmail)
    await Q.push(SendWelcomeEmail(user_id=42))
    await Q.later(timedelta(minutes=5), SendWelcomeEmail(user_id=7))

Every push goes the same way: resolve queue and connection (``Routing``), build the
envelope (``build_envelope``), pick the connection's driver, emit ``JobQueueing``, write,
emit ``JobQueued``. A push returns once the job is committed to its backend (or, with
``conn=``, written in the caller's transaction), not when it runs (PUSH-3).

Connections: while none is registered, connection names only label events and every push
reaches the default (CONN-6); after the first ``register_connection`` a name must be a
registered connection or the default's own name (CONN-7). One driver under two names is an
alias (CONN-11: a pause or a gated forward under either reaches the same queues); two
drivers over one store are refused (``lane_pg.facade.stores``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lane_pg.backend import Batches
from lane_pg.errors import ConfigurationError
from lane_pg.facade.batches import (
    DEFAULT_CALLBACKS,
    Callbacks,
    GroupRecorder,
    PendingBatch,
    PendingChain,
)
from lane_pg.facade.blocking import SyncPushes
from lane_pg.facade.connection import Connection
from lane_pg.facade.envelope import NO_OVERRIDES, Envelope, EnvelopeOverrides, build_envelope
from lane_pg.facade.events import Events, JobQueued, JobQueueing
from lane_pg.facade.failed import FailedJobs
from lane_pg.facade.job import Job
from lane_pg.facade.pausing import PausingMixin
from lane_pg.facade.reads import ConnectionReads
from lane_pg.facade.registry import DEFAULT_REGISTRY, JobRegistry
from lane_pg.facade.routing import Routing
from lane_pg.facade.stores import refuse_shared_stores
from lane_pg.facade.unique import UniquePushes, refuse_unique_and_debounce
from lane_pg.types import Batch, Duration

if TYPE_CHECKING:
    from lane_pg.facade.fake import QueueFake


class QueueFacade(FailedJobs, UniquePushes, ConnectionReads, PausingMixin, SyncPushes):
    """Connections, routes and pushes of one application (``lane_pg.Q`` is the shared one)."""

    _fake: QueueFake | None = None
    """The installed test fake (``fake()``): every push entry point reads it once."""

    def __init__(
        self, *, registry: JobRegistry = DEFAULT_REGISTRY, callbacks: Callbacks = DEFAULT_CALLBACKS
    ) -> None:
        self.registry = registry
        self.callbacks = callbacks
        """The batch and chain callbacks workers of this facade run (BATCH-2)."""
        self.events = Events()
        self.routing = Routing(self.same_connection)
        self._default: Connection | None = None
        self._default_name: str | None = None
        self._connections: dict[str, Connection] = {}

    # -- connections (CONN-4..7, CONN-15) --------------------------------------------------

    def set_driver(self, driver: Connection, *, name: str | None = None) -> None:
        """Make ``driver`` the default connection (named ``name``, else its driver's name)."""
        if not isinstance(driver, Connection):
            raise TypeError(f"set_driver takes a lane_pg.facade.Connection, got {driver!r}")
        label = name or self._default_name or driver.driver_name
        refuse_shared_stores([(label, driver), *self._connections.items()])  # CONN-11
        driver.attach_events(self.events)
        self._default = driver
        if name is not None:
            self._default_name = name

    def driver(self) -> Connection:
        """The default connection's driver."""
        if self._default is None:
            raise ConfigurationError(
                "no queue connection is configured: call lane_pg.bootstrap_from_env() or"
                " Q.set_driver(...) first"
            )
        return self._default

    def driver_name(self) -> str:
        return self.driver().driver_name

    def connection_name(self) -> str:
        """The default connection's name: set by ``set_connection_name``, else its driver's."""
        return self._default_name or self.driver_name()

    def set_connection_name(self, name: str) -> None:
        if not name:
            raise ConfigurationError("a connection name cannot be empty")
        self._default_name = name

    def register_connection(self, name: str, driver: Connection) -> None:
        if not name:
            raise ConfigurationError("a connection name cannot be empty")
        if not isinstance(driver, Connection):
            raise TypeError(
                f"register_connection takes a lane_pg.facade.Connection, got {driver!r}"
            )
        others = [(known, bound) for known, bound in self._connections.items() if known != name]
        if self._default is not None:
            others.insert(0, (self.connection_name(), self._default))
        refuse_shared_stores([*others, (name, driver)])  # CONN-11: an alias is one driver
        driver.attach_events(self.events)
        self._connections[name] = driver

    def connection(self, name: str) -> Connection:
        """The driver of connection ``name``; ``ConfigurationError`` for an unknown name."""
        found = self._connections.get(name)
        if found is not None:
            return found
        if self._default is not None and name == self.connection_name():
            return self._default
        known = ", ".join(self.connection_names()) or "none"
        raise ConfigurationError(f"unknown queue connection {name!r} (known: {known})")

    def connection_names(self) -> list[str]:
        names = [self.connection_name()] if self._default is not None else []
        return names + [name for name in self._connections if name not in names]

    def same_connection(self, first: str, second: str) -> bool:
        """Whether two names reach one connection: equal, or bound to one driver (an alias
        of the default, CONN-11). Names that are only labels (CONN-6) compare as text."""
        if first == second:
            return True
        bound = self._bound(first)
        return bound is not None and bound is self._bound(second)

    def _bound(self, name: str) -> Connection | None:
        found = self._connections.get(name)
        if found is None and self._default is not None and name == self.connection_name():
            return self._default
        return found

    def driver_for(self, connection: str) -> Connection:
        """The driver a push labelled ``connection`` goes to (CONN-6, CONN-7)."""
        if not self._connections:
            return self.driver()
        return self.connection(connection)

    # -- routing (ROUTE) -------------------------------------------------------------------

    def route(
        self, cls: type[Job], *, connection: str | None = None, queue: str | None = None
    ) -> None:
        self.routing.route(cls, connection=connection, queue=queue)

    def forward(self, source: str, destination: str) -> None:
        self.routing.forward(source, destination)

    def forward_on(self, source: str, destination: str, connection: str) -> None:
        self.routing.forward(source, destination, connection)

    def forward_for(self, source: str) -> tuple[str, str | None] | None:
        return self.routing.forward_for(source)

    # -- pushes (PUSH-3..7) ----------------------------------------------------------------

    def envelope(
        self,
        job: Job,
        overrides: EnvelopeOverrides = NO_OVERRIDES,
        *,
        delay: Duration | None = None,
        available_at: datetime | None = None,
    ) -> Envelope:
        """The envelope a push of ``job`` writes (resolution only, nothing written)."""
        if not isinstance(job, Job):
            raise TypeError(f"push takes a lane_pg.Job instance, got {job!r}")
        default = self.connection_name() if self._default is not None else "default"
        queue, connection = self.routing.resolve(job, overrides, default)
        return build_envelope(
            job,
            queue=queue,
            connection=connection,
            overrides=overrides,
            delay=delay,
            available_at=available_at,
        )

    async def push(self, job: Job, *, conn: object | None = None) -> str:
        """Enqueue now, after ``Job.delay``; returns the job id."""
        return await self.dispatch(self.envelope(job), conn=conn)

    async def push_later(self, job: Job, at: datetime, *, conn: object | None = None) -> str:
        """Enqueue to be available at ``at`` (an aware datetime)."""
        if at.tzinfo is None:
            raise ConfigurationError("push_later takes an aware datetime (with a time zone)")
        return await self.dispatch(self.envelope(job, available_at=at), conn=conn)

    async def later(self, delay: Duration, job: Job, *, conn: object | None = None) -> str:
        """Enqueue to be available after ``delay`` (``Job.delay`` is ignored, PUSH-4)."""
        return await self.dispatch(self.envelope(job, delay=delay), conn=conn)

    async def push_with(
        self, job: Job, overrides: EnvelopeOverrides, *, conn: object | None = None
    ) -> str:
        return await self.dispatch(self.envelope(job, overrides), conn=conn)

    async def later_with(
        self,
        delay: Duration,
        job: Job,
        overrides: EnvelopeOverrides,
        *,
        conn: object | None = None,
    ) -> str:
        return await self.dispatch(self.envelope(job, overrides, delay=delay), conn=conn)

    async def bulk(self, jobs: Sequence[Job], *, conn: object | None = None) -> list[str]:
        """Push jobs of one type in one backend call (PUSH-6): all stored or none."""
        if not jobs:
            return []
        kinds = {type(job) for job in jobs}
        if len(kinds) > 1:
            names = sorted(kind.__qualname__ for kind in kinds)
            raise ConfigurationError(f"bulk takes jobs of one type per call, got {names}")
        refuse_unique_and_debounce(type(jobs[0]))  # UNIQ-14, as for one push: nothing stored
        envelopes = [self.envelope(job) for job in jobs]
        fake = self._fake
        if fake is not None:
            return [await fake.record(envelope) for envelope in envelopes]
        deferred = await self.bulk_special(envelopes, conn)
        if deferred is not None:
            return deferred
        return await self.write_bulk(envelopes, conn=conn)

    async def write_bulk(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        """The plain write of ``bulk``: the events around one ``bulk_push``."""
        first = envelopes[0]
        driver = self.driver_for(first.connection)
        for envelope in envelopes:
            await self.events.emit(
                JobQueueing(envelope.connection, envelope.queue, envelope.job_name, envelope.job)
            )
        ids = await self.bulk_push_on(driver, envelopes, conn=conn)
        for envelope, job_id in zip(envelopes, ids, strict=True):
            await self.events.emit(
                JobQueued(envelope.connection, envelope.queue, envelope.job_name, job_id)
            )
        return ids

    async def dispatch(self, envelope: Envelope, *, conn: object | None = None) -> str:
        """Write one resolved envelope on its connection, with its two events; a debounced
        or after-commit push goes its own way (``UniquePushes.dispatch_special``)."""
        fake = self._fake
        if fake is not None:
            return await fake.record(envelope)  # before any deferral: recorded at once (TX-15)
        handled = await self.dispatch_special(envelope, conn)
        if handled is not None:
            return handled
        return await self.write(envelope, conn=conn)

    async def write(self, envelope: Envelope, *, conn: object | None = None) -> str:
        """The plain write of ``dispatch``: ``JobQueueing``, the driver's push, ``JobQueued``."""
        return await self.write_on(self.driver_for(envelope.connection), envelope, conn=conn)

    # -- batches and chains (BATCH, CHAIN) ------------------------------------------------

    def batch(self, jobs: Sequence[Job] = ()) -> PendingBatch:
        """A batch to build: ``.name()``, ``.add()``, ``.then()`` / ``.catch()`` /
        ``.finally_()``, ``.allow_failures()``, then ``await .dispatch()`` (the batch id)."""
        return PendingBatch(self).add(jobs)

    def chain(self, jobs: Sequence[Job] = ()) -> PendingChain:
        """A chain to build: ``.add()`` each link, ``.catch()``, then ``await .dispatch()``
        (the head's id)."""
        return PendingChain(self).add(jobs)

    async def find_batch(self, batch_id: str, *, connection: str | None = None) -> Batch | None:
        """The batch with its derived counts, or None (BATCH-6)."""
        fake = self.installed_fake()
        if fake is not None:
            return fake.find_batch(batch_id)
        return await (await self._batches_of(connection)).find_batch(batch_id)

    async def list_batches(
        self, *, limit: int = 50, state: str | None = None, connection: str | None = None
    ) -> list[Batch]:
        return await (await self._batches_of(connection)).list_batches(limit, state)

    async def cancel_batch(
        self, batch_id: str, *, remove_waiting: bool = False, connection: str | None = None
    ) -> bool:
        return await (await self._batches_of(connection)).cancel_batch(
            batch_id, remove_waiting=remove_waiting
        )

    async def add_to_batch(
        self, batch_id: str, jobs: Sequence[Job], *, connection: str | None = None
    ) -> list[str]:
        """Add jobs to a batch that has not finished (from one of its own jobs, say)."""
        pending = PendingBatch(self).add(jobs)
        if connection is not None:
            pending.on_connection(connection)
        envelopes = pending._envelopes(ignore_delay=True)
        if self._fake is not None:
            return await self._fake.add_to_batch(batch_id, envelopes)
        backend = await pending._backend_of(envelopes)
        ids: list[str] = await backend.batches.add_to_batch(batch_id, pending._specs(envelopes))
        return ids

    async def _batches_of(self, connection: str | None) -> Batches:
        driver = self.driver_for(connection) if connection is not None else self.driver()
        return (await driver.backend()).batches

    def installed_fake(self) -> GroupRecorder | None:
        """The fake recording this facade's pushes (``Q.fake()``), else None."""
        return self._fake

    def fake(self) -> QueueFake:
        """A test fake for ``with``: while the block runs, pushes are recorded on it
        instead of written (no driver needed), and its ``assert_*`` methods check them;
        its recordings are forgotten at the end of the block."""
        from lane_pg.facade.fake import QueueFake  # tests only: kept off the import path

        return QueueFake(self)

    # -- reads of the default connection (CONN-9) ------------------------------------------

    async def size(self, queue: str | None = None) -> int:
        if self._fake is not None:
            return self._fake.size(queue)
        return await self.driver().size(queue)

    async def pending_size(self, queue: str | None = None) -> int:
        if self._fake is not None:
            return self._fake.pending_size(queue)
        return await self.driver().pending_size(queue)

    async def delayed_size(self, queue: str | None = None) -> int:
        if self._fake is not None:
            return self._fake.delayed_size(queue)
        return await self.driver().delayed_size(queue)

    async def reserved_size(self, queue: str | None = None) -> int:
        if self._fake is not None:
            return self._fake.reserved_size(queue)
        return await self.driver().reserved_size(queue)

    # -- lifecycle -------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every connection's driver."""
        drivers: list[Any] = [self._default, *self._connections.values()]
        seen: set[int] = set()
        for driver in drivers:
            if driver is not None and id(driver) not in seen:
                seen.add(id(driver))
                await driver.close()

    def reset(self) -> None:
        """Forget connections, routes, forwards, listeners and the failed-job store (tests;
        drivers not closed)."""
        self._failed_store = None
        self._default = None
        self._default_name = None
        self._connections.clear()
        self.routing.clear()
        self.events.clear()


Q = QueueFacade()
"""The application's facade: ``from lane_pg import Q``."""
