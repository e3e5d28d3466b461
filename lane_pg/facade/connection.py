"""A connection of the facade: the Laravel-style operations, written once over the contract.

``Q.driver()`` and ``Q.connection(name)`` are ``Connection`` objects. Every operation below
(push, counts, listings, ``clear``, reservations, pauses) is written here once, over the
handles of the connection's backend (``lane_pg.backend``): every rule (options, dedup
owners, pause) stays in the backend, and a connection offers what its backend serves. The
kinds of connection differ in their backend, not in these operations:

=================== ========================================================================
``BackendDriver``   a store that keeps jobs: postgres, memory, local (``lane_pg.memory.local``)
                    or a third-party backend; given open, or opened on first use, so
                    configuring connections does no I/O
``NullDriver``      ``NullBackend``, which keeps nothing (DRV-4, ``lane_pg.facade.null``)
``SyncDriver``      a null connection whose push runs the job inline (DRV-3)
``FailoverDriver``  a wrapper of connections, tried in order (FOV, ``lane_pg.facade.failover``)
``DriverBase``      a third-party connection without a backend, which overrides the operations
                    it offers (the protocol before the contract had handles)
=================== ========================================================================

Counts follow A16: ``size`` = waiting + delayed + active + waiting-children,
``pending_size`` = waiting + due delayed, ``delayed_size`` = delayed, ``reserved_size`` =
active. A read with ``queue=None`` covers every queue of the connection. Listings return stored
``JobRow`` snapshots, at most ``limit`` of them, in the backend's page order; they never
change a job (INSP-4).

Reservations (DRV-5): ``pop``/``pop_from`` lease one job for the connection's visibility
timeout and return a ``Reservation``; ``settle`` (and its spellings ``ack``, ``nack``,
``release``) ends it and answers ``SETTLED``, or ``STALE`` when the reservation no longer
holds the job (lease taken over, job gone): nothing was changed then.

``clear`` follows A16, in one transaction (``cleanup.clear_queues``): it removes every
waiting, delayed and waiting-children job and every active job whose lease has expired,
never a validly leased one (seed 003 drops every envelope; a running job's owner would
otherwise settle a job that no longer exists), and returns how many went. Finished jobs
are history, not queue contents, and stay. The current occurrence of a repeat series stays
too (a drain never ends a series, REP-16).

An operation the backend does not serve raises ``NotImplementedError`` naming the
connection and the operation (CONN-14): never an empty answer that is not true.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, TypeAlias, TypeVar, cast

from lane_pg.backend import JobQueueBackend, Transactions, connect
from lane_pg.backend.url import backend_kind
from lane_pg.errors import ConfigurationError, JobNotFound, LockMismatch
from lane_pg.facade.envelope import Envelope
from lane_pg.facade.events import Events
from lane_pg.facade.stores import StoreKey, local_store, postgres_store, redis_store
from lane_pg.types import JSON, Duration, JobRow, JobState, PauseStatus, QueueDemand, to_millis

SIZE_STATES: tuple[JobState, ...] = ("waiting", "delayed", "active", "waiting-children")
DEFAULT_VISIBILITY_TIMEOUT = timedelta(seconds=60)
"""The lease of a reservation unless configured (``LANE_PG_VISIBILITY_TIMEOUT_SECS``)."""
DEFAULT_LISTING_LIMIT = 1000

SettleResult: TypeAlias = Literal["settled", "stale"]
SETTLED: Final[SettleResult] = "settled"
STALE: Final[SettleResult] = "stale"

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True, slots=True)
class Reservation:
    """One leased job as a connection's caller holds it.

    ``token`` is what the issuing connection needs back to settle it (a backend's lock
    token; the failover connection's own token), ``connection`` the label of the connection
    the job came from, ``expires_at`` the end of the lease (visibility timeout)."""

    token: str
    job: JobRow
    connection: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Ack:
    """Complete the job with ``result``."""

    result: JSON = None


@dataclass(frozen=True, slots=True)
class Nack:
    """Fail this attempt: retried under the job's retry settings unless ``retry`` is false."""

    reason: str
    retry: bool = True


@dataclass(frozen=True, slots=True)
class Release:
    """Give the job back: waiting at the front (``delay`` 0) or delayed by ``delay``;
    the attempt is not charged."""

    delay: Duration = 0


Settlement: TypeAlias = Ack | Nack | Release


def visibility_timeout_of(value: Duration | None) -> timedelta:
    """A visibility timeout as a positive ``timedelta`` (``DEFAULT_VISIBILITY_TIMEOUT`` for
    None); ``ConfigurationError`` otherwise."""
    if value is None:
        return DEFAULT_VISIBILITY_TIMEOUT
    millis = to_millis(value, "visibility_timeout")
    if millis <= 0:
        raise ConfigurationError(f"the visibility timeout must be positive, got {value!r}")
    return timedelta(milliseconds=millis)


_HANDLER_ERROR = "_lane_pg_raised_by_handler"


def mark_handler_error(exc: BaseException) -> None:
    """Mark ``exc`` as raised by a job's own handler (a connection that runs jobs at push),
    so no failover takes it for an unreachable store and runs the job again."""
    with contextlib.suppress(AttributeError):  # a class with __slots__: nothing to mark
        setattr(exc, _HANDLER_ERROR, True)


def is_handler_error(exc: BaseException) -> bool:
    return getattr(exc, _HANDLER_ERROR, False) is True


def offered(method: F) -> F:
    """An operation of the connection: a backend that does not serve what it needs makes
    it raise ``NotImplementedError`` naming the connection and the operation (CONN-14)."""
    name = method.__name__

    @functools.wraps(method)
    async def call(self: Connection, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except NotImplementedError as exc:
            raise NotImplementedError(
                f"the {self.driver_name} driver does not implement {name}"
            ) from exc

    return cast(F, call)


class Connection:
    """One connection of the facade over a backend (see the module docstring)."""

    runs_inline: ClassVar[bool] = False
    """Whether a push runs the job's handler before it returns (sync, DRV-3)."""
    visibility_timeout: timedelta = DEFAULT_VISIBILITY_TIMEOUT
    worker_id: str = "lane_pg-connection"
    """The ``worker_id`` this connection's reservations are claimed under."""

    def __init__(
        self,
        backend: JobQueueBackend | None,
        driver_name: str,
        *,
        visibility_timeout: Duration | None = None,
    ) -> None:
        self._backend = backend
        self._driver_name = driver_name
        self._url: str | None = None
        self._lazy = False
        self._schema = "lane"
        self._opener: Callable[[], Awaitable[JobQueueBackend]] | None = None
        self._store: StoreKey | None = None
        self._opening = asyncio.Lock()
        self.visibility_timeout = visibility_timeout_of(visibility_timeout)
        self.worker_id = f"{driver_name}-driver-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    @classmethod
    def lazy(
        cls,
        url: str | None,
        driver_name: str,
        *,
        schema: str = "lane",
        visibility_timeout: Duration | None = None,
    ) -> BackendDriver:
        """A connection whose backend ``lane_pg.backend.connect(url)`` opens on first use
        (``url`` None: ``$LANE_PG_DSN``, else the embedded server, resolved then)."""
        driver = BackendDriver(None, driver_name, visibility_timeout=visibility_timeout)
        driver._url, driver._schema, driver._lazy = url, schema, True
        redis = url is not None and backend_kind(url) == "redis"
        driver._store = redis_store(url) if redis and url else postgres_store(url, schema)
        return driver

    @classmethod
    def opened_by(
        cls,
        opener: Callable[[], Awaitable[JobQueueBackend]],
        driver_name: str,
        *,
        visibility_timeout: Duration | None = None,
        store: StoreKey | None = None,
    ) -> BackendDriver:
        """A connection whose backend ``opener()`` opens on first use (again after
        ``close``); ``store`` names what it opens (CONN-11)."""
        driver = BackendDriver(None, driver_name, visibility_timeout=visibility_timeout)
        driver._opener, driver._lazy, driver._store = opener, True, store
        return driver

    @property
    def driver_name(self) -> str:
        """The connection's kind: ``postgres``, ``memory``, ``sync``, ``null``, ..."""
        return self._driver_name

    @property
    def filters_queues(self) -> bool:
        """Whether ``pop_from`` claims from the named queues only (FOV-8): every backend's
        claim does."""
        return True

    @property
    def url(self) -> str | None:
        """The URL a lazy connection opens (None for one given its backend)."""
        return self._url

    @property
    def schema(self) -> str:
        return self._schema

    @property
    def store_key(self) -> StoreKey | None:
        """The store this connection binds (``lane_pg.facade.stores``): named when
        configured, else read off an open backend (a PostgreSQL DSN and schema, a
        snapshot's path); None for one that no other connection can reach (memory)."""
        if self._store is not None:
            return self._store
        backend = self._backend
        dsn, schema = getattr(backend, "dsn", None), getattr(backend, "schema", None)
        if isinstance(dsn, str) and isinstance(schema, str):
            return postgres_store(dsn, schema)
        path = getattr(backend, "path", None)
        return local_store(path) if isinstance(path, Path) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.driver_name})"

    def attach_events(self, events: Events) -> None:
        """Take the facade's event emitter, for a connection that emits events of its own
        (failover's ``QueueFailedOver``, sync's processing events); others ignore it."""
        return None

    async def backend(self) -> JobQueueBackend:
        """The backend, opened now if this connection is lazy and not yet open."""
        if self._backend is None:
            async with self._opening:
                if self._backend is None:
                    if not self._lazy:
                        raise ConfigurationError(f"{self!r} was closed")
                    if self._opener is not None:
                        self._backend = await self._opener()
                    else:
                        self._backend = await connect(self._url, schema=self._schema)
        return self._backend

    async def _queues(self, backend: JobQueueBackend, queue: str | None) -> list[str]:
        return [queue] if queue is not None else await backend.queues.list_queues()

    # -- pushes ----------------------------------------------------------------------------

    @offered
    async def push(self, envelope: Envelope, *, conn: object | None = None) -> str:
        """Store one job and return its id; with ``conn``, inside the caller's transaction
        (``ConfigurationError`` when the backend cannot)."""
        return (await self.push_row(envelope, conn=conn)).id

    @offered
    async def push_row(self, envelope: Envelope, *, conn: object | None = None) -> JobRow:
        """``push``, returning the stored (or, deduplicated, the owner's) snapshot."""
        backend = await self.backend()
        options = envelope.options_document(datetime.now(UTC))
        if conn is None:
            return await backend.jobs.add_job(
                envelope.queue, envelope.job_name, envelope.data, options
            )
        return await self._transactional(backend).add_job_in(
            conn, envelope.queue, envelope.job_name, envelope.data, options
        )

    @offered
    async def bulk_push(
        self, envelopes: Sequence[Envelope], *, conn: object | None = None
    ) -> list[str]:
        """Store jobs of one queue in one call, all or none; ids in input order."""
        if not envelopes:
            return []
        queues = {envelope.queue for envelope in envelopes}
        if len(queues) > 1:
            raise ConfigurationError(f"a bulk push goes to one queue, got {sorted(queues)}")
        now = datetime.now(UTC)
        specs = [envelope.spec(now) for envelope in envelopes]
        queue = envelopes[0].queue
        backend = await self.backend()
        if conn is None:
            rows = await backend.jobs.add_jobs(queue, specs)
        else:
            rows = await self._transactional(backend).add_jobs_in(conn, queue, specs)
        return [row.id for row in rows]

    def _transactional(self, backend: JobQueueBackend) -> Transactions:
        if backend.transactions is None:
            raise ConfigurationError(
                f"the {self.driver_name} connection cannot enqueue inside a caller's"
                " transaction (conn=): only PostgreSQL can"
            )
        return backend.transactions

    # -- counts and listings (A16, INSP-5) -------------------------------------------------

    async def _count(self, queue: str | None, states: Sequence[JobState]) -> int:
        backend = await self.backend()
        total = 0
        for name in await self._queues(backend, queue):
            total += await backend.reads.get_job_count(name, list(states))
        return total

    @offered
    async def size(self, queue: str | None = None) -> int:
        return await self._count(queue, SIZE_STATES)

    @offered
    async def pending_size(self, queue: str | None = None) -> int:
        """Waiting plus due delayed jobs (A16)."""
        backend = await self.backend()
        queues = await self._queues(backend, queue)
        return sum([await backend.reads.count_ready_jobs(name) for name in queues])

    @offered
    async def delayed_size(self, queue: str | None = None) -> int:
        """Delayed jobs not due yet: a due one is pending (A16, INSP-5), counted once."""
        backend = await self.backend()
        queues = await self._queues(backend, queue)
        return sum([await backend.reads.count_scheduled_jobs(name) for name in queues])

    @offered
    async def reserved_size(self, queue: str | None = None) -> int:
        return await self._count(queue, ("active",))

    async def _listing(
        self, queue: str | None, listed: JobState | Literal["ready", "scheduled"], limit: int
    ) -> list[JobRow]:
        """Jobs of one state, or the ``ready`` (waiting and due delayed) or ``scheduled``
        (delayed, not due) ones, so a listing agrees with its count (INSP-5)."""
        if limit < 0:
            raise ConfigurationError(f"a listing limit cannot be negative, got {limit}")
        backend = await self.backend()
        found: list[JobRow] = []
        for name in await self._queues(backend, queue):
            offset = 0
            while len(found) < limit:
                size = min(limit - len(found), 500)
                if listed == "ready":
                    page = await backend.reads.list_ready_jobs(name, offset=offset, limit=size)
                elif listed == "scheduled":
                    page = await backend.reads.list_scheduled_jobs(name, offset=offset, limit=size)
                else:
                    page = await backend.reads.list_jobs(name, [listed], offset=offset, limit=size)
                found.extend(page.items)
                offset += len(page.items)
                if not page.items or offset >= page.total:
                    break
        return found[:limit]

    @offered
    async def pending_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "ready", limit)

    @offered
    async def delayed_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "scheduled", limit)

    @offered
    async def reserved_jobs(
        self, queue: str | None = None, *, limit: int = DEFAULT_LISTING_LIMIT
    ) -> list[JobRow]:
        return await self._listing(queue, "active", limit)

    @offered
    async def clear(self, queue: str | None = None) -> int:
        """Remove the queue's (every queue's) clearable jobs (A16), in one transaction;
        returns the count."""
        backend = await self.backend()
        return await backend.cleanup.clear_queues(None if queue is None else [queue])

    # -- reservations (DRV-5) --------------------------------------------------------------

    @offered
    async def pop(self) -> Reservation | None:
        """Lease the next job of any queue, or None when nothing is ready."""
        backend = await self.backend()
        return await self._claim(backend, await backend.queues.list_queues())

    @offered
    async def pop_from(self, queues: Sequence[str]) -> Reservation | None:
        """Lease the next job of ``queues`` (earlier queues first), or None."""
        if not queues:
            raise ConfigurationError("pop_from takes at least one queue")
        return await self._claim(await self.backend(), queues)

    async def _claim(self, backend: JobQueueBackend, queues: Sequence[str]) -> Reservation | None:
        if not queues:
            return None
        demands = [QueueDemand(name, 1) for name in dict.fromkeys(queues)]
        claimed = await backend.runs.claim_jobs(
            self.worker_id, demands, self.visibility_timeout, total=1
        )
        if not claimed:
            return None
        job = claimed[0]
        expires_at = job.lease_expires_at or datetime.now(UTC) + self.visibility_timeout
        return Reservation(job.lock_token, job, self.driver_name, expires_at)

    @offered
    async def settle(self, reservation: Reservation, outcome: Settlement) -> SettleResult:
        backend = await self.backend()
        job, token = reservation.job, reservation.token
        try:
            if isinstance(outcome, Ack):
                await backend.runs.complete_job(job.queue, job.id, token, outcome.result)
            elif isinstance(outcome, Nack):
                await backend.runs.fail_job(
                    job.queue, job.id, token, outcome.reason, discard_retry=not outcome.retry
                )
            else:  # Release: the attempt is not charged (A2)
                await backend.runs.give_back_job(job.queue, job.id, token, outcome.delay)
        except (LockMismatch, JobNotFound):
            return STALE  # the lease is no longer ours: the backend changed nothing
        return SETTLED

    async def ack(self, reservation: Reservation, result: JSON = None) -> SettleResult:
        return await self.settle(reservation, Ack(result))

    async def nack(
        self, reservation: Reservation, reason: str, *, retry: bool = True
    ) -> SettleResult:
        return await self.settle(reservation, Nack(reason, retry))

    async def release(self, reservation: Reservation, delay: Duration = 0) -> SettleResult:
        return await self.settle(reservation, Release(delay))

    # -- pausing (PAUSE-3..5; lane_pg.facade.pausing) ------------------------------------

    @offered
    async def pause_queue(self, queue: str) -> None:
        await (await self.backend()).queues.pause_queue(queue)

    @offered
    async def resume_queue(self, queue: str) -> None:
        await (await self.backend()).queues.resume_queue(queue)

    @offered
    async def pause_all(self) -> None:
        await (await self.backend()).queues.pause_all()

    @offered
    async def resume_all(self) -> None:
        await (await self.backend()).queues.resume_all()

    @offered
    async def pause_status(self, queues: Sequence[str]) -> PauseStatus:
        return await (await self.backend()).queues.get_pause_status(queues)

    async def close(self) -> None:
        if self._backend is not None:
            await self._backend.close()
            if self._lazy:
                self._backend = None  # a lazy connection may open again


QueueDriver = Connection


class _Unserved:
    """The implementation behind a backend that serves nothing: every operation raises."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def unserved(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(f"no backend serves {name}")

        return unserved


class Unserved(JobQueueBackend):
    """The backend of a connection that has none (``DriverBase``, ``FailoverDriver``): its
    operations raise ``NotImplementedError``, which the connection words (CONN-14)."""

    kind = "unserved"

    def __init__(self) -> None:
        self._serve({}, default=_Unserved())


UNSERVED: Final = Unserved()
"""The name of a connection before the facade moved onto the contract (DRV-5)."""


class BackendDriver(Connection):
    """A connection whose backend keeps the jobs pushed to it: postgres, memory, local, or a
    third-party backend. Workers claim from it and failed jobs are retried into it."""


class DriverBase(Connection):
    """A third-party connection without a backend: it overrides the operations it offers;
    every other one raises ``NotImplementedError`` naming the driver and the operation
    (CONN-14), so an inspection it cannot answer is an honest error, never an empty list.
    A store of jobs is better written as a backend (``lane_pg.backend``) under a
    ``BackendDriver``: it then offers every operation, and workers run on it."""

    def __init__(self) -> None:
        """Nothing to set up: a subclass need not call it."""

    @property
    def filters_queues(self) -> bool:
        return False

    @property
    def driver_name(self) -> str:
        return type(self).__name__

    @property
    def store_key(self) -> StoreKey | None:
        return None

    async def backend(self) -> JobQueueBackend:
        return UNSERVED

    async def close(self) -> None:
        return None
